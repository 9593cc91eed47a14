package sim

import (
	"fmt"
	"math"
	"testing"
)

// A RAID-5 write whose record does not divide the stripe, with the
// controller's cache at its default (one stripe), completes at close to
// the array's bound. It used to stop short as "a model deadlock": the tail
// of a record, a partial stripe, held the cache the next record needed to
// complete that stripe.
func TestRAIDPartialStripeWrites(t *testing.T) {
	for _, c := range []struct {
		disks        int
		unit, record string
	}{
		{10, "64KiB", "1MB"},
		{5, "1536KiB", "32MiB"},
		{5, "3MiB", "32MiB"},
		{5, "6MiB", "32MiB"},
		{9, "64KiB", "100KB"},
		{5, "512KiB", "2MiB"}, // divides the stripe: unchanged
	} {
		name := fmt.Sprintf("%d disks, %s units, %s records", c.disks, c.unit, c.record)
		cfg, err := Parse([]byte(fmt.Sprintf(`
[storage]
kind = "raid5"
disk = "ata-2003-8mb"
[storage.array]
disks = %d
stripe_unit = %q
[workload]
op = "write"
record = %q
file_size = "256MiB"
sync = true
`, c.disks, c.unit, c.record)))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(cfg, 1)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s: %.1f MB/s, bound %.1f", name, r.MBps, r.Bound.MBps)
		if r.Bytes != 256<<20 || r.MBps > r.Bound.MBps*1.0001 || r.MBps < 0.5*r.Bound.MBps {
			t.Errorf("%s: %d bytes at %.1f MB/s against a bound of %.1f", name, r.Bytes, r.MBps, r.Bound.MBps)
		}
	}
}

// One stream reading a current 8+1 array streams every member at its
// media rate: a member skipping the parity unit it holds keeps its
// read-ahead (read_ahead_gap). Without that each stripe waited a
// revolution for the member that had just skipped parity, and the array
// read at 3–48 % of its bound for 64 KiB–2 MiB units.
func TestRAIDReadKeepsStreaming(t *testing.T) {
	for _, unit := range []string{"64KiB", "256KiB", "1MiB", "2MiB"} {
		r := readArray(t, unit, 1, "2GiB")
		t.Logf("%s units: %.1f MB/s, bound %.1f", unit, r.MBps, r.Bound.MBps)
		if r.MBps < 0.95*r.Bound.MBps || r.MBps > r.Bound.MBps*1.0001 {
			t.Errorf("%s units: %.1f MB/s against a bound of %.1f", unit, r.MBps, r.Bound.MBps)
		}
	}
}

// Several streams reading different files of a current 8+1 array: each
// member keeps a read-ahead segment per stream and reads on a prefetch
// before it turns to another (read_ahead_segments, prefetch), so more
// streams share the array at a cost per switch, and none reads the array
// faster than one stream does. With one segment every switch sought and
// waited for the sector: two streams read 6 % of the bound at 64 KiB.
func TestRAIDSeveralReaders(t *testing.T) {
	for _, unit := range []string{"64KiB", "1MiB"} {
		var one float64
		for _, n := range []int{1, 2, 4} {
			r := readArray(t, unit, n, "1GiB")
			t.Logf("%s units, %d streams: %.1f MB/s, bound %.1f", unit, n, r.MBps, r.Bound.MBps)
			if n == 1 {
				one = r.MBps
			}
			if r.MBps > one*1.0001 || r.MBps < 0.6*r.Bound.MBps {
				t.Errorf("%s units, %d streams: %.1f MB/s (one stream %.1f, bound %.1f)", unit, n, r.MBps, one, r.Bound.MBps)
			}
		}
	}
}

// readArray runs streams readers of files of size each on a current 8+1
// array of unit stripe units.
func readArray(t *testing.T, unit string, streams int, size string) *Result {
	t.Helper()
	return runArray(t, "raid5", 9, unit, fmt.Sprintf("op = %q\nstreams = %d\nrecord = \"8MiB\"\nfile_size = %q", "read", streams, size), "")
}

// runArray runs a study of one array of disks sata-7k2 members: kind
// (raid5, raid6), the workload's keys and more [storage.array] keys.
func runArray(t *testing.T, kind string, disks int, unit, workload, array string) *Result {
	t.Helper()
	cfg, err := Parse([]byte(fmt.Sprintf(`
[clients]
nic = "10GB/s"
[storage]
kind = %q
disk = "sata-7k2"
[storage.array]
disks = %d
stripe_unit = %q
%s
[workload]
%s
`, kind, disks, unit, array, workload)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A RAID-6 array streams at (n − 2) members' media rate, reading (each
// member skips the two parity units it holds without losing its
// read-ahead) and writing (full stripes, P and Q beside the data), and a
// partial-stripe write (read-modify-write of data, P and Q) completes.
func TestRAID6(t *testing.T) {
	for _, c := range []struct {
		unit, op, record string
		min              float64 // of the bound
	}{
		{"64KiB", "read", "8MiB", 0.95},
		{"1MiB", "read", "8MiB", 0.95},
		{"64KiB", "write", "8MiB", 0.95},
		{"1MiB", "write", "8MiB", 0.95},
		{"64KiB", "write", "1MB", 0.95}, // records that do not divide the stripe
	} {
		name := fmt.Sprintf("%s %s, %s records", c.unit, c.op, c.record)
		r := runArray(t, "raid6", 10, c.unit, fmt.Sprintf("op = %q\nrecord = %q\nfile_size = \"1GiB\"\nsync = true", c.op, c.record), "")
		t.Logf("%s: %.1f MB/s, bound %.1f (%s)", name, r.MBps, r.Bound.MBps, r.Bound.Binding)
		if want := 8 * DiskPresets["sata-7k2"].RateOD; math.Abs(r.Bound.MBps*1e6-float64(want))/float64(want) > 0.001 {
			t.Errorf("%s: bound %.1f MB/s, want 8 members' media rate %.1f", name, r.Bound.MBps, float64(want)/1e6)
		}
		if r.MBps < c.min*r.Bound.MBps || r.MBps > r.Bound.MBps*1.0001 {
			t.Errorf("%s: %.1f MB/s against a bound of %.1f", name, r.MBps, r.Bound.MBps)
		}
	}
}

// An array with failed members streams sequential reads and writes as a
// healthy one does: every survivor reads each of its units in turn (the
// parity that stands for the missing unit included, which keeps it
// streaming where a healthy member skips it: up to a few per cent faster)
// and full stripes are written to the survivors.
func TestDegradedArray(t *testing.T) {
	for _, c := range []struct {
		kind       string
		failed     int
		op, record string
		min, max   float64 // of the healthy array's rate
	}{
		{"raid5", 1, "read", "8MiB", 0.95, 1.05},
		{"raid6", 1, "read", "8MiB", 0.95, 1.05},
		{"raid6", 2, "read", "8MiB", 0.95, 1.05},
		{"raid5", 1, "write", "8MiB", 0.95, 1.0001},
		{"raid6", 2, "write", "8MiB", 0.95, 1.0001},
		{"raid5", 1, "write", "1MB", 0.95, 1.0001},
	} {
		name := fmt.Sprintf("%s, %d failed, %s %s", c.kind, c.failed, c.op, c.record)
		w := fmt.Sprintf("op = %q\nrecord = %q\nfile_size = \"1GiB\"\nsync = true", c.op, c.record)
		healthy := runArray(t, c.kind, 10, "256KiB", w, "")
		r := runArray(t, c.kind, 10, "256KiB", w, fmt.Sprintf("failed = %d", c.failed))
		t.Logf("%s: %.1f MB/s, healthy %.1f", name, r.MBps, healthy.MBps)
		if r.Bytes != healthy.Bytes || r.MBps < c.min*healthy.MBps || r.MBps > c.max*healthy.MBps {
			t.Errorf("%s: %d bytes at %.1f MB/s; healthy %d at %.1f", name, r.Bytes, r.MBps, healthy.Bytes, healthy.MBps)
		}
		if x := r.Rebuild; x == nil || x.UserMBps != r.MBps || x.Seconds != 0 {
			t.Errorf("%s: rebuild summary %+v, want the users' rate over the whole run and no rebuild", name, x)
		}
	}
}

// A rebuild takes the survivors' time from the users: uncapped it runs
// near the members' media rate and users get little; capped it runs at
// the cap, and the lower the cap the more the users get and the longer
// the array stays exposed. The spare's bytes over the rebuild's time is
// the rate reported.
func TestRebuild(t *testing.T) {
	const extent = 16 << 30
	prevUser, prevSecs := 0.0, 0.0
	for _, rate := range []string{"", "200MB/s", "100MB/s", "50MB/s"} {
		array := "failed = 1\nfail_at = \"1s\"\nrebuild = true\nrebuild_extent = \"16GiB\""
		if rate != "" {
			array += fmt.Sprintf("\nrebuild_rate = %q", rate)
		}
		r := runArray(t, "raid5", 10, "256KiB", "op = \"read\"\nrecord = \"8MiB\"\nfile_size = \"64GiB\"", array)
		x := r.Rebuild
		t.Logf("rebuild rate %q: users %.1f MB/s for %.1f s; rebuild %.1f s at %.1f MB/s", rate, x.UserMBps, x.Window, x.Seconds, x.MemberMBps)
		if x.Seconds <= 0 || x.FailedAt != 1 {
			t.Fatalf("rebuild rate %q: %+v", rate, x)
		}
		if got := float64(extent) / x.Seconds / 1e6; math.Abs(got-x.MemberMBps) > 0.01 {
			t.Errorf("rebuild rate %q: %.3f MB/s reported, %.3f from the extent and the time", rate, x.MemberMBps, got)
		}
		if rate != "" {
			var cap Rate
			if err := cap.UnmarshalText([]byte(rate)); err != nil {
				t.Fatal(err)
			}
			if c := float64(cap) / 1e6; x.MemberMBps > c*1.001 || x.MemberMBps < 0.9*c {
				t.Errorf("rebuild rate %q: the spare was rebuilt at %.1f MB/s", rate, x.MemberMBps)
			}
		}
		if x.UserMBps <= prevUser || x.Seconds <= prevSecs {
			t.Errorf("rebuild rate %q: users %.1f MB/s, rebuild %.1f s; a higher cap gave %.1f MB/s and %.1f s", rate, x.UserMBps, x.Seconds, prevUser, prevSecs)
		}
		prevUser, prevSecs = x.UserMBps, x.Seconds
	}
}

// A rebuild with no users runs at the members' media rate: every step
// reads a chunk from each survivor and writes it to the spare.
func TestRebuildAlone(t *testing.T) {
	r := runArray(t, "raid6", 8, "256KiB", "op = \"read\"\nrecord = \"8MiB\"\nfile_size = \"8MiB\"",
		"failed = 2\nrebuild = true\nrebuild_extent = \"8GiB\"")
	x := r.Rebuild
	media := float64(DiskPresets["sata-7k2"].RateOD) / 1e6
	t.Logf("rebuild of 8 GiB: %.1f s at %.1f MB/s (media %.1f)", x.Seconds, x.MemberMBps, media)
	if x.MemberMBps < 0.9*media || x.MemberMBps > media*1.0001 {
		t.Errorf("rebuild at %.1f MB/s; the members stream at %.1f", x.MemberMBps, media)
	}
}

// A declustered array (8+2 stripes rotating over all members, spares
// distributed) streams one reader near its bound — members × 8/10 of the
// media rate — and a degraded one as fast; partial-stripe writes
// complete; and a rebuild, spread over every survivor instead of one
// spare, finishes sooner the more members there are, and leaves users
// more than a RAID-6 array's rebuild does.
func TestDeclustered(t *testing.T) {
	read := "op = \"read\"\nrecord = \"8MiB\"\nfile_size = \"1GiB\""
	healthy := runArray(t, "declustered", 20, "256KiB", read, "width = 10")
	if want := 20 * 0.8 * float64(DiskPresets["sata-7k2"].RateOD) / 1e6; math.Abs(healthy.Bound.MBps-want) > 0.5 {
		t.Errorf("bound %.1f MB/s, want 20 members × 8/10 × media rate = %.1f", healthy.Bound.MBps, want)
	}
	if healthy.MBps < 0.8*healthy.Bound.MBps || healthy.MBps > healthy.Bound.MBps*1.0001 {
		t.Errorf("one reader %.1f MB/s against a bound of %.1f", healthy.MBps, healthy.Bound.MBps)
	}
	degraded := runArray(t, "declustered", 20, "256KiB", read, "width = 10\nfailed = 2")
	if degraded.Bytes != healthy.Bytes || degraded.MBps < 0.95*healthy.MBps {
		t.Errorf("two failed: %d bytes at %.1f MB/s; healthy %d at %.1f", degraded.Bytes, degraded.MBps, healthy.Bytes, healthy.MBps)
	}
	w := runArray(t, "declustered", 20, "64KiB", "op = \"write\"\nrecord = \"1MB\"\nfile_size = \"256MiB\"\nsync = true", "width = 10\nfailed = 1")
	if w.Bytes != 256<<20 {
		t.Errorf("partial-stripe writes, degraded: %d bytes", w.Bytes)
	}

	rebuild := "failed = 1\nfail_at = \"1s\"\nrebuild = true\nrebuild_extent = \"16GiB\""
	users := "op = \"read\"\nrecord = \"8MiB\"\nfile_size = \"64GiB\""
	raid := runArray(t, "raid6", 10, "256KiB", users, rebuild).Rebuild
	d20 := runArray(t, "declustered", 20, "256KiB", users, "width = 10\n"+rebuild).Rebuild
	d40 := runArray(t, "declustered", 40, "256KiB", users, "width = 10\n"+rebuild).Rebuild
	t.Logf("rebuild of 16 GiB: RAID-6 of 10 %.0f s (users %.0f MB/s), declustered over 20 %.0f s (%.0f), over 40 %.0f s (%.0f)",
		raid.Seconds, raid.UserMBps, d20.Seconds, d20.UserMBps, d40.Seconds, d40.UserMBps)
	if !(d40.Seconds < d20.Seconds && d20.Seconds < raid.Seconds) {
		t.Errorf("rebuild times: RAID-6 %.0f s, declustered 20 %.0f s, 40 %.0f s: want each shorter", raid.Seconds, d20.Seconds, d40.Seconds)
	}
	if d20.UserMBps <= raid.UserMBps || d40.UserMBps <= d20.UserMBps {
		t.Errorf("users during the rebuild: RAID-6 %.0f, declustered 20 %.0f, 40 %.0f MB/s", raid.UserMBps, d20.UserMBps, d40.UserMBps)
	}

	for _, bad := range []struct{ kind, array string }{
		{"declustered", "width = 21"},
		{"declustered", "parity = 5"},
		{"declustered", "width = 10\nfailed = 3"},
		{"raid5", "width = 5"},
	} {
		_, err := Parse([]byte(fmt.Sprintf("[storage]\nkind = %q\n[storage.array]\ndisks = 20\n%s\n", bad.kind, bad.array)))
		if err == nil {
			t.Errorf("%s with %q accepted", bad.kind, bad.array)
		}
	}
}
