package sim

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/bench"
	"github.com/strata-storage/strata/internal/chart"
)

// synthetic builds a bench report of a device that really is
// t(s) = t0 + s/R (write and read), with capacity(n) linear in n.
func synthetic(t0 float64, wr, rr float64) *bench.Report {
	rep := &bench.Report{Tool: "strata bench", Version: "test", Target: bench.TargetInfo{Spec: "posix:/synthetic"}}
	char := bench.Result{Scenario: "cemss-char"}
	for s := int64(8 << 10); s <= 64<<20; s *= 4 {
		for _, op := range []struct {
			name string
			r    float64
		}{{"write", wr}, {"read", rr}} {
			mbps := float64(s) / (t0 + float64(s)/op.r) / (1 << 20)
			char.Phases = append(char.Phases, bench.Phase{Name: op.name + " " + chart.SizeStr(s), Labels: map[string]string{"io_size": chart.SizeStr(s)}, MiBps: mbps, Bytes: 256 << 20})
		}
	}
	sc := bench.Result{Scenario: "scaling", Params: map[string]string{"block": "4MiB"}}
	for _, n := range []int{1, 2, 4} {
		scale := 1 + 0.2*float64(n-1)
		for _, op := range []struct {
			name string
			r    float64
		}{{"write", wr}, {"read", rr}} {
			one := float64(4<<20) / (t0 + float64(4<<20)/op.r)
			sc.Phases = append(sc.Phases, bench.Phase{Name: op.name + " N=" + strconv.Itoa(n) + " M=1",
				Labels: map[string]string{"clients": strconv.Itoa(n), "servers": "1"}, MiBps: one * scale / (1 << 20), Bytes: int64(n) * 256 << 20})
		}
	}
	rep.Results = []bench.Result{char, sc}
	return rep
}

func TestCalibrateRecoversAndPredicts(t *testing.T) {
	rep := synthetic(0.2e-3, 800e6, 1500e6)
	cal, err := Calibrate(rep, &CalibrateOptions{Holdout: true})
	if err != nil {
		t.Fatal(err)
	}
	w, r := cal.Fits["write"], cal.Fits["read"]
	if len(w.Pieces) != 1 || math.Abs(float64(w.Pieces[0].Rate)/800e6-1) > 0.01 || math.Abs(w.Pieces[0].T0-0.2) > 0.01 {
		t.Errorf("write fit %+v", w.Pieces)
	}
	if len(r.Pieces) != 1 || math.Abs(float64(r.Pieces[0].Rate)/1500e6-1) > 0.01 {
		t.Errorf("read fit %+v", r.Pieces)
	}
	if len(cal.Checks) == 0 {
		t.Fatal("nothing held out")
	}
	// the I/O-size points are the model exactly; the stream counts are
	// not quite, because capacity(n) counts the flows active at each
	// moment and streams spend t0 of each request off the device
	med, worst := cal.Summary()
	if med > 0.001 || worst > 0.05 {
		var b strings.Builder
		cal.WriteReport(&b)
		t.Fatalf("median %.3f worst %.3f on a device that is exactly the model:\n%s", med, worst, b.String())
	}
	// the fragment is a valid study
	var frag strings.Builder
	if err := cal.WriteTOML(&frag); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(frag.String())); err != nil {
		t.Fatalf("fragment does not parse: %v\n%s", err, frag.String())
	}
}

// A device whose cost changes at a size (a cache, the largest request the
// OS sends) is fitted in two pieces, broken at the last measured size
// before the change.
func TestCalibratePiecewise(t *testing.T) {
	rep := synthetic(0.05e-3, 2000e6, 2000e6)
	for i := range rep.Results[0].Phases {
		ph := &rep.Results[0].Phases[i]
		s, _ := bench.ParseSize(ph.Labels["io_size"])
		if s > 1<<20 { // beyond 1 MiB the device slows to 500 MB/s
			ph.MiBps = float64(s) / (2e-3 + float64(s)/500e6) / (1 << 20)
		}
	}
	cal, err := Calibrate(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cal.Fits["write"].Pieces
	if len(p) != 2 || p[0].Upto != 512<<10 || math.Abs(float64(p[1].Rate)/500e6-1) > 0.02 {
		t.Fatalf("pieces %+v", p)
	}
	// The DES on the fitted device, without capacity(n) (as a Strata
	// server's devices are: its scaling runs are all predictions), gives
	// each fitted point back: a small request flows at its piece's 2,000
	// MB/s although the last piece's rate is 500.
	dev := cal.Curve
	dev.Streams = nil
	n := 0
	for _, s := range cal.Used {
		if s.Op != "write" || !strings.HasPrefix(s.Source, "cemss-char") {
			continue
		}
		got, err := predict(&dev, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got/s.MBps-1) > 0.03 {
			t.Errorf("%d-byte writes: the DES gives %.0f MB/s, the fit's point %.0f", s.Size, got, s.MBps)
		}
		n++
	}
	if n < 6 {
		t.Errorf("%d write points checked", n)
	}
}

func TestCalibrateNeedsTheCurve(t *testing.T) {
	if _, err := Calibrate(&bench.Report{}, nil); err == nil || !strings.Contains(err.Error(), "cemss-char") {
		t.Fatalf("error %v", err)
	}
}

// A Strata server whose movers read whole 1 MiB checksum chunks, on four
// devices capped at 50 MB/s: reads below 1 MiB cost a chunk each. The fit
// finds the granule, and the scaling runs (N streams striped over M of the
// four devices) are predicted from the single-stream curve alone.
func TestCalibrateGranuleAndStripedScaling(t *testing.T) {
	const R, g = 50e6, 1 << 20
	rep := &bench.Report{Tool: "strata bench", Version: "test", Target: bench.TargetInfo{Spec: "strata://synthetic", Kind: "strata", Devices: 4}}
	char := bench.Result{Scenario: "cemss-char"}
	for s := int64(8 << 10); s <= 64<<20; s *= 4 {
		w := float64(s) / (float64(s) / R) / (1 << 20)
		r := float64(s) / (float64(max(s, g)) / R) / (1 << 20)
		lab := map[string]string{"io_size": chart.SizeStr(s)}
		char.Phases = append(char.Phases,
			bench.Phase{Name: "write " + chart.SizeStr(s), Labels: lab, MiBps: w, Bytes: 128 << 20},
			bench.Phase{Name: "read " + chart.SizeStr(s), Labels: lab, MiBps: r, Bytes: 128 << 20})
	}
	sc := bench.Result{Scenario: "scaling", Params: map[string]string{"transfer": "4MiB"}}
	for _, m := range []int{1, 2, 4} {
		for _, n := range []int{1, 2, 4} {
			agg := R * float64(min(4, n*m)) / (1 << 20)
			lab := map[string]string{"clients": strconv.Itoa(n), "servers": strconv.Itoa(m)}
			sc.Phases = append(sc.Phases,
				bench.Phase{Name: "write N=" + strconv.Itoa(n) + " M=" + strconv.Itoa(m), Labels: lab, MiBps: agg, Bytes: int64(n) * 64 << 20},
				bench.Phase{Name: "read N=" + strconv.Itoa(n) + " M=" + strconv.Itoa(m), Labels: lab, MiBps: agg, Bytes: int64(n) * 64 << 20})
		}
	}
	rep.Results = []bench.Result{char, sc}
	cal, err := Calibrate(rep, &CalibrateOptions{Holdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := cal.Fits["read"]; f.Granule != g || math.Abs(float64(f.Pieces[0].Rate)/R-1) > 0.01 {
		t.Errorf("read fit: granule %d, pieces %+v; want 1 MiB at 50 MB/s", f.Granule, f.Pieces)
	}
	if f := cal.Fits["write"]; f.Granule != 0 {
		t.Errorf("write fit found a granule of %d", f.Granule)
	}
	if n := len(cal.Checks); n < 18 {
		t.Fatalf("%d checks, want every scaling point predicted", n)
	}
	if med, worst := cal.Summary(); med > 0.01 || worst > 0.03 {
		var b strings.Builder
		cal.WriteReport(&b)
		t.Fatalf("median %.3f worst %.3f:\n%s", med, worst, b.String())
	}
}

// A repeat of the calibration run is predicted point by point: measured
// again identically, every cemss-char point agrees with its prediction
// (the fit is exact there); its reads into local files are predicted
// slower by the fsync of each file and only the reads; a run measured
// with a sink but no client disk given is refused.
func TestCalibrateRepeatWithSink(t *testing.T) {
	rep := synthetic(0.2e-3, 800e6, 1500e6)
	sunk := synthetic(0.2e-3, 800e6, 1500e6)
	sunk.Target.Sink = "/local"
	sink := &ClientConfig{SinkRate: 1000e6}
	cal, err := Calibrate(rep, &CalibrateOptions{Repeat: true, Sink: sink, Against: []*bench.Report{rep, sunk}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cal.Repeats) != 2 {
		t.Fatalf("%d repeats", len(cal.Repeats))
	}
	plain, local := cal.Repeats[0].Checks, cal.Repeats[1].Checks
	if len(plain) != len(local) || len(plain) == 0 {
		t.Fatalf("%d and %d checks", len(plain), len(local))
	}
	for i := range plain {
		if !strings.HasPrefix(plain[i].What, "cemss-char") {
			continue
		}
		if math.Abs(plain[i].Error) > 0.01 {
			t.Errorf("%s: %+.1f%% on a repeat of the points it fitted", plain[i].What, plain[i].Error*100)
		}
		slower := local[i].Predicted < plain[i].Predicted
		if read := strings.Contains(plain[i].What, "read"); read != slower {
			t.Errorf("%s: into memory %.1f MB/s, into local files %.1f", plain[i].What, plain[i].Predicted, local[i].Predicted)
		}
	}
	// 256 MiB read in 32 MiB requests at 1.5 GB/s, then fsynced at 1 GB/s
	found := false
	for _, ch := range local {
		if ch.What == "cemss-char read 32MiB" {
			found = true
			want := 1 / (1/1500e6 + 1/1000e6) / 1e6
			if math.Abs(ch.Predicted/want-1) > 0.01 {
				t.Errorf("32 MiB reads into a local file: %.1f MB/s predicted, %.1f expected", ch.Predicted, want)
			}
		}
	}
	if !found {
		t.Error("no 32 MiB read predicted")
	}
	if _, err := Calibrate(rep, &CalibrateOptions{Repeat: true, Against: []*bench.Report{sunk}}); err == nil {
		t.Error("a run with a sink compared without the client's disk")
	}
}

// strata bench reads a file striped over four devices one 4 MiB request
// (one stripe unit, one device) at a time: from uncapped devices the
// model reads so too, at one device's rate; a put keeps a request in
// flight per stripe, and on capped devices (or where a report does not
// say) so do reads, standing in for the devices' token buckets.
func TestStripedReaderOneRequestInFlight(t *testing.T) {
	cp := &CurveParams{ReadRate: 1000e6, WriteRate: 1000e6}
	for _, c := range []struct {
		op       string
		uncapped bool
		want     float64 // MB/s
	}{
		{"read", true, 1000},
		{"read", false, 4000},
		{"write", true, 4000},
		{"write", false, 4000},
	} {
		s := Sample{Op: c.op, Size: 4 << 20, Streams: 1, Servers: 4, Bytes: 256 << 20}
		got, err := predictStriped(cp, s, &bench.TargetInfo{Kind: "strata", Devices: 4, StripeUnit: 4 << 20, Uncapped: c.uncapped}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got/c.want-1) > 0.02 {
			t.Errorf("%s, uncapped %v: %.0f MB/s, want %.0f", c.op, c.uncapped, got, c.want)
		}
	}
}
