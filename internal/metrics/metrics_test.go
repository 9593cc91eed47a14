package metrics

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-storage/strata/internal/api"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Requests are counted by the route the API's mux matched and the status
// sent, timed per route, and anything outside the routes is "unmatched".
func TestRequests(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stat", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "/missing" {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		io.WriteString(w, "{}")
	})
	mux.HandleFunc("POST /v1/create", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusConflict) })
	m := New(Sources{})
	srv := httptest.NewServer(m.Handler(mux))
	defer srv.Close()

	for i := 0; i < 3; i++ {
		get(t, srv.URL+"/v1/stat?path=/f")
	}
	get(t, srv.URL+"/v1/stat?path=/missing")
	http.Post(srv.URL+"/v1/create", "application/json", strings.NewReader("{}"))
	get(t, srv.URL+"/v1/unknown/route/1")
	get(t, srv.URL+"/v1/unknown/route/2")

	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"GET /v1/stat", "200", 3},
		{"GET /v1/stat", "404", 1},
		{"POST /v1/create", "409", 1},
		{"unmatched", "404", 2},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.route, c.code)); got != c.want {
			t.Errorf("requests{route=%q,code=%s} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	// One latency series per route, each request observed once.
	if n := testutil.CollectAndCount(m.latency); n != 3 {
		t.Errorf("%d latency series, want 3 (stat, create, unmatched)", n)
	}
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `strata_api_request_duration_seconds_count{route="GET /v1/stat"} 4`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if !strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "process_cpu_seconds_total ") {
		t.Error("/metrics lacks the Go runtime and process metrics")
	}
}

// The process's CPU to the microsecond (strata bench's CPU an operation):
// it grows by what this process spends, as getrusage counts it around the
// same work.
func TestCPUCounter(t *testing.T) {
	c := cpuCounter()
	rusage := func() float64 {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(syscall.TimevalToNsec(ru.Utime)+syscall.TimevalToNsec(ru.Stime)) / 1e9
	}
	a, r0 := testutil.ToFloat64(c), rusage()
	for x, t0 := 0, time.Now(); time.Since(t0) < 30*time.Millisecond; x++ {
		_ = x * x // spend CPU
	}
	r1, b := rusage(), testutil.ToFloat64(c)
	if a <= 0 || b-a <= 0 || math.Abs((b-a)-(r1-r0)) > 0.002 {
		t.Errorf("CPU seconds %v then %v; getrusage inside %v then %v", a, b, r0, r1)
	}
}

// Each group transaction of the catalog's writer lands in both histograms
// once: its duration and its size.
func TestGroups(t *testing.T) {
	m := New(Sources{})
	m.ObserveGroup(4, 150*time.Microsecond)
	m.ObserveGroup(1, 30*time.Microsecond)
	m.ObserveGroup(300, 5*time.Millisecond)
	const want = `
# HELP strata_catalog_group_operations Operations each of the catalog writer's group transactions held (one durable sync shared among them).
# TYPE strata_catalog_group_operations histogram
strata_catalog_group_operations_bucket{le="1"} 1
strata_catalog_group_operations_bucket{le="2"} 1
strata_catalog_group_operations_bucket{le="4"} 2
strata_catalog_group_operations_bucket{le="8"} 2
strata_catalog_group_operations_bucket{le="16"} 2
strata_catalog_group_operations_bucket{le="32"} 2
strata_catalog_group_operations_bucket{le="64"} 2
strata_catalog_group_operations_bucket{le="128"} 2
strata_catalog_group_operations_bucket{le="256"} 2
strata_catalog_group_operations_bucket{le="512"} 3
strata_catalog_group_operations_bucket{le="+Inf"} 3
strata_catalog_group_operations_sum 305
strata_catalog_group_operations_count 3
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "strata_catalog_group_operations"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.groupTime); n != 1 {
		t.Fatalf("%d duration series", n)
	}
	srv := httptest.NewServer(m.Handler(http.NewServeMux()))
	defer srv.Close()
	code, body := get(t, srv.URL+"/metrics")
	for _, line := range []string{
		`strata_catalog_group_duration_seconds_bucket{le="2.5e-05"} 0`,
		`strata_catalog_group_duration_seconds_bucket{le="5e-05"} 1`,
		`strata_catalog_group_duration_seconds_bucket{le="0.0002"} 2`,
		`strata_catalog_group_duration_seconds_bucket{le="0.0064"} 3`,
		`strata_catalog_group_duration_seconds_count 3`,
	} {
		if code != http.StatusOK || !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
}

// The state metrics are what the sources report at scrape time.
func TestState(t *testing.T) {
	oldest := time.Unix(1700000000, 500_000_000)
	src := Sources{
		DF: func(context.Context) (api.DFResponse, error) {
			return api.DFResponse{Devices: []api.DeviceInfo{
				{ID: "d0", Pool: "disk", Mover: "m0", Online: true, Capacity: 1000, Used: 250},
				{ID: "d1", Pool: "disk", Mover: "m1", Online: false, Capacity: 2000},
			}}, nil
		},
		Library: func(context.Context) (api.Library, error) {
			return api.Library{
				Drives:     []api.Drive{{ID: "drive0", State: "recall", Mounts: 3, Locates: 7, Positioning: 12.5, BytesRead: 4096, BytesWrite: 8192}},
				Cartridges: []api.Cartridge{{Volume: "T00000", Capacity: 18e12, Used: 5e9}},
				Queue:      []api.QueueEntry{{Volume: "T00000", Files: 4, Bytes: 1 << 20, Oldest: oldest}},
			}, nil
		},
		Groups:    func() (int64, int64) { return 10, 42 },
		Mover:     func() (int64, int64, int64) { return 5, 6, 7 },
		Integrity: func() api.Integrity { return api.Integrity{DamagedDisk: 3, DamagedTape: 1, Repaired: 2, Lost: 1} },
	}
	m := New(src)
	const want = `
# HELP strata_catalog_group_commits_total Transactions the catalog's writer committed (each one durable sync).
# TYPE strata_catalog_group_commits_total counter
strata_catalog_group_commits_total 10
# HELP strata_catalog_operations_total Namespace changes committed; divided by group commits, the group size.
# TYPE strata_catalog_operations_total counter
strata_catalog_operations_total 42
# HELP strata_damaged_copies_total Copies of files found damaged at rest (by readers, migration, recalls), by where the copy was.
# TYPE strata_damaged_copies_total counter
strata_damaged_copies_total{copy="disk"} 3
strata_damaged_copies_total{copy="tape"} 1
# HELP strata_device_capacity_bytes Capacity of a disk device.
# TYPE strata_device_capacity_bytes gauge
strata_device_capacity_bytes{device="d0",mover="m0",pool="disk"} 1000
strata_device_capacity_bytes{device="d1",mover="m1",pool="disk"} 2000
# HELP strata_device_online 1 if the device's mover is registered, else 0.
# TYPE strata_device_online gauge
strata_device_online{device="d0",mover="m0",pool="disk"} 1
strata_device_online{device="d1",mover="m1",pool="disk"} 0
# HELP strata_device_used_bytes Bytes the catalog has placed on a disk device (committed and reserved).
# TYPE strata_device_used_bytes gauge
strata_device_used_bytes{device="d0",mover="m0",pool="disk"} 250
strata_device_used_bytes{device="d1",mover="m1",pool="disk"} 0
# HELP strata_lost_files_total Files found with no good copy left.
# TYPE strata_lost_files_total counter
strata_lost_files_total 1
# HELP strata_mover_files_handed_total Reads the mover answered by handing the object's file to a client on its host.
# TYPE strata_mover_files_handed_total counter
strata_mover_files_handed_total 5
# HELP strata_mover_files_read_total Writes for which the mover read the client's own file.
# TYPE strata_mover_files_read_total counter
strata_mover_files_read_total 6
# HELP strata_mover_ring_writes_total Writes whose bytes the mover took from a ring of memory a client on its host shared.
# TYPE strata_mover_ring_writes_total counter
strata_mover_ring_writes_total 7
# HELP strata_recall_queue_bytes Bytes waiting to be recalled from a cartridge.
# TYPE strata_recall_queue_bytes gauge
strata_recall_queue_bytes{volume="T00000"} 1.048576e+06
# HELP strata_recall_queue_files Files waiting to be recalled from a cartridge.
# TYPE strata_recall_queue_files gauge
strata_recall_queue_files{volume="T00000"} 4
# HELP strata_recall_queue_oldest_timestamp_seconds When the oldest recall request waiting for a cartridge was queued (Unix time; time() minus it is its age).
# TYPE strata_recall_queue_oldest_timestamp_seconds gauge
strata_recall_queue_oldest_timestamp_seconds{volume="T00000"} 1.7000000005e+09
# HELP strata_repaired_copies_total Copies made again from a good copy after one was found damaged.
# TYPE strata_repaired_copies_total counter
strata_repaired_copies_total 2
# HELP strata_tape_cartridge_capacity_bytes Capacity of a cartridge.
# TYPE strata_tape_cartridge_capacity_bytes gauge
strata_tape_cartridge_capacity_bytes{volume="T00000"} 1.8e+13
# HELP strata_tape_cartridge_used_bytes Bytes written to a cartridge.
# TYPE strata_tape_cartridge_used_bytes gauge
strata_tape_cartridge_used_bytes{volume="T00000"} 5e+09
# HELP strata_tape_drive_locates_total Positionings (locates) of a drive.
# TYPE strata_tape_drive_locates_total counter
strata_tape_drive_locates_total{drive="drive0"} 7
# HELP strata_tape_drive_mounts_total Cartridges mounted in a drive.
# TYPE strata_tape_drive_mounts_total counter
strata_tape_drive_mounts_total{drive="drive0"} 3
# HELP strata_tape_drive_positioning_seconds_total Time a drive spent positioning (library time).
# TYPE strata_tape_drive_positioning_seconds_total counter
strata_tape_drive_positioning_seconds_total{drive="drive0"} 12.5
# HELP strata_tape_drive_read_bytes_total Bytes a drive read.
# TYPE strata_tape_drive_read_bytes_total counter
strata_tape_drive_read_bytes_total{drive="drive0"} 4096
# HELP strata_tape_drive_state 1 for a drive's current state (idle, recall, migrate, repack, failed …).
# TYPE strata_tape_drive_state gauge
strata_tape_drive_state{drive="drive0",state="recall"} 1
# HELP strata_tape_drive_written_bytes_total Bytes a drive wrote.
# TYPE strata_tape_drive_written_bytes_total counter
strata_tape_drive_written_bytes_total{drive="drive0"} 8192
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), stateNames()...); err != nil {
		t.Error(err)
	}

	// No library: its metrics are left out, the rest still served. A
	// failing device listing fails that part of the scrape alone.
	src.Library = func(context.Context) (api.Library, error) {
		return api.Library{}, errors.New("no tape library configured")
	}
	src.DF = func(context.Context) (api.DFResponse, error) { return api.DFResponse{}, errors.New("catalog: closed") }
	srv := httptest.NewServer(New(src).Handler(http.NewServeMux()))
	defer srv.Close()
	_, body := get(t, srv.URL+"/metrics")
	if strings.Contains(body, "strata_tape_") || !strings.Contains(body, "strata_catalog_group_commits_total 10") {
		t.Errorf("scrape without a library and with a failing df:\n%s", body)
	}
}

func stateNames() []string {
	return []string{"strata_catalog_group_commits_total", "strata_catalog_operations_total", "strata_device_capacity_bytes", "strata_device_online",
		"strata_damaged_copies_total", "strata_lost_files_total", "strata_repaired_copies_total",
		"strata_device_used_bytes", "strata_mover_files_handed_total", "strata_mover_files_read_total", "strata_mover_ring_writes_total", "strata_recall_queue_bytes",
		"strata_recall_queue_files", "strata_recall_queue_oldest_timestamp_seconds", "strata_tape_cartridge_capacity_bytes",
		"strata_tape_cartridge_used_bytes", "strata_tape_drive_locates_total", "strata_tape_drive_mounts_total",
		"strata_tape_drive_positioning_seconds_total", "strata_tape_drive_read_bytes_total", "strata_tape_drive_state",
		"strata_tape_drive_written_bytes_total"}
}
