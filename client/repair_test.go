package client_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/testutil"
)

// damage flips a byte at off in the disk object named object.
func damage(t *testing.T, dataDir, object string, off int64) {
	t.Helper()
	for _, p := range objects(t, dataDir) {
		if strings.HasSuffix(p, object) {
			flip(t, p, off)
			return
		}
	}
	t.Fatalf("object %s not found", object)
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A disk copy damaged at rest does not fail a read of a file with a good
// tape copy: the reader reports it, the core verifies it, drops it and
// recalls the file, and the reader goes on from where it was. The damaged
// objects are reclaimed, and the repair counted.
func TestReadRepairsADamagedDiskCopy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cos      string
		size     int
		stripe   int // the stripe damaged
		handover bool
		reader   bool // read with Open/ReadAt (the mount's way) instead of Get
	}{
		{"one stripe, streamed", "single", 300 << 10, 0, false, false},
		{"one stripe, handed over", "single", 300 << 10, 0, true, false},
		{"striped, third stripe", "", 5<<20 + 99, 2, false, false},
		{"striped, handed over", "", 5<<20 + 99, 1, true, false},
		{"striped, ReadAt", "", 5<<20 + 99, 3, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c := tapeServer(t, nil)
			c.Handover(tc.handover)
			data := randBytes(uint64(tc.size), tc.size)
			if _, err := c.Put(ctx, "/f", bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: tc.cos}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Migrate(ctx, "/f"); err != nil {
				t.Fatal(err)
			}
			before := residency(t, c, "/f").Layout
			if len(before.Segments) <= tc.stripe {
				t.Fatalf("%d stripes, want more than %d", len(before.Segments), tc.stripe)
			}
			bad := before.Segments[tc.stripe]
			damage(t, s.Cfg.DataDir, bad.Object, 5000)

			var got []byte
			var err error
			if tc.reader {
				got, err = readAll(c, "/f", len(data))
			} else {
				got, err = getBytes(c, "/f")
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read over a damaged disk copy: %d bytes, %v", len(got), err)
			}
			after := residency(t, c, "/f")
			if after.Residency != "disk+tape" {
				t.Fatalf("after the repair the file is %q", after.Residency)
			}
			for _, sg := range after.Layout.Segments {
				if sg.Object == bad.Object {
					t.Fatalf("the damaged object %s is still the file's copy", bad.Object)
				}
			}
			integrity(t, s, api.Integrity{DamagedDisk: 1, Repaired: 1})
			if _, err := s.Core.Reclaim(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range objects(t, s.Cfg.DataDir) {
				if strings.HasSuffix(p, bad.Object) {
					t.Fatalf("the damaged object %s was not reclaimed", bad.Object)
				}
			}
			// And it reads as it should from now on.
			if got, err := getBytes(c, "/f"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after the repair: %v", err)
			}
		})
	}
}

// integrity waits for the server's integrity counts to reach want: a
// repair is counted when its recall or migration ends, which a reader may
// see the file before.
func integrity(t *testing.T, s *server.Server, want api.Integrity) {
	t.Helper()
	var in api.Integrity
	for i := 0; i < 400; i++ {
		if in = s.Core.Integrity(); in == want {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("integrity counts %+v, want %+v", in, want)
}

// readAll reads path through a Reader, a megabyte at a time at offsets out
// of order, as a mount reads.
func readAll(c *client.Client, path string, size int) ([]byte, error) {
	r, err := c.Open(ctx, path, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]byte, size)
	const step = 1 << 20
	for _, first := range []bool{false, true} { // the second half, then the first
		for off := 0; off < size; off += step {
			if (off < size/2) != first {
				continue
			}
			n, err := r.ReadAt(out[off:min(off+step, size)], int64(off))
			if err != nil && !(errors.Is(err, io.EOF) && off+n == size) {
				return nil, err
			}
		}
	}
	return out, nil
}

// A file whose only copy is damaged is lost: a read fails with one error
// that says so and names the file, again on the next read, and migration
// leaves it out instead of stopping at it. It shows as lost (stat, the
// admins' list, with why), after a restart too, until it is written
// again.
func TestDamagedOnlyCopyIsLost(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	data := randBytes(7, 200000)
	if _, err := c.Put(ctx, "/only", bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	damage(t, s.Cfg.DataDir, residency(t, c, "/only").Layout.Segments[0].Object, 100)
	for i := 0; i < 2; i++ {
		_, err := getBytes(c, "/only")
		if !errors.Is(err, client.ErrCorrupt) || !strings.Contains(err.Error(), "/only is lost") {
			t.Fatalf("read %d of a file whose only copy is damaged: %v", i, err)
		}
	}
	res, err := c.Migrate(ctx, "/only")
	if err != nil || res.Files != 0 {
		t.Fatalf("migrating a lost file: %+v, %v", res, err)
	}
	if in := s.Core.Integrity(); in.DamagedDisk < 1 || in.Lost != 1 || in.Repaired != 0 {
		t.Fatalf("integrity counts %+v", in)
	}
	isLost := func(c *client.Client) {
		t.Helper()
		if fi := residency(t, c, "/only"); fi.Residency != client.ResidencyLost || !strings.Contains(fi.Lost, "damaged") {
			t.Fatalf("residency %q (%q), want lost, saying why", fi.Residency, fi.Lost)
		}
		ls, err := c.LostFiles(ctx)
		if err != nil || len(ls) != 1 || ls[0].Path != "/only" || !strings.Contains(ls[0].Why, "damaged") || ls[0].Since.IsZero() {
			t.Fatalf("lost files %+v, %v", ls, err)
		}
	}
	isLost(c)
	cfg := s.Cfg
	s.Close()
	s, err = server.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c = testutil.Client(t, s)
	isLost(c)
	if _, err := getBytes(c, "/only"); !errors.Is(err, client.ErrCorrupt) || !strings.Contains(err.Error(), "/only is lost") {
		t.Fatalf("read after a restart: %v", err)
	}
	if _, err := c.Put(ctx, "/only", bytes.NewReader(data), int64(len(data)), client.PutOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if fi := residency(t, c, "/only"); fi.Residency == client.ResidencyLost || fi.Lost != "" {
		t.Fatalf("written again, still lost: %q", fi.Lost)
	}
	if ls, err := c.LostFiles(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("lost files once written again: %+v, %v", ls, err)
	}
}

// A tape copy that fails its checksum when recalled is dropped, the file
// is recalled from its other copy, and the missing copy is made again.
// With no other copy, the file is reported lost and not queued again.
func TestDamagedTapeCopy(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	two := randBytes(8, 200000)
	onTape(t, c, "/two", two, "dual")
	fi := residency(t, c, "/two")
	if len(fi.Layout.Tapes) != 2 {
		t.Fatalf("dual class: tape copies %+v", fi.Layout.Tapes)
	}
	bad := fi.Layout.Tapes[0].Volume
	damageOnTape(t, s, bad, two)
	got, err := getBytes(c, "/two")
	if err != nil || !bytes.Equal(got, two) {
		t.Fatalf("recall past a damaged tape copy: %v", err)
	}
	waitFor(t, func() bool {
		fi := residency(t, c, "/two")
		return len(fi.Layout.Tapes) == 2 && fi.Layout.Tapes[0].Copy != 1 && fi.Layout.Tapes[1].Copy != 1
	}, "the damaged tape copy dropped and made again")
	integrity(t, s, api.Integrity{DamagedTape: 1, Repaired: 1})
	// The cartridge the damaged file was read from takes no more writes
	// (the copy made again went elsewhere), says why, and holds so until
	// an admin puts it back in service.
	for _, tc := range residency(t, c, "/two").Layout.Tapes {
		if tc.Volume == bad {
			t.Fatalf("a copy made again on %s, the damaged cartridge", bad)
		}
	}
	outOf := func() string {
		lib, err := c.Library(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range lib.Cartridges {
			if ct.Volume == bad {
				return ct.OutOfService
			}
		}
		t.Fatalf("no cartridge %s", bad)
		return ""
	}
	if why := outOf(); !strings.HasPrefix(why, "read-only: 1 damaged tape file(s), the last: "+bad+" tape file") {
		t.Fatalf("the damaged cartridge: %q", why)
	}
	if err := c.SetCartridgeService(ctx, bad, true); err != nil {
		t.Fatal(err)
	}
	if why := outOf(); why != "" {
		t.Fatalf("the damaged cartridge put back in service: %q", why)
	}

	one := randBytes(9, 150000)
	onTape(t, c, "/one", one, "")
	damageOnTape(t, s, residency(t, c, "/one").Layout.Tapes[0].Volume, one)
	for i := 0; i < 2; i++ {
		_, err := getBytes(c, "/one")
		if err == nil || !strings.Contains(err.Error(), "/one") || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("read %d of a file whose only copy, on tape, is damaged: %v", i, err)
		}
	}
	if in := s.Core.Integrity(); in.Lost != 1 {
		t.Fatalf("integrity counts %+v", in)
	}
}

// damageOnTape flips a byte of data in the emulated cartridge volume,
// found by its content.
func damageOnTape(t *testing.T, s *server.Server, volume string, data []byte) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.Cfg.DataDir, "tapes", volume, "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, data[1000:1064]); i >= 0 {
			flip(t, p, int64(i))
			return
		}
	}
	t.Fatalf("no tape file on %s holds the data", volume)
}

// Scrub verifies named files' disk copies: a damaged one with a tape copy
// is re-made from it, one without is reported lost, a whole one is left
// alone.
func TestScrub(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	data := randBytes(10, 400000)
	for _, p := range []string{"/kept", "/lone", "/whole"} {
		if _, err := c.Put(ctx, p, bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Migrate(ctx, "/kept"); err != nil {
		t.Fatal(err)
	}
	damage(t, s.Cfg.DataDir, residency(t, c, "/kept").Layout.Segments[1].Object, 10)
	damage(t, s.Cfg.DataDir, residency(t, c, "/lone").Layout.Segments[0].Object, 10)
	res, err := c.Scrub(ctx, "/kept", "/lone", "/whole")
	if err != nil || res.Files != 3 || res.Bytes != 3*int64(len(data)) || len(res.Damaged) != 2 ||
		!strings.HasPrefix(res.Damaged[0], "/kept: disk copy damaged") || !strings.HasPrefix(res.Damaged[1], "/lone is lost") {
		t.Fatalf("scrub: %+v, %v", res, err)
	}
	if got, err := getBytes(c, "/kept"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the scrub: %v", err)
	}
	integrity(t, s, api.Integrity{DamagedDisk: 2, Repaired: 1, Lost: 1})
}

// Scrubbing a cartridge reads every copy on it: a damaged copy of a file
// on disk is made again from the disk copy, one of a file on tape only
// from its other tape copy (recalled for that), and whole ones are left.
func TestScrubVolume(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	onDisk, onTapeOnly, whole := randBytes(11, 300000), randBytes(12, 200000), randBytes(13, 100000)
	for p, d := range map[string][]byte{"/ondisk": onDisk, "/tapeonly": onTapeOnly, "/whole": whole} {
		if _, err := c.Put(ctx, p, bytes.NewReader(d), int64(len(d)), client.PutOptions{COS: "dual"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Migrate(ctx, "/ondisk", "/tapeonly", "/whole"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Purge(ctx, "/tapeonly"); err != nil {
		t.Fatal(err)
	}
	vol := residency(t, c, "/ondisk").Layout.Tapes[0].Volume
	if v := residency(t, c, "/tapeonly").Layout.Tapes[0].Volume; v != vol {
		t.Fatalf("the first copies are on %s and %s", vol, v)
	}
	damageOnTape(t, s, vol, onDisk)
	damageOnTape(t, s, vol, onTapeOnly)
	res, err := c.ScrubVolume(ctx, vol)
	if err != nil || res.Files != 3 || len(res.Damaged) != 2 {
		t.Fatalf("scrub %s: %+v, %v", vol, res, err)
	}
	for _, p := range []string{"/ondisk", "/tapeonly"} {
		waitFor(t, func() bool {
			fi := residency(t, c, p)
			return len(fi.Layout.Tapes) == 2 && fi.Layout.Tapes[0].Copy != 1 && fi.Layout.Tapes[1].Copy != 1
		}, p+"'s damaged tape copy made again")
	}
	if fi := residency(t, c, "/whole"); len(fi.Layout.Tapes) != 2 || fi.Layout.Tapes[0].Copy != 1 {
		t.Fatalf("a whole file's copies changed: %+v", fi.Layout.Tapes)
	}
	for p, d := range map[string][]byte{"/ondisk": onDisk, "/tapeonly": onTapeOnly, "/whole": whole} {
		if got, err := getBytes(c, p); err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s after the scrub: %v", p, err)
		}
	}
	integrity(t, s, api.Integrity{DamagedTape: 2, Repaired: 2})
}

// The background scrubber finds a damaged disk copy nobody reads and
// re-makes it from the tape copy.
func TestBackgroundScrub(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, func(cfg *config.Config) {
		cfg.Integrity.ScrubRate = 1 << 30
		cfg.Integrity.ScrubEvery = "100ms"
	})
	data := randBytes(14, 300000)
	if _, err := c.Mkdir(ctx, "/d", false, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/d/f", bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(ctx, "/d/f"); err != nil {
		t.Fatal(err)
	}
	bad := residency(t, c, "/d/f").Layout.Segments[0].Object
	damage(t, s.Cfg.DataDir, bad, 10)
	waitFor(t, func() bool { return s.Core.Integrity().Repaired == 1 }, "the scrubber to repair the file")
	if fi := residency(t, c, "/d/f"); fi.Residency != "disk+tape" || fi.Layout.Segments[0].Object == bad {
		t.Fatalf("after the scrub: %s %+v", fi.Residency, fi.Layout.Segments)
	}
}
