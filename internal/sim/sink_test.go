package sim

import (
	"fmt"
	"math"
	"testing"
)

// A reader that writes what it reads into local files and fsyncs each
// (strata get) pays each file's flush after its read: one stream of F
// bytes from a device at R into a disk at D takes F/R + F/D. Four readers
// on one client share its disk at the fsync; readers on four clients do
// not. Past the page cache's share the disk writes back during the read,
// so a disk slower than the device sets the rate; a get to memory does
// not see the disk at all.
func TestSinkFsyncAfterRead(t *testing.T) {
	const R, D, F = 100e6, 400e6, 400e6
	study := func(clients, streams int, rate, dirty string) *Config {
		s, err := ParseStudy([]byte(fmt.Sprintf(`[clients]
count = %d
sink_rate = %q
sink_dirty = %q
[servers]
count = 1
[storage]
kind = "curve"
per_server = 16
[storage.curve]
read_rate = "100MB/s"
write_rate = "100MB/s"
[workload]
op = "read"
streams = %d
record = "4MB"
file_size = "400MB"
layout = "distribute"
`, clients, rate, dirty, streams)))
		if err != nil {
			t.Fatal(err)
		}
		return s.Config
	}
	for _, tc := range []struct {
		name             string
		clients, streams int
		rate, dirty      string
		seconds          float64
	}{
		{"memory", 1, 1, "0", "0", F / R},
		{"one reader", 1, 1, "400MB/s", "0", F/R + F/D},
		{"four readers share one disk", 1, 4, "400MB/s", "0", F/R + 4*F/D},
		{"four clients, a disk each", 4, 1, "400MB/s", "0", F/R + F/D},
		{"past the dirty limit", 1, 1, "400MB/s", "100MB", F/R + 100e6/D},
		{"slow disk writes back during the read", 1, 1, "50MB/s", "100MB", 100e6/R + 300e6/50e6 + 100e6/50e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, study(tc.clients, tc.streams, tc.rate, tc.dirty))
			// within 1 %: past the dirty limit, the last request's
			// writeback ends after its read
			if math.Abs(r.Seconds-tc.seconds)/tc.seconds > 0.01 {
				t.Errorf("%.4f s, want %.4f", r.Seconds, tc.seconds)
			}
		})
	}
}
