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
// not see the disk at all. With a copy rate C, each request is copied
// into the page cache after it arrives, before the next is asked for (one
// in flight, as strata bench --sink reads): F/R + F/C + F/D.
func TestSinkFsyncAfterRead(t *testing.T) {
	const R, D, F, C = 100e6, 400e6, 400e6, 200e6
	study := func(clients, streams int, rate, dirty, copy string, depth int) *Config {
		s, err := ParseStudy([]byte(fmt.Sprintf(`[clients]
count = %d
sink_rate = %q
sink_dirty = %q
sink_copy = %q
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
depth = %d
file_size = "400MB"
layout = "distribute"
`, clients, rate, dirty, copy, streams, depth)))
		if err != nil {
			t.Fatal(err)
		}
		return s.Config
	}
	for _, tc := range []struct {
		name             string
		clients, streams int
		rate, dirty      string
		copy             string
		depth            int // 0: the default
		seconds          float64
	}{
		{"memory", 1, 1, "0", "0", "0", 0, F / R},
		{"one reader", 1, 1, "400MB/s", "0", "0", 0, F/R + F/D},
		{"four readers share one disk", 1, 4, "400MB/s", "0", "0", 0, F/R + 4*F/D},
		{"four clients, a disk each", 4, 1, "400MB/s", "0", "0", 0, F/R + F/D},
		{"past the dirty limit", 1, 1, "400MB/s", "100MB", "0", 0, F/R + 100e6/D},
		{"slow disk writes back during the read", 1, 1, "50MB/s", "100MB", "0", 0, 100e6/R + 300e6/50e6 + 100e6/50e6},
		{"each request copied after it arrives", 1, 1, "400MB/s", "0", "200MB/s", 1, F/R + F/C + F/D},
		{"four clients, a copy each", 4, 1, "400MB/s", "0", "200MB/s", 1, F/R + F/C + F/D},
		{"the copy alone binds four readers of one host", 1, 4, "400MB/s", "0", "50MB/s", 0, 4*F/50e6 + 4*F/D},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, study(tc.clients, tc.streams, tc.rate, tc.dirty, tc.copy, tc.depth))
			// within 1 %: past the dirty limit, the last request's
			// writeback ends after its read
			if math.Abs(r.Seconds-tc.seconds)/tc.seconds > 0.01 {
				t.Errorf("%.4f s, want %.4f", r.Seconds, tc.seconds)
			}
		})
	}
}
