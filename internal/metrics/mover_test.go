package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A standalone mover's metrics, as its sources report them.
func TestMoverState(t *testing.T) {
	registered := true
	h, g := MoverHandler(MoverSources{
		Devices: func() []MoverDevice {
			return []MoverDevice{{ID: "far0", Pool: "disk", Capacity: 1000, Used: 300, Free: 700}}
		},
		Stats:        func() (int64, int64, int64) { return 2, 3, 4 },
		Registration: func() (bool, int64, int64) { return registered, 7, 1 },
	})
	const want = `
# HELP strata_mover_core_epoch The core's epoch, as last learnt by registering.
# TYPE strata_mover_core_epoch gauge
strata_mover_core_epoch 7
# HELP strata_mover_device_capacity_bytes Capacity of a device this mover serves.
# TYPE strata_mover_device_capacity_bytes gauge
strata_mover_device_capacity_bytes{device="far0",pool="disk"} 1000
# HELP strata_mover_device_free_bytes Bytes a device can still take (bounded by its file system's free space).
# TYPE strata_mover_device_free_bytes gauge
strata_mover_device_free_bytes{device="far0",pool="disk"} 700
# HELP strata_mover_device_used_bytes Bytes of objects on a device, as the mover counts them.
# TYPE strata_mover_device_used_bytes gauge
strata_mover_device_used_bytes{device="far0",pool="disk"} 300
# HELP strata_mover_files_handed_total Reads the mover answered by handing the object's file to a client on its host.
# TYPE strata_mover_files_handed_total counter
strata_mover_files_handed_total 2
# HELP strata_mover_files_read_total Writes for which the mover read the client's own file.
# TYPE strata_mover_files_read_total counter
strata_mover_files_read_total 3
# HELP strata_mover_registered 1 if the mover's last registration with the core succeeded, else 0.
# TYPE strata_mover_registered gauge
strata_mover_registered 1
# HELP strata_mover_registration_failures_total Registrations with the core that failed.
# TYPE strata_mover_registration_failures_total counter
strata_mover_registration_failures_total 1
# HELP strata_mover_ring_writes_total Writes whose bytes the mover took from a ring of memory a client on its host shared.
# TYPE strata_mover_ring_writes_total counter
strata_mover_ring_writes_total 4
`
	names := []string{"strata_mover_core_epoch", "strata_mover_device_capacity_bytes", "strata_mover_device_free_bytes", "strata_mover_device_used_bytes",
		"strata_mover_files_handed_total", "strata_mover_files_read_total", "strata_mover_registered", "strata_mover_registration_failures_total", "strata_mover_ring_writes_total"}
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// Served over HTTP at /metrics only, with the runtime's metrics.
	registered = false
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, line := range []string{"strata_mover_registered 0", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/other", nil))
	if rec.Code != 404 {
		t.Errorf("/other: %d, want 404", rec.Code)
	}
}
