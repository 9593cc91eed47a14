package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-storage/strata/internal/tape"
)

// A tape server's metrics, as its sources report them: each drive's state
// and counters, the cartridge it holds, and its registration.
func TestTapeServerState(t *testing.T) {
	_, g := TapeServerHandler(TapeServerSources{
		Drives: func() []tape.DriveInfo {
			return []tape.DriveInfo{
				{ID: "t0-drive0", Volume: "T00001", Busy: true, Stats: tape.Stats{Mounts: 3, BytesRead: 100, BytesWritten: 200, Positioning: 1500 * time.Millisecond}},
				{ID: "t0-drive1", Failed: true},
			}
		},
		Registration: func() (bool, int64, int64) { return true, 4, 2 },
	})
	const want = `
# HELP strata_tapeserver_core_epoch The core's epoch, as last learnt by registering.
# TYPE strata_tapeserver_core_epoch gauge
strata_tapeserver_core_epoch 4
# HELP strata_tapeserver_drive_busy 1 while the drive is moving data or positioning, else 0.
# TYPE strata_tapeserver_drive_busy gauge
strata_tapeserver_drive_busy{drive="t0-drive0"} 1
strata_tapeserver_drive_busy{drive="t0-drive1"} 0
# HELP strata_tapeserver_drive_failed 1 if the drive reports itself failed, else 0.
# TYPE strata_tapeserver_drive_failed gauge
strata_tapeserver_drive_failed{drive="t0-drive0"} 0
strata_tapeserver_drive_failed{drive="t0-drive1"} 1
# HELP strata_tapeserver_drive_loaded 1 for the cartridge a drive holds.
# TYPE strata_tapeserver_drive_loaded gauge
strata_tapeserver_drive_loaded{drive="t0-drive0",volume="T00001"} 1
# HELP strata_tapeserver_drive_mounts_total Cartridges mounted in the drive.
# TYPE strata_tapeserver_drive_mounts_total counter
strata_tapeserver_drive_mounts_total{drive="t0-drive0"} 3
strata_tapeserver_drive_mounts_total{drive="t0-drive1"} 0
# HELP strata_tapeserver_drive_positioning_seconds_total Time the drive spent positioning (library time).
# TYPE strata_tapeserver_drive_positioning_seconds_total counter
strata_tapeserver_drive_positioning_seconds_total{drive="t0-drive0"} 1.5
strata_tapeserver_drive_positioning_seconds_total{drive="t0-drive1"} 0
# HELP strata_tapeserver_drive_read_bytes_total Bytes the drive read.
# TYPE strata_tapeserver_drive_read_bytes_total counter
strata_tapeserver_drive_read_bytes_total{drive="t0-drive0"} 100
strata_tapeserver_drive_read_bytes_total{drive="t0-drive1"} 0
# HELP strata_tapeserver_drive_written_bytes_total Bytes the drive wrote.
# TYPE strata_tapeserver_drive_written_bytes_total counter
strata_tapeserver_drive_written_bytes_total{drive="t0-drive0"} 200
strata_tapeserver_drive_written_bytes_total{drive="t0-drive1"} 0
# HELP strata_tapeserver_registered 1 if the tape server's last registration with the core succeeded, else 0.
# TYPE strata_tapeserver_registered gauge
strata_tapeserver_registered 1
# HELP strata_tapeserver_registration_failures_total Registrations with the core that failed.
# TYPE strata_tapeserver_registration_failures_total counter
strata_tapeserver_registration_failures_total 2
`
	names := []string{"strata_tapeserver_core_epoch", "strata_tapeserver_drive_busy", "strata_tapeserver_drive_failed", "strata_tapeserver_drive_loaded",
		"strata_tapeserver_drive_mounts_total", "strata_tapeserver_drive_positioning_seconds_total", "strata_tapeserver_drive_read_bytes_total",
		"strata_tapeserver_drive_written_bytes_total", "strata_tapeserver_registered", "strata_tapeserver_registration_failures_total"}
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
