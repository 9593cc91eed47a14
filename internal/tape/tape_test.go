package tape

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
)

var ctx = context.Background()

// The model reproduces the vendors' figures it was built from: an average
// locate from BOT within 2 % of the data sheet, a full traverse of 100–130 s
// (device-and-validation-data.md §2.4), and a full cartridge written in
// capacity / rate.
func TestModelMatchesDataSheets(t *testing.T) {
	for _, name := range GenerationNames() {
		g := Generations[name]
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var sum time.Duration
			const n = 20000
			for i := 0; i < n; i++ {
				sum += g.LocateTime(Position{}, g.PositionOf(r.Int64N(g.Capacity)))
			}
			avg := sum / n
			if d := (avg - g.AvgLocate).Seconds() / g.AvgLocate.Seconds(); d > 0.02 || d < -0.02 {
				t.Errorf("average locate from BOT %v, data sheet %v", avg, g.AvgLocate)
			}
			full := g.LocateTime(Position{}, Position{Wrap: 0, LPos: g.Length})
			if full < 100*time.Second || full > 130*time.Second {
				t.Errorf("full traverse %v, want 100–130 s", full)
			}
		})
	}
}

func TestSerpentinePositions(t *testing.T) {
	g := Generations["LTO-9"]
	bpw := int64(g.BytesPerWrap()) + 1 // rounded up: offset bpw is on the next wrap
	cases := []struct {
		off  int64
		wrap int
		lpos float64
	}{
		{0, 0, 0},
		{bpw / 2, 0, g.Length / 2},
		{bpw, 1, g.Length}, // turn around at the far end
		{bpw + bpw/4, 1, g.Length * 3 / 4},
		{2 * bpw, 2, 0},                  // back at BOT
		{g.Capacity * 2, g.Wraps - 1, 0}, // past the end clamps to the last wrap
	}
	for _, tc := range cases {
		p := g.PositionOf(tc.off)
		if p.Wrap != tc.wrap || p.LPos < tc.lpos-0.01 || p.LPos > tc.lpos+0.01 {
			t.Errorf("offset %d: got %+v, want wrap %d at %.1f m", tc.off, p, tc.wrap, tc.lpos)
		}
	}
	// Files next to each other on adjacent wraps at the same end are close;
	// locate time depends on distance, not on byte offset.
	near := g.LocateTime(g.PositionOf(bpw-1), g.PositionOf(bpw+1))
	far := g.LocateTime(g.PositionOf(0), g.PositionOf(bpw/2))
	if near >= far {
		t.Errorf("adjacent wraps at the turn-around: %v, half a wrap away: %v", near, far)
	}
}

func TestLookupGeneration(t *testing.T) {
	for _, name := range []string{"LTO-9", "lto9", "Lto-5"} {
		if _, err := LookupGeneration(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LookupGeneration("DLT"); err == nil {
		t.Error("DLT accepted")
	}
}

func openLib(t *testing.T, dir string, o Options) *Emulator {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clock.NewInstant(time.Time{})
	}
	e, err := OpenEmulator(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func appendFile(t *testing.T, l Library, drive string, files ...[]byte) int {
	t.Helper()
	h := &Header{}
	var off int64
	for i, f := range files {
		h.Entries = append(h.Entries, Entry{Path: "/f" + string(rune('a'+i)), Offset: off, Size: int64(len(f))})
		off += int64(len(f))
	}
	w, err := l.Append(ctx, drive, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Seq()
}

func readAll(t *testing.T, l Library, drive string, seq int, off, n int64) []byte {
	t.Helper()
	r, err := l.ReadData(ctx, drive, seq, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteReadAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	l := openLib(t, dir, Options{Drives: 2, Cartridges: 3})
	if got := len(l.Cartridges()); got != 3 {
		t.Fatalf("%d cartridges", got)
	}
	if err := l.Mount(ctx, "drive0", "T00001"); err != nil {
		t.Fatal(err)
	}
	a, b := bytes.Repeat([]byte("a"), 3<<20), []byte("small file")
	s1 := appendFile(t, l, "drive0", a, b)
	s2 := appendFile(t, l, "drive0", []byte("second tape file"))
	if s1 != 1 || s2 != 2 {
		t.Fatalf("sequence numbers %d, %d", s1, s2)
	}
	if err := l.Flush(ctx, "drive0"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, "drive0", 1, int64(len(a)), int64(len(b))); !bytes.Equal(got, b) {
		t.Fatalf("read %q", got)
	}
	h, err := l.ReadHeader(ctx, "drive0", 1)
	if err != nil || h.Volume != "T00001" || h.Seq != 1 || len(h.Entries) != 2 || h.Entries[1].Offset != int64(len(a)) {
		t.Fatalf("header %+v, %v", h, err)
	}
	if err := l.Dismount(ctx, "drive0"); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Mounts != 1 || st.Dismounts != 1 || st.BytesWritten != int64(len(a)+len(b)+16) || st.Flushes != 1 {
		t.Fatalf("stats %+v", st)
	}
	g := l.Generation()
	if want := g.TransferTime(int64(len(a) + len(b) + 16)); st.Transfer < want {
		t.Fatalf("transfer time %v, want at least %v", st.Transfer, want)
	}
	if st.Mounting != 2*g.Exchange+g.Load+g.Unload {
		t.Fatalf("mounting %v", st.Mounting)
	}

	l2 := openLib(t, dir, Options{Drives: 1})
	if c := l2.Cartridges()[1]; c.Volume != "T00001" || c.Files != 2 || c.Used == 0 {
		t.Fatalf("after reopening: %+v", c)
	}
	if err := l2.Mount(ctx, "drive0", "T00001"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l2, "drive0", 2, 0, 16); string(got) != "second tape file" {
		t.Fatalf("after reopening read %q", got)
	}
}

// Tape is append-only: a tape file cut short by a crash (no trailer, or a
// damaged one) is beyond the end of data after a restart, and so is
// everything after it; the next tape file takes its number.
func TestIncompleteTapeFilesAreDiscarded(t *testing.T) {
	dir := t.TempDir()
	l := openLib(t, dir, Options{Cartridges: 1})
	l.Mount(ctx, "drive0", "T00000")
	appendFile(t, l, "drive0", []byte("one"))
	appendFile(t, l, "drive0", []byte("two"))
	appendFile(t, l, "drive0", []byte("three"))
	w, err := l.Append(ctx, "drive0", &Header{Entries: []Entry{{Path: "/x", Size: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 50)) // the crash: never closed
	// Tape file 2 loses its tail as an unflushed write would.
	p2 := filepath.Join(dir, "T00000", fileName(2))
	fi, _ := os.Stat(p2)
	os.Truncate(p2, fi.Size()-3)

	l2 := openLib(t, dir, Options{})
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

func TestFaults(t *testing.T) {
	l := openLib(t, t.TempDir(), Options{Drives: 2, Cartridges: 2})
	l.Mount(ctx, "drive0", "T00000")
	appendFile(t, l, "drive0", []byte("data"))

	l.FailDrive("drive0", true)
	if _, err := l.ReadData(ctx, "drive0", 1, 0, 4); !errors.Is(err, ErrDriveFailed) {
		t.Fatalf("failed drive: %v", err)
	}
	l.FailDrive("drive0", false)

	l.SetUnreadable("T00000", true)
	if _, err := l.ReadHeader(ctx, "drive0", 1); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("unreadable cartridge: %v", err)
	}
	l.SetUnreadable("T00000", false)
	if got := readAll(t, l, "drive0", 1, 0, 4); string(got) != "data" {
		t.Fatalf("after faults cleared: %q", got)
	}

	l.FailRobot(1)
	if err := l.Mount(ctx, "drive1", "T00001"); !errors.Is(err, ErrRobot) {
		t.Fatalf("robot timeout: %v", err)
	}
	if err := l.Mount(ctx, "drive1", "T00001"); err != nil {
		t.Fatalf("mount after the robot recovered: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	l := openLib(t, t.TempDir(), Options{Drives: 2, Cartridges: 2, Capacity: 1 << 20})
	cases := []struct {
		name string
		op   func() error
		want error
	}{
		{"read unmounted", func() error { _, err := l.ReadHeader(ctx, "drive0", 1); return err }, ErrNotMounted},
		{"no such drive", func() error { return l.Mount(ctx, "drive9", "T00000") }, ErrNoSuchDrive},
		{"no such volume", func() error { return l.Mount(ctx, "drive0", "X") }, ErrNoSuchVolume},
		{"mount", func() error { return l.Mount(ctx, "drive0", "T00000") }, nil},
		{"mounted elsewhere", func() error { return l.Mount(ctx, "drive1", "T00000") }, ErrBusy},
		{"drive occupied", func() error { return l.Mount(ctx, "drive0", "T00001") }, ErrBusy},
		{"no such tape file", func() error { _, err := l.ReadHeader(ctx, "drive0", 1); return err }, ErrNoSuchFile},
		{"full", func() error {
			_, err := l.Append(ctx, "drive0", &Header{Entries: []Entry{{Path: "/big", Size: 2 << 20}}})
			return err
		}, ErrFull},
	}
	for _, tc := range cases {
		if err := tc.op(); !errors.Is(err, tc.want) {
			t.Errorf("%s: want %v, got %v", tc.name, tc.want, err)
		}
	}
}

// Writing more or less than the header declared fails and leaves nothing.
func TestDeclaredLengthIsEnforced(t *testing.T) {
	l := openLib(t, t.TempDir(), Options{Cartridges: 1})
	l.Mount(ctx, "drive0", "T00000")
	w, _ := l.Append(ctx, "drive0", &Header{Entries: []Entry{{Path: "/a", Size: 4}}})
	if _, err := w.Write([]byte("too long")); err == nil {
		t.Fatal("overlong write accepted")
	}
	if err := w.Close(); err == nil {
		t.Fatal("short tape file closed")
	}
	if c := l.Cartridges()[0]; c.Files != 0 || c.Used != 0 {
		t.Fatalf("failed tape file left %+v", c)
	}
	if seq := appendFile(t, l, "drive0", []byte("fine")); seq != 1 {
		t.Fatalf("next tape file %d", seq)
	}
}

// Locating is charged by distance: reading tape files in position order
// costs less positioning than reading them in reverse.
func TestLocateCostFollowsDistance(t *testing.T) {
	g := Generations["LTO-9"]
	cost := func(order []int) time.Duration {
		l := openLib(t, t.TempDir(), Options{Cartridges: 1, Generation: g})
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

// Reading through costs the gap's streaming time (crossing labels and tape
// files) and no locate; a position behind the head is located to.
func TestReadThrough(t *testing.T) {
	g := Generations["LTO-5"]
	l := openLib(t, t.TempDir(), Options{Cartridges: 1, Generation: g})
	l.Mount(ctx, "drive0", "T00000")
	for i := 0; i < 3; i++ {
		appendFile(t, l, "drive0", bytes.Repeat([]byte{byte(i)}, 1000), bytes.Repeat([]byte{byte(i + 10)}, 3000))
	}
	readAll(t, l, "drive0", 1, 0, 1000)
	before := l.Stats()
	if err := l.ReadThrough(ctx, "drive0", 3, 1000); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, "drive0", 3, 1000, 3000); !bytes.Equal(got, bytes.Repeat([]byte{12}, 3000)) {
		t.Fatal("wrong bytes after reading through")
	}
	st := l.Stats()
	if st.Locates != before.Locates || st.ReadThroughs != before.ReadThroughs+1 {
		t.Fatalf("locates %d → %d, read-throughs %d → %d", before.Locates, st.Locates, before.ReadThroughs, st.ReadThroughs)
	}
	if pos := st.Positioning - before.Positioning; pos <= 0 || pos >= g.LocateStart {
		t.Fatalf("reading through a few KB took %v", pos)
	}
	if err := l.ReadThrough(ctx, "drive0", 1, 0); err != nil { // behind the head
		t.Fatal(err)
	}
	if again := l.Stats(); again.Locates != st.Locates+1 || again.ReadThroughs != st.ReadThroughs {
		t.Fatalf("behind the head: %+v", again)
	}
	if err := l.ReadThrough(ctx, "drive0", 3, 5000); err == nil {
		t.Fatal("read through past a tape file's data")
	}
}

// The trailer's data CRC is the whole data's, whether it is combined from
// the entries' (entries end to end) or computed over the data (a header
// whose entries leave a gap).
func TestTrailerDataCRC(t *testing.T) {
	l := openLib(t, t.TempDir(), Options{Cartridges: 1})
	l.Mount(ctx, "drive0", "T00000")
	a, b, c := bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 3000), bytes.Repeat([]byte{3}, 77)
	all := slices.Concat(a, b, c)
	tiled := appendFile(t, l, "drive0", a, b, c)
	w, err := l.Append(ctx, "drive0", &Header{Entries: []Entry{{Path: "/x", Offset: 0, Size: 1000}, {Path: "/y", Offset: 4000, Size: 77}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(all)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int{tiled, w.Seq()} {
		tr, err := l.ReadTrailer(ctx, "drive0", seq)
		if err != nil {
			t.Fatal(err)
		}
		if want := crc32.Checksum(all, castagnoli); tr.DataCRC != want || tr.DataLen != int64(len(all)) {
			t.Fatalf("tape file %d: data crc %08x over %d bytes, want %08x over %d", seq, tr.DataCRC, tr.DataLen, want, len(all))
		}
	}
}

func FuzzDecodeHeader(f *testing.F) {
	b, _ := EncodeHeader(&Header{Volume: "T00000", Seq: 1, Entries: []Entry{{Path: "/a", Size: 3}, {Path: "/b", Offset: 3, Size: 5}}})
	f.Add(b)
	f.Add([]byte("STRATAH1\x00\x00\x00\x02\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, n, err := DecodeHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if n > int64(len(data)) {
			t.Fatalf("label of %d bytes from %d", n, len(data))
		}
		again, err := EncodeHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		h2, _, err := DecodeHeader(bytes.NewReader(again))
		if err != nil || h2.DataLen() != h.DataLen() || len(h2.Entries) != len(h.Entries) {
			t.Fatalf("re-encoded header differs: %v", err)
		}
	})
}

// Labels written before fixity algorithms were named kept the whole-file
// hash under "sha256"; they still decode, into Fixity, next to new labels.
func TestHeaderFixityLegacyKey(t *testing.T) {
	b, err := EncodeHeader(&Header{Volume: "T00000", Seq: 1, Entries: []Entry{
		{Path: "/old", Size: 3, LegacySHA256: "sha256:ab"},
		{Path: "/new", Offset: 3, Size: 5, Fixity: "blake3:cd"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"sha256":"sha256:ab"`)) || !bytes.Contains(b, []byte(`"fixity":"blake3:cd"`)) {
		t.Fatalf("label %s", b)
	}
	h, _, err := DecodeHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"sha256:ab", "blake3:cd"} {
		if e := h.Entries[i]; e.Fixity != want || e.LegacySHA256 != "" {
			t.Errorf("entry %d: fixity %q legacy %q, want %q", i, e.Fixity, e.LegacySHA256, want)
		}
	}
}
