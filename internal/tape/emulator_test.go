package tape_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tape/tapetest"
)

var ctx = context.Background()

func openLib(t *testing.T, dir string, o tape.Options) *tape.Emulator {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clock.NewInstant(time.Time{})
	}
	e, err := tape.OpenEmulator(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var (
	appendFile = tapetest.AppendFile
	readAll    = tapetest.ReadAll
)

// The emulator charges what its model says: streaming time for the bytes
// written, and robot, load and unload for a mount and a dismount. (What
// any library must do is in tapetest, which the emulator passes.)
func TestEmulatorTimesFollowTheModel(t *testing.T) {
	l := openLib(t, t.TempDir(), tape.Options{Drives: 1, Cartridges: 1})
	if err := l.Mount(ctx, "drive0", "T00000"); err != nil {
		t.Fatal(err)
	}
	a := bytes.Repeat([]byte("a"), 3<<20)
	appendFile(t, l, "drive0", a)
	if err := l.Dismount(ctx, "drive0"); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	g := l.Generation()
	if want := g.TransferTime(int64(len(a))); st.Transfer < want {
		t.Fatalf("transfer time %v, want at least %v", st.Transfer, want)
	}
	if st.Mounting != 2*g.Exchange+g.Load+g.Unload {
		t.Fatalf("mounting %v", st.Mounting)
	}
}

// A synchronising flush costs the host nothing beyond the streaming the
// model charged as the data was written; the drive then backs up to where
// it stopped, and a write that follows sooner waits for the rest of that
// backhitch. A drive left idle for longer, or a locate, positions the tape
// without it.
func TestBackhitchAfterAFlush(t *testing.T) {
	for _, c := range []struct {
		name string
		idle time.Duration // between the flush and the next write
		want func(g tape.Generation) time.Duration
	}{
		{"write straight on", 0, func(g tape.Generation) time.Duration { return g.Backhitch }},
		{"half of it idle", 1 * time.Second, func(g tape.Generation) time.Duration { return g.Backhitch - time.Second }},
		{"idle longer", 5 * time.Second, func(tape.Generation) time.Duration { return 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewInstant(time.Time{})
			l := openLib(t, t.TempDir(), tape.Options{Drives: 1, Cartridges: 1, Clock: clk})
			if err := l.Mount(ctx, "drive0", "T00000"); err != nil {
				t.Fatal(err)
			}
			appendFile(t, l, "drive0", []byte("first"))
			before := l.Stats().Positioning
			if err := l.Flush(ctx, "drive0"); err != nil {
				t.Fatal(err)
			}
			if got := l.Stats().Positioning - before; got != 0 {
				t.Fatalf("the flush itself charged %v of positioning", got)
			}
			clk.Advance(c.idle)
			appendFile(t, l, "drive0", []byte("second"))
			// the instant clock runs on with the wall clock too
			if got, want := l.Stats().Positioning-before, c.want(l.Generation()); got > want || got < want-100*time.Millisecond {
				t.Fatalf("positioning %v, want %v", got, want)
			}
		})
	}
}

// Tape is append-only: a tape file cut short by a crash (no trailer, or a
// damaged one) is beyond the end of data after a restart, and so is
// everything after it; the next tape file takes its number.
func TestIncompleteTapeFilesAreDiscarded(t *testing.T) {
	dir := t.TempDir()
	l := openLib(t, dir, tape.Options{Cartridges: 1})
	l.Mount(ctx, "drive0", "T00000")
	appendFile(t, l, "drive0", []byte("one"))
	appendFile(t, l, "drive0", []byte("two"))
	appendFile(t, l, "drive0", []byte("three"))
	w, err := l.Append(ctx, "drive0", &tape.Header{Entries: []tape.Entry{{Path: "/x", Size: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 50)) // the crash: never closed
	// Tape file 2 loses its tail as an unflushed write would.
	p2 := filepath.Join(dir, "T00000", "0000002")
	fi, _ := os.Stat(p2)
	os.Truncate(p2, fi.Size()-3)

	l2 := openLib(t, dir, tape.Options{})
	if c := l2.Cartridges()[0]; c.Files != 1 {
		t.Fatalf("%d tape files survive, want 1", c.Files)
	}
	l2.Mount(ctx, "drive0", "T00000")
	if seq := appendFile(t, l2, "drive0", []byte("new")); seq != 2 {
		t.Fatalf("next tape file is %d, want 2", seq)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "T00000"))
	if len(ents) != 3 { // VOL1, 1, 2
		t.Fatalf("cartridge holds %d entries", len(ents))
	}
}

// Locating is charged by distance: reading tape files in position order
// costs less positioning than reading them in reverse.
func TestLocateCostFollowsDistance(t *testing.T) {
	g := tape.Generations["LTO-9"]
	cost := func(order []int) time.Duration {
		l := openLib(t, t.TempDir(), tape.Options{Cartridges: 1, Generation: g})
		l.Mount(ctx, "drive0", "T00000")
		for i := 0; i < 5; i++ {
			appendFile(t, l, "drive0", bytes.Repeat([]byte{byte(i)}, 1000))
		}
		before := l.Stats().Positioning
		for _, s := range order {
			readAll(t, l, "drive0", s, 0, 1000)
		}
		return l.Stats().Positioning - before
	}
	if fwd, rev := cost([]int{1, 2, 3, 4, 5}), cost([]int{5, 4, 3, 2, 1}); fwd >= rev {
		t.Fatalf("in order %v, reversed %v", fwd, rev)
	}
}

// Reading through a short gap costs its streaming time, less than a
// locate's start-up.
func TestReadThroughCostsTheGap(t *testing.T) {
	g := tape.Generations["LTO-5"]
	l := openLib(t, t.TempDir(), tape.Options{Cartridges: 1, Generation: g})
	l.Mount(ctx, "drive0", "T00000")
	for i := 0; i < 3; i++ {
		appendFile(t, l, "drive0", bytes.Repeat([]byte{byte(i)}, 1000), bytes.Repeat([]byte{byte(i + 10)}, 3000))
	}
	readAll(t, l, "drive0", 1, 0, 1000)
	before := l.Stats()
	if err := l.ReadThrough(ctx, "drive0", 3, 1000); err != nil {
		t.Fatal(err)
	}
	if pos := l.Stats().Positioning - before.Positioning; pos <= 0 || pos >= g.LocateStart {
		t.Fatalf("reading through a few KB took %v", pos)
	}
}
