package sim

import (
	"fmt"
	"math"
	"testing"
)

// A duplex cap below twice the NIC (CeMSS's crossbar ports) limits a
// client reading and writing at once to the cap, where separate
// directions give it the NIC both ways; an oversubscribed rack uplink
// limits the clients behind it to the uplink, and the bound names the
// term that binds in each case.
func TestDuplexAndRackUplinks(t *testing.T) {
	study := func(clients int, op, extra string) *Config {
		s, err := ParseStudy([]byte(fmt.Sprintf(`[clients]
count = %d
nic = "100MB/s"
%s
[servers]
count = 8
nic = "1GB/s"
[storage]
kind = "curve"
per_server = 2
[storage.curve]
read_rate = "1GB/s"
write_rate = "1GB/s"
[workload]
op = %q
streams = 2
record = "1MB"
file_size = "200MB"
`, clients, extra, op)))
		if err != nil {
			t.Fatal(err)
		}
		return s.Config
	}
	for _, tc := range []struct {
		name    string
		clients int
		op      string
		extra   string
		mbps    float64
		binds   string
	}{
		{"both directions, no duplex cap", 1, "mixed", "", 200, "N·I"},
		{"both directions, duplex 120", 1, "mixed", `duplex = "120MB/s"`, 120, "N·duplex"},
		{"writes, racks of 4 at 150", 8, "write", "[network]\nrack_size = 4\nrack_uplink = \"150MB/s\"", 300, "racks·U"},
		{"reads, racks of 4 at 150", 8, "read", "[network]\nrack_size = 4\nrack_uplink = \"150MB/s\"", 300, "racks·U"},
		{"writes, racks of 4 at 1 GB/s", 8, "write", "[network]\nrack_size = 4\nrack_uplink = \"1GB/s\"", 800, "N·I"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := study(tc.clients, tc.op, tc.extra)
			r := run(t, c)
			if math.Abs(r.MBps-tc.mbps)/tc.mbps > 0.01 {
				t.Errorf("DES %.1f MB/s, want %.0f", r.MBps, tc.mbps)
			}
			if r.Bound.Binding != tc.binds {
				t.Errorf("bound binds %s (%.0f MB/s), want %s", r.Bound.Binding, r.Bound.MBps, tc.binds)
			}
		})
	}
	if _, err := ParseStudy([]byte("[network]\nrack_size = 4\n")); err == nil {
		t.Error("racks without an uplink rate accepted")
	}
}

// clients.latency_ms is paid once per request, before its bytes move: one
// synchronous stream of 1 MB requests at 100 MB/s with 5 ms each takes
// 15 ms a request; the pieces of a striped request pay it side by side.
func TestLatencyPerRequest(t *testing.T) {
	for _, tc := range []struct {
		layout string
		stripe int
		want   float64 // MB/s
	}{
		{"distribute", 0, 1e6 / (5e-3 + 1e6/100e6) / 1e6},
		{"stripe", 4, 1e6 / (5e-3 + 0.25e6/100e6) / 1e6},
	} {
		s, err := ParseStudy([]byte(fmt.Sprintf(`[clients]
latency_ms = 5
[storage]
kind = "curve"
per_server = 4
[storage.curve]
write_rate = "100MB/s"
[workload]
op = "write"
record = "1MB"
file_size = "100MB"
depth = 1
layout = %q
stripe = %d
`, tc.layout, tc.stripe)))
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, s.Config)
		if math.Abs(r.MBps-tc.want)/tc.want > 0.01 {
			t.Errorf("%s: %.2f MB/s, want %.2f", tc.layout, r.MBps, tc.want)
		}
	}
}

// With a stripe unit a file lies on its devices unit by unit, as
// Strata's stripes do: one stream of unit-sized requests, one at a time,
// keeps one device busy; with as many in flight as devices it keeps all
// of them; split evenly (no unit) every request uses every device. Files
// of several streams start on different devices, so eight streams
// striped over all eight devices do not queue behind each other.
func TestStripeUnit(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		streams, depth, stripe int
		unit                   string
		want                   float64 // MB/s
	}{
		{"one at a time", 1, 1, 4, "4MiB", 25},
		{"four in flight", 1, 4, 4, "4MiB", 100},
		{"split evenly", 1, 1, 4, "0", 100},
		{"eight streams over eight devices", 8, 1, 8, "4MiB", 200},
	} {
		s, err := ParseStudy([]byte(fmt.Sprintf(`[storage]
kind = "curve"
per_server = 8
[storage.curve]
read_rate = "25MB/s"
[workload]
op = "read"
streams = %d
record = "4MiB"
file_size = "128MiB"
layout = "stripe"
stripe = %d
stripe_unit = %q
depth = %d
`, tc.streams, tc.stripe, tc.unit, tc.depth)))
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, s.Config)
		if math.Abs(r.MBps-tc.want)/tc.want > 0.01 {
			t.Errorf("%s: %.1f MB/s, want %.0f", tc.name, r.MBps, tc.want)
		}
	}
}
