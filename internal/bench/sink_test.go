package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/testutil"
)

// TestSink: with --sink every read of a Strata server is also written to
// a local file, which holds exactly the bytes read until the reader
// closes (its fsync) and is gone after; a run with a sink verifies its
// data and says so in the report; a sink that is not a directory is one
// clear error.
func TestSink(t *testing.T) {
	s := testutil.Start(t, nil)
	spec := "strata://" + strings.TrimPrefix(s.URL(), "http://")
	dir := t.TempDir()
	tg, err := OpenTarget(ctx, spec, Options{Sink: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	data := bytes.Repeat([]byte("strata sink "), 100000)
	w, err := tg.Create(ctx, "/f", int64(len(data)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := tg.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(data))
	if n, err := r.ReadAt(buf, 0); n != len(data) || err != nil && n != len(data) {
		t.Fatalf("read %d: %v", n, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("sink holds %v, want one file", files)
	}
	if got, _ := os.ReadFile(files[0]); !bytes.Equal(got, data) {
		t.Errorf("sink file has %d bytes, not the %d read", len(got), len(data))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Errorf("sink not emptied after close: %v", files)
	}

	rep := runSuiteOf(t, Config{Target: spec, Scale: "tiny", Workers: 2, Sink: dir}, "cemss-char")
	if rep.Target.Sink != dir {
		t.Errorf("report's sink %q, want %q", rep.Target.Sink, dir)
	}
	if ph := phase(rep, "cemss-char", "read 1MiB"); ph == nil || ph.Bytes == 0 || ph.VerifyErrors != 0 {
		t.Errorf("read phase with a sink: %+v", ph)
	}

	if _, err := OpenTarget(ctx, spec, Options{Sink: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "--sink") {
		t.Errorf("a missing sink directory: %v", err)
	}
}

// TestScalingMax: --scaling-max takes the scaling scenario past the
// scale's client count, and a count out of range is refused.
func TestScalingMax(t *testing.T) {
	rep := runSuiteOf(t, Config{Target: "posix:" + t.TempDir(), Scale: "tiny", Workers: 2, ScalingMax: 4}, "scaling")
	if ph := phase(rep, "scaling", "read N=4 M=1"); ph == nil || ph.Bytes == 0 {
		t.Errorf("no 4-client read at --scaling-max 4 (tiny's own is 2): %+v", ph)
	}
	if _, err := Execute(ctx, Config{Target: "posix:" + t.TempDir(), Scale: "tiny", ScalingMax: 100}, nil); err == nil || !strings.Contains(err.Error(), "scaling-max") {
		t.Errorf("scaling-max 100: %v", err)
	}
}

// TestDescribeDeviceBandwidth: a Strata target's report says the cap its
// pool's devices share, and none when they are uncapped or capped apart;
// and that they are uncapped only when none has a cap.
func TestDescribeDeviceBandwidth(t *testing.T) {
	for _, c := range []struct {
		name string
		caps []config.Size
		want int64
	}{
		{"uncapped", nil, 0},
		{"all at 50 MB/s", []config.Size{50e6, 50e6, 50e6, 50e6}, 50e6},
		{"capped apart", []config.Size{50e6, 50e6, 80e6, 50e6}, 0},
	} {
		s := testutil.Start(t, func(cfg *config.Config) {
			for i := range cfg.Devices {
				if i < len(c.caps) {
					cfg.Devices[i].Bandwidth = c.caps[i]
				}
			}
		})
		tg, err := OpenTarget(ctx, "strata://"+strings.TrimPrefix(s.URL(), "http://"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ti := tg.Describe(ctx)
		tg.Close()
		if ti.Devices != 4 || ti.DeviceBandwidth != c.want || ti.Uncapped != (c.caps == nil) {
			t.Errorf("%s: %d devices, bandwidth %d, uncapped %v; want 4 and %d", c.name, ti.Devices, ti.DeviceBandwidth, ti.Uncapped, c.want)
		}
	}
}
