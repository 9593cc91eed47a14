package sim

import (
	"math"
	"testing"
)

// Small random reads over a whole disk are bound by the mechanics: an
// average seek, half a revolution, the command overhead and the transfer.
// Nothing in the model states this rate; it follows from the seek curve and
// the tracked rotation.
func TestRandomReadsAreSeekBound(t *testing.T) {
	p := DiskPresets["sata-7k2"]
	src := `name = "random 4 KiB reads"
[storage]
kind = "disk"
disk = "sata-7k2"
[workload]
op = "read"
pattern = "random"
record = "4KiB"
file_size = "18TB"
depth = 1
requests = 4000
`
	s, err := ParseStudy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, s.Config)
	rev := 60e3 / p.RPM
	want := 1e3 / (p.SeekAvg + rev/2 + p.Overhead + 4096/float64(p.RateOD)*1e3)
	if e := math.Abs(r.IOPS-want) / want; e > 0.05 {
		t.Errorf("%.1f random reads/s, the mechanics give %.1f (%.1f%% apart)", r.IOPS, want, e*100)
	}
	seq, err := s.With(map[string]string{"workload.pattern": "sequential"})
	if err != nil {
		t.Fatal(err)
	}
	rs := run(t, seq)
	if rs.IOPS < 20*r.IOPS {
		t.Errorf("sequential 4 KiB reads %.0f/s, random %.0f/s: read-ahead should make sequential far faster", rs.IOPS, r.IOPS)
	}
}

// HPCS 13 (examples/sim/hpcs-random.toml): with a stream per disk or
// fewer, the DES meets the bound's seek-span term within 3 %; with more,
// streams share disks and the head travels between their files, so the
// DES stays below the bound.
func TestHPCSRandomAgainstBound(t *testing.T) {
	s := load(t, "hpcs-random.toml")
	r := s.RunSweep(1, 0, nil)
	if r.Failed() > 0 {
		t.Fatalf("%d points failed", r.Failed())
	}
	for _, p := range r.Points {
		x := p.Result
		e := (x.MBps - x.Bound.MBps) / x.Bound.MBps
		if e > 0.005 {
			t.Errorf("streams=%s: DES %.3f MB/s above the bound %.3f", p.Set["workload.streams"], x.MBps, x.Bound.MBps)
		}
		if n, _ := numeric(p.Set["workload.streams"]); n <= 4 && e < -0.03 {
			t.Errorf("streams=%s: DES %.3f MB/s, bound %.3f: %.1f%% apart", p.Set["workload.streams"], x.MBps, x.Bound.MBps, -e*100)
		}
	}
}
