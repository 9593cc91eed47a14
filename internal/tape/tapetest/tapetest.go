// Package tapetest is the conformance suite for tape.Library: what the
// HSM engine relies on of a library, so that any library — the emulator
// today, a SCSI library with real drives later — behaves as the engine
// expects. It works through the interface only, with the library's own
// drive and volume names; what only some libraries can do (inject faults,
// lose power) the harness offers or leaves out.
package tapetest

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"

	"github.com/strata-storage/strata/internal/tape"
)

// Options size the library a case opens.
type Options struct {
	Drives, Cartridges int
	Capacity           int64 // bytes a cartridge holds; 0: the generation's
}

// Faults injects the faults a library can be made to show.
type Faults interface {
	FailDrive(drive string, failed bool)
	SetUnreadable(volume string, bad bool)
	SetWriteErrors(volume string, bad bool) // writes on the cartridge fail, the drive working
	FailRobot(n int)                        // the next n moves fail
}

// Harness opens the library under test.
type Harness struct {
	// Open opens the library kept in dir, with at least the drives and
	// cartridges asked for. Opening the same dir again is a restart: what
	// was flushed is there.
	Open func(t *testing.T, dir string, o Options) tape.Library
	// Crash, if set, makes the library in dir lose what a power loss
	// would (whatever was not flushed); the suite then opens it again.
	Crash func(t *testing.T, dir string)
	// Faults, if set, returns l's fault injection.
	Faults func(l tape.Library) Faults
}

var ctx = context.Background()

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"WriteReadAcrossRestart", writeReadAcrossRestart},
		{"AbortedWriteLeavesEndOfData", abortedWrite},
		{"DeclaredLengthIsEnforced", declaredLength},
		{"FlushedFilesSurviveACrash", flushedSurvive},
		{"Refusals", refusals},
		{"MountsAndDismounts", mounts},
		{"ReadThrough", readThrough},
		{"TrailerDataCRC", trailerCRC},
		{"Faults", faults},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// mounted opens a library in a new dir and mounts its first cartridge in
// its first drive.
func mounted(t *testing.T, h Harness, o Options) (lib tape.Library, dir, drive, volume string) {
	t.Helper()
	dir = t.TempDir()
	lib = h.Open(t, dir, o)
	drive, volume = lib.Drives()[0].ID, lib.Cartridges()[0].Volume
	if err := lib.Mount(ctx, drive, volume); err != nil {
		t.Fatal(err)
	}
	return lib, dir, drive, volume
}

// AppendFile writes one tape file holding files, one entry each, and
// returns its number.
func AppendFile(t *testing.T, l tape.Library, drive string, files ...[]byte) int {
	t.Helper()
	h := &tape.Header{}
	var off int64
	for i, f := range files {
		h.Entries = append(h.Entries, tape.Entry{Path: "/f" + string(rune('a'+i)), Offset: off, Size: int64(len(f))})
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

// ReadAll reads n bytes at off of tape file seq's data.
func ReadAll(t *testing.T, l tape.Library, drive string, seq int, off, n int64) []byte {
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

func cartridge(t *testing.T, l tape.Library, volume string) tape.CartridgeInfo {
	t.Helper()
	for _, c := range l.Cartridges() {
		if c.Volume == volume {
			return c
		}
	}
	t.Fatalf("no cartridge %s", volume)
	return tape.CartridgeInfo{}
}

func writeReadAcrossRestart(t *testing.T, h Harness) {
	l, dir, drive, vol := mounted(t, h, Options{Drives: 2, Cartridges: 3})
	if got := len(l.Cartridges()); got < 3 {
		t.Fatalf("%d cartridges, asked for 3", got)
	}
	a, b := bytes.Repeat([]byte("a"), 3<<20), []byte("small file")
	s1 := AppendFile(t, l, drive, a, b)
	s2 := AppendFile(t, l, drive, []byte("second tape file"))
	if s1 != 1 || s2 != 2 {
		t.Fatalf("sequence numbers %d, %d; want 1, 2", s1, s2)
	}
	if err := l.Flush(ctx, drive); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, l, drive, 1, int64(len(a)), int64(len(b))); !bytes.Equal(got, b) {
		t.Fatalf("read %q", got)
	}
	hd, err := l.ReadHeader(ctx, drive, 1)
	if err != nil || hd.Volume != vol || hd.Seq != 1 || len(hd.Entries) != 2 || hd.Entries[1].Offset != int64(len(a)) {
		t.Fatalf("header %+v, %v", hd, err)
	}
	if st := l.Stats(); st.BytesWritten != int64(len(a)+len(b)+16) || st.Flushes < 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := l.Dismount(ctx, drive); err != nil {
		t.Fatal(err)
	}

	l2 := h.Open(t, dir, Options{Drives: 1})
	if c := cartridge(t, l2, vol); c.Files != 2 || c.Used == 0 {
		t.Fatalf("after reopening: %+v", c)
	}
	drive = l2.Drives()[0].ID
	if err := l2.Mount(ctx, drive, vol); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, l2, drive, 2, 0, 16); string(got) != "second tape file" {
		t.Fatalf("after reopening read %q", got)
	}
	if seq := AppendFile(t, l2, drive, []byte("third")); seq != 3 {
		t.Fatalf("next tape file after reopening is %d, want 3", seq)
	}
}

// An aborted tape file is beyond the end of data: the next one takes its
// number and the cartridge counts nothing of it.
func abortedWrite(t *testing.T, h Harness) {
	l, _, drive, vol := mounted(t, h, Options{Cartridges: 1})
	AppendFile(t, l, drive, []byte("one"))
	before := cartridge(t, l, vol)
	w, err := l.Append(ctx, drive, &tape.Header{Entries: []tape.Entry{{Path: "/x", Size: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 50))
	w.Abort()
	if c := cartridge(t, l, vol); c.Files != before.Files || c.Used != before.Used {
		t.Fatalf("after an aborted tape file: %+v, before %+v", c, before)
	}
	if seq := AppendFile(t, l, drive, []byte("two")); seq != 2 {
		t.Fatalf("the tape file after an aborted one is %d, want 2", seq)
	}
	if got := ReadAll(t, l, drive, 2, 0, 3); string(got) != "two" {
		t.Fatalf("read %q", got)
	}
}

// Writing more or less than the header declared fails and leaves nothing.
func declaredLength(t *testing.T, h Harness) {
	l, _, drive, vol := mounted(t, h, Options{Cartridges: 1})
	w, err := l.Append(ctx, drive, &tape.Header{Entries: []tape.Entry{{Path: "/a", Size: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("too long")); err == nil {
		t.Fatal("overlong write accepted")
	}
	if err := w.Close(); err == nil {
		t.Fatal("short tape file closed")
	}
	if c := cartridge(t, l, vol); c.Files != 0 || c.Used != 0 {
		t.Fatalf("failed tape file left %+v", c)
	}
	if seq := AppendFile(t, l, drive, []byte("fine")); seq != 1 {
		t.Fatalf("next tape file %d", seq)
	}
}

// Tape files closed before a flush survive a crash; those after it may
// be lost, but what survives is whole and in order, and the next tape file
// follows the last survivor.
func flushedSurvive(t *testing.T, h Harness) {
	if h.Crash == nil {
		t.Skip("the harness cannot crash this library")
	}
	l, dir, drive, vol := mounted(t, h, Options{Cartridges: 1})
	files := [][]byte{[]byte("one"), bytes.Repeat([]byte("two"), 1000), []byte("three"), []byte("four")}
	AppendFile(t, l, drive, files[0])
	AppendFile(t, l, drive, files[1])
	if err := l.Flush(ctx, drive); err != nil {
		t.Fatal(err)
	}
	AppendFile(t, l, drive, files[2])
	w, err := l.Append(ctx, drive, &tape.Header{Entries: []tape.Entry{{Path: "/x", Size: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(files[3][:2]) // the crash comes mid-file
	h.Crash(t, dir)

	l2 := h.Open(t, dir, Options{Cartridges: 1})
	c := cartridge(t, l2, vol)
	if c.Files < 2 || c.Files > 3 {
		t.Fatalf("%d tape files after the crash; 2 were flushed, 3 closed", c.Files)
	}
	drive = l2.Drives()[0].ID
	if err := l2.Mount(ctx, drive, vol); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= c.Files; seq++ {
		if got := ReadAll(t, l2, drive, seq, 0, int64(len(files[seq-1]))); !bytes.Equal(got, files[seq-1]) {
			t.Fatalf("tape file %d after the crash differs", seq)
		}
	}
	if seq := AppendFile(t, l2, drive, []byte("next")); seq != c.Files+1 {
		t.Fatalf("next tape file %d after %d survivors", seq, c.Files)
	}
}

func refusals(t *testing.T, h Harness) {
	l := h.Open(t, t.TempDir(), Options{Drives: 2, Cartridges: 2, Capacity: 1 << 20})
	d0, d1 := l.Drives()[0].ID, l.Drives()[1].ID
	v0, v1 := l.Cartridges()[0].Volume, l.Cartridges()[1].Volume
	for _, c := range []struct {
		name string
		op   func() error
		want error
	}{
		{"read unmounted", func() error { _, err := l.ReadHeader(ctx, d0, 1); return err }, tape.ErrNotMounted},
		{"no such drive", func() error { return l.Mount(ctx, "no-such-drive", v0) }, tape.ErrNoSuchDrive},
		{"no such volume", func() error { return l.Mount(ctx, d0, "NOSUCH") }, tape.ErrNoSuchVolume},
		{"mount", func() error { return l.Mount(ctx, d0, v0) }, nil},
		{"mounted elsewhere", func() error { return l.Mount(ctx, d1, v0) }, tape.ErrBusy},
		{"drive occupied", func() error { return l.Mount(ctx, d0, v1) }, tape.ErrBusy},
		{"no such tape file", func() error { _, err := l.ReadHeader(ctx, d0, 1); return err }, tape.ErrNoSuchFile},
		{"full", func() error {
			_, err := l.Append(ctx, d0, &tape.Header{Entries: []tape.Entry{{Path: "/big", Size: 2 << 20}}})
			return err
		}, tape.ErrFull},
	} {
		if err := c.op(); !errors.Is(err, c.want) {
			t.Errorf("%s: want %v, got %v", c.name, c.want, err)
		}
	}
}

// Cartridges move between drives; the library says where each is and
// counts every move.
func mounts(t *testing.T, h Harness) {
	l := h.Open(t, t.TempDir(), Options{Drives: 2, Cartridges: 2})
	d0, d1 := l.Drives()[0].ID, l.Drives()[1].ID
	v0 := l.Cartridges()[0].Volume
	if err := l.Mount(ctx, d0, v0); err != nil {
		t.Fatal(err)
	}
	AppendFile(t, l, d0, []byte("data"))
	if c := cartridge(t, l, v0); c.Drive != d0 {
		t.Fatalf("%s is in %q, want %s", v0, c.Drive, d0)
	}
	if err := l.Dismount(ctx, d0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadHeader(ctx, d0, 1); !errors.Is(err, tape.ErrNotMounted) {
		t.Fatalf("read after dismount: %v", err)
	}
	if err := l.Mount(ctx, d1, v0); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, l, d1, 1, 0, 4); string(got) != "data" {
		t.Fatalf("in the other drive read %q", got)
	}
	if st := l.Stats(); st.Mounts != 2 || st.Dismounts != 1 {
		t.Fatalf("stats %+v; want 2 mounts, 1 dismount", st)
	}
}

// Reading through moves the head without a locate; a position behind the
// head is located to; a position past a tape file's data is refused.
func readThrough(t *testing.T, h Harness) {
	l, _, drive, _ := mounted(t, h, Options{Cartridges: 1})
	for i := 0; i < 3; i++ {
		AppendFile(t, l, drive, bytes.Repeat([]byte{byte(i)}, 1000), bytes.Repeat([]byte{byte(i + 10)}, 3000))
	}
	ReadAll(t, l, drive, 1, 0, 1000)
	before := l.Stats()
	if err := l.ReadThrough(ctx, drive, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if got := ReadAll(t, l, drive, 3, 1000, 3000); !bytes.Equal(got, bytes.Repeat([]byte{12}, 3000)) {
		t.Fatal("wrong bytes after reading through")
	}
	st := l.Stats()
	if st.Locates != before.Locates || st.ReadThroughs != before.ReadThroughs+1 {
		t.Fatalf("locates %d → %d, read-throughs %d → %d", before.Locates, st.Locates, before.ReadThroughs, st.ReadThroughs)
	}
	if err := l.ReadThrough(ctx, drive, 1, 0); err != nil { // behind the head
		t.Fatal(err)
	}
	if again := l.Stats(); again.Locates != st.Locates+1 || again.ReadThroughs != st.ReadThroughs {
		t.Fatalf("behind the head: %+v", again)
	}
	if err := l.ReadThrough(ctx, drive, 3, 5000); err == nil {
		t.Fatal("read through past a tape file's data")
	}
}

// The trailer's data CRC is the whole data's, whether the entries cover
// the data end to end or leave a gap.
func trailerCRC(t *testing.T, h Harness) {
	l, _, drive, _ := mounted(t, h, Options{Cartridges: 1})
	a, b, c := bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 3000), bytes.Repeat([]byte{3}, 77)
	all := slices.Concat(a, b, c)
	tiled := AppendFile(t, l, drive, a, b, c)
	w, err := l.Append(ctx, drive, &tape.Header{Entries: []tape.Entry{{Path: "/x", Offset: 0, Size: 1000}, {Path: "/y", Offset: 4000, Size: 77}}})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(all)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, seq := range []int{tiled, w.Seq()} {
		tr, err := l.ReadTrailer(ctx, drive, seq)
		if err != nil {
			t.Fatal(err)
		}
		if want := crc32.Checksum(all, castagnoli); tr.DataCRC != want || tr.DataLen != int64(len(all)) {
			t.Fatalf("tape file %d: data crc %08x over %d bytes, want %08x over %d", seq, tr.DataCRC, tr.DataLen, want, len(all))
		}
	}
	if got := w.EntryCRCs(); len(got) != 2 || got[0] != crc32.Checksum(a, castagnoli) || got[1] != crc32.Checksum(c, castagnoli) {
		t.Fatalf("entry CRCs %08x", got)
	}
}

// A failed drive, an unreadable cartridge, a cartridge whose writes fail
// and a robot that fails a move are refused with their own errors, and
// clear when the fault does.
func faults(t *testing.T, h Harness) {
	if h.Faults == nil {
		t.Skip("the harness cannot inject faults into this library")
	}
	l := h.Open(t, t.TempDir(), Options{Drives: 2, Cartridges: 2})
	f := h.Faults(l)
	d0, d1 := l.Drives()[0].ID, l.Drives()[1].ID
	v0, v1 := l.Cartridges()[0].Volume, l.Cartridges()[1].Volume
	if err := l.Mount(ctx, d0, v0); err != nil {
		t.Fatal(err)
	}
	AppendFile(t, l, d0, []byte("data"))

	f.FailDrive(d0, true)
	if _, err := l.ReadData(ctx, d0, 1, 0, 4); !errors.Is(err, tape.ErrDriveFailed) {
		t.Fatalf("failed drive: %v", err)
	}
	f.FailDrive(d0, false)

	f.SetUnreadable(v0, true)
	if _, err := l.ReadHeader(ctx, d0, 1); !errors.Is(err, tape.ErrUnreadable) {
		t.Fatalf("unreadable cartridge: %v", err)
	}
	f.SetUnreadable(v0, false)
	if got := ReadAll(t, l, d0, 1, 0, 4); string(got) != "data" {
		t.Fatalf("after faults cleared: %q", got)
	}

	f.SetWriteErrors(v0, true)
	w, err := l.Append(ctx, d0, &tape.Header{Entries: []tape.Entry{{Path: "/w", Size: 4}}})
	if err == nil {
		if _, err = w.Write([]byte("more")); err == nil {
			err = w.Close()
		} else {
			w.Abort()
		}
	}
	if err == nil {
		t.Fatal("a write on a cartridge whose writes fail succeeded")
	}
	if errors.Is(err, tape.ErrDriveFailed) {
		t.Fatalf("a cartridge's write error taken for the drive's: %v", err)
	}
	f.SetWriteErrors(v0, false)
	AppendFile(t, l, d0, []byte("more"))
	if got := ReadAll(t, l, d0, 1, 0, 4); string(got) != "data" {
		t.Fatalf("after write errors cleared: %q", got)
	}

	f.FailRobot(1)
	if err := l.Mount(ctx, d1, v1); !errors.Is(err, tape.ErrRobot) {
		t.Fatalf("robot failure: %v", err)
	}
	if err := l.Mount(ctx, d1, v1); err != nil {
		t.Fatalf("mount after the robot recovered: %v", err)
	}
}
