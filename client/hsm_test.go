package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/hsm"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/testutil"
)

func residency(t *testing.T, c *client.Client, path string) *client.FileInfo {
	t.Helper()
	fi, err := c.Stat(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// The first acceptance test: a file of a disk → tape class is
// migrated, purged, then recalled on read, with identical bytes and
// checksums, on the emulated library in instant time.
func TestMigratePurgeRecall(t *testing.T) {
	t.Parallel()
	c, dataDir := newClient(t, func(cfg *config.Config) { cfg.ReclaimEvery = "100ms" })
	data := randBytes(31, 5*64<<10+12345) // several stripes
	roundTrip(t, c, "/cold.dat", data, client.PutOptions{})
	before := residency(t, c, "/cold.dat")
	if before.Residency != api.ResidencyDisk {
		t.Fatalf("residency after put: %q", before.Residency)
	}

	res, err := c.Migrate(ctx, "/cold.dat")
	if err != nil || res.Files != 1 || res.Bytes != int64(len(data)) {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	fi := residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyBoth || len(fi.Layout.Tapes) != 1 || fi.Layout.Tapes[0].Length != int64(len(data)) {
		t.Fatalf("after migrate: %q %+v", fi.Residency, fi.Layout)
	}
	if res, err := c.Migrate(ctx, "/cold.dat"); err != nil || res.Files != 0 {
		t.Fatalf("second migrate copied again: %+v, %v", res, err)
	}

	if _, err := c.Purge(ctx, "/cold.dat"); err != nil {
		t.Fatal(err)
	}
	fi = residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyTape || len(fi.Layout.Segments) != 0 {
		t.Fatalf("after purge: %q %+v", fi.Residency, fi.Layout)
	}
	// The purged objects are deleted by the reclaimer, and only then.
	waitFor(t, func() bool { return len(objects(t, dataDir)) == 0 }, "purged objects deleted")

	var out bytes.Buffer
	if _, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{NoWait: true}); !errors.Is(err, client.ErrOffline) {
		t.Fatalf("get --no-wait of a file on tape: %v", err)
	}
	// The recall it queued runs on its own (the library's time is
	// instant): let it finish and purge again, so that the get below
	// meets the file on tape and has a recall to report.
	waitFor(t, func() bool { return residency(t, c, "/cold.dat").Residency == api.ResidencyBoth }, "the queued recall done")
	if _, err := c.Purge(ctx, "/cold.dat"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	var states []string
	got, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{VerifyFixity: true, Staging: func(s client.StageStatus) { states = append(states, s.State) }})
	if err != nil {
		t.Fatalf("get with recall: %v", err)
	}
	if !bytes.Equal(out.Bytes(), data) || got.Fixity != before.Fixity {
		t.Fatalf("recalled %d bytes differ (fixity %s, was %s)", out.Len(), got.Fixity, before.Fixity)
	}
	if len(states) == 0 {
		t.Fatal("the get did not report the recall")
	}
	fi = residency(t, c, "/cold.dat")
	if fi.Residency != api.ResidencyBoth || len(fi.Layout.Segments) != 1 {
		t.Fatalf("after recall: %q %+v", fi.Residency, fi.Layout)
	}
	// Purge and recall again: a new disk copy under new object names.
	c.Purge(ctx, "/cold.dat")
	sts, err := c.Stage(ctx, []string{"/cold.dat"}, 0)
	if err != nil || len(sts) != 1 || sts[0].State == api.StageFailed {
		t.Fatalf("stage: %+v, %v", sts, err)
	}
	out.Reset()
	if _, err := c.Get(ctx, "/cold.dat", &out, client.GetOptions{VerifyFixity: true}); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("second recall: %v", err)
	}
}

func TestPurgeNeverDropsTheLastCopy(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	roundTrip(t, c, "/only", []byte("the only copy"), client.PutOptions{})
	if _, err := c.Purge(ctx, "/only"); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("purge of a file without a tape copy: %v", err)
	}
	roundTrip(t, c, "/only", []byte("the only copy"), client.PutOptions{Overwrite: true})
}

// A tape-only class keeps no disk copy once the tape copy is verified.
func TestTapeOnlyClass(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	data := randBytes(32, 70000)
	if _, err := c.Put(ctx, "/a", bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: "archive"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if fi := residency(t, c, "/a"); fi.Residency != api.ResidencyTape {
		t.Fatalf("archive file after migration: %q", fi.Residency)
	}
	var out bytes.Buffer
	if _, err := c.Get(ctx, "/a", &out, client.GetOptions{}); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("recall of an archive file: %v", err)
	}
}

// tapeServer starts a server and returns it with a client.
func tapeServer(t *testing.T, edit func(*config.Config)) (*server.Server, *client.Client) {
	s := testutil.Start(t, edit)
	c, err := client.New(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

// onTape puts a file, migrates and purges it.
func onTape(t *testing.T, c *client.Client, path string, data []byte, cos string) {
	t.Helper()
	if _, err := c.Put(ctx, path, bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: cos}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Migrate(ctx, path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Purge(ctx, path); err != nil {
		t.Fatal(err)
	}
}

// purgeAndEmptyDrives purges paths and takes every cartridge out of its
// drive, so the recalls that follow start with a mount (a mounted
// cartridge is served from its first request on).
func purgeAndEmptyDrives(t *testing.T, s *server.Server, c *client.Client, paths ...string) {
	t.Helper()
	if _, err := c.Purge(ctx, paths...); err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Library.Drives() {
		if d.Volume != "" {
			s.Library.Dismount(ctx, d.ID)
		}
	}
}

func getBytes(c *client.Client, path string) ([]byte, error) {
	var out bytes.Buffer
	_, err := c.Get(ctx, path, &out, client.GetOptions{VerifyFixity: true})
	return out.Bytes(), err
}

// A drive that fails during a recall is taken out of service and the
// recall is served by another drive.
func TestRecallSurvivesDriveFailure(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	data := randBytes(41, 300000)
	onTape(t, c, "/f", data, "")
	lib, _ := c.Library(ctx)
	var mounted string
	for _, d := range lib.Drives {
		if d.Volume != "" {
			mounted = d.ID
		}
	}
	if mounted == "" {
		t.Fatal("no drive holds the cartridge after migration")
	}
	s.Library.FailDrive(mounted, true) // the drive that would serve it at once
	got, err := getBytes(c, "/f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("recall with a failed drive: %v", err)
	}
	lib, _ = c.Library(ctx)
	for _, d := range lib.Drives {
		if d.ID == mounted && d.State != "failed" {
			t.Fatalf("drive %s shows %q", d.ID, d.State)
		}
	}
}

// A file with copies on two cartridges is served from the second when the
// first is unreadable; a file with one copy on an unreadable cartridge
// fails with a clear error.
func TestUnreadableCartridge(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, nil)
	two := randBytes(42, 200000)
	onTape(t, c, "/two", two, "dual")
	fi, _ := c.Stat(ctx, "/two")
	if len(fi.Layout.Tapes) != 2 || fi.Layout.Tapes[0].Volume == fi.Layout.Tapes[1].Volume {
		t.Fatalf("dual class: tape copies %+v", fi.Layout.Tapes)
	}
	s.Library.SetUnreadable(fi.Layout.Tapes[0].Volume, true)
	got, err := getBytes(c, "/two")
	if err != nil || !bytes.Equal(got, two) {
		t.Fatalf("recall from the second copy: %v", err)
	}

	one := randBytes(43, 100000)
	onTape(t, c, "/one", one, "")
	fi, _ = c.Stat(ctx, "/one")
	s.Library.SetUnreadable(fi.Layout.Tapes[0].Volume, true)
	_, err = getBytes(c, "/one")
	if !errors.Is(err, client.ErrOffline) || !strings.Contains(err.Error(), "unreadable") || !strings.Contains(err.Error(), "/one") {
		t.Fatalf("recall from the only, unreadable copy: %v", err)
	}
}

// The catalog rebuilt from the cartridges alone matches the namespace of
// the files on tape: paths, attributes, fixity and every tape copy.
func TestRebuildCatalogFromTapes(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, func(cfg *config.Config) { cfg.HSM.Aggregate = 150 << 10 }) // a few files per tape file
	want := map[string]*client.FileInfo{}
	for i, p := range []string{"/a", "/d1/b", "/d1/c", "/d1/d2/e", "/d3/f", "/d3/g", "/d3/h"} {
		if _, err := c.Mkdir(ctx, p[:strings.LastIndex(p, "/")+1], true, 0o755); err != nil {
			t.Fatal(err)
		}
		data := randBytes(uint64(50+i), 40000+i*9000)
		if _, err := c.Put(ctx, p, bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: []string{"default", "dual"}[i%2]}); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			mode := uint32(0o600)
			if _, err := c.SetAttr(ctx, client.SetAttr{Path: p, Mode: &mode}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a", "/d1/b", "/d1/c", "/d1/d2/e", "/d3/f", "/d3/g", "/d3/h"} {
		fi, err := c.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = fi
	}

	store, err := sqlite.Open(filepath.Join(t.TempDir(), "rebuilt.db"), sqlite.Options{Sync: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	res, err := hsm.Rebuild(ctx, s.Library, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != len(want) {
		t.Fatalf("rebuild found %+v, want %d files", res, len(want))
	}
	got := map[string]bool{}
	var walk func(dir int64, path string)
	walk = func(dir int64, path string) {
		ents, err := store.List(ctx, dir, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ents {
			p := path + "/" + in.Name
			if in.Kind == catalog.KindDir {
				walk(in.ID, p)
				continue
			}
			got[p] = true
			w := want[p]
			if w == nil {
				t.Errorf("rebuilt catalog has %s, not on tape", p)
				continue
			}
			b, err := store.Bitfile(ctx, in.Bitfile)
			if err != nil {
				t.Fatal(err)
			}
			if in.Size != w.Size || in.Mode != w.Mode || in.UID != w.UID || in.GID != w.GID || in.Mtime != w.Mtime.UnixNano() || in.COS != w.COS || b.Fixity != w.Fixity || b.OnDisk {
				t.Errorf("%s: rebuilt %+v fixity %s, original %+v", p, in, b.Fixity, w)
			}
			if len(b.Tapes) != len(w.Layout.Tapes) {
				t.Fatalf("%s: %d tape copies rebuilt, %d recorded", p, len(b.Tapes), len(w.Layout.Tapes))
			}
			for _, tc := range b.Tapes {
				found := false
				for _, o := range w.Layout.Tapes {
					found = found || (tc.Volume == o.Volume && tc.Seq == o.Seq && tc.Offset == o.Offset && tc.Length == o.Length && tc.CRC32C == o.CRC32C)
				}
				if !found {
					t.Errorf("%s: rebuilt copy %+v not among the recorded %+v", p, tc, w.Layout.Tapes)
				}
			}
		}
	}
	walk(catalog.RootID, "")
	if len(got) != len(want) {
		t.Fatalf("rebuilt %d files, want %d", len(got), len(want))
	}
}

// Repack moves the live files off a cartridge (recalling those on tape
// only), drops the dead ones' space, and leaves the cartridge empty.
func TestRepack(t *testing.T) {
	t.Parallel()
	_, c := tapeServer(t, nil)
	keep := randBytes(61, 90000)
	cold := randBytes(62, 120000)
	for p, d := range map[string][]byte{"/keep": keep, "/cold": cold, "/dead": randBytes(63, 50000)} {
		if _, err := c.Put(ctx, p, bytes.NewReader(d), int64(len(d)), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fi, _ := c.Stat(ctx, "/keep")
	vol := fi.Layout.Tapes[0].Volume
	if err := c.Remove(ctx, "/dead", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Purge(ctx, "/cold"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Repack(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 2 {
		t.Fatalf("repack moved %+v, want the 2 live files", res)
	}
	lib, _ := c.Library(ctx)
	for _, ct := range lib.Cartridges {
		if ct.Volume == vol && (ct.TapeFiles != 0 || ct.Used != 0) {
			t.Fatalf("%s after repack: %+v", vol, ct)
		}
	}
	for p, d := range map[string][]byte{"/keep": keep, "/cold": cold} {
		fi, _ := c.Stat(ctx, p)
		if len(fi.Layout.Tapes) != 1 || fi.Layout.Tapes[0].Volume == vol {
			t.Fatalf("%s tape copies after repack: %+v", p, fi.Layout.Tapes)
		}
		if p == "/cold" && fi.Residency != api.ResidencyTape {
			t.Fatalf("/cold came back to disk for the repack and stayed: %q", fi.Residency)
		}
		c.Purge(ctx, p)
		got, err := getBytes(c, p)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%s from its new cartridge: %v", p, err)
		}
	}
	if _, err := c.Repack(ctx, "NOPE"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("repack of an unknown cartridge: %v", err)
	}
}

// A file's class of service: asked for at put, else its nearest
// directory's default, else the first size rule it fits, else the default.
func TestClassOfServiceChoice(t *testing.T) {
	t.Parallel()
	_, c := tapeServer(t, func(cfg *config.Config) {
		cfg.SizeRules = []config.SizeRule{{MaxSize: 1000, COS: "disk"}, {MaxSize: 100000, COS: "single"}}
	})
	archive := "archive"
	if _, err := c.Mkdir(ctx, "/arch/sub", true, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetAttr(ctx, client.SetAttr{Path: "/arch", COS: &archive}); err != nil {
		t.Fatal(err)
	}
	bogus := "bogus"
	if _, err := c.SetAttr(ctx, client.SetAttr{Path: "/arch", COS: &bogus}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("setting an unknown class: %v", err)
	}
	cases := []struct {
		path, asked string
		size        int
		want        string
	}{
		{"/arch/sub/f", "", 5000, "archive"}, // inherited from /arch
		{"/arch/g", "wide", 5000, "wide"},    // asked for wins
		{"/tiny", "", 10, "disk"},            // first size rule
		{"/small", "", 5000, "single"},       // second size rule
		{"/big", "", 200000, "default"},      // no rule fits
		{"/empty", "", 0, "disk"},            // empty files too
	}
	for _, tc := range cases {
		d := randBytes(70, tc.size)
		fi, err := c.Put(ctx, tc.path, bytes.NewReader(d), int64(len(d)), client.PutOptions{COS: tc.asked})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := c.Stat(ctx, tc.path); fi.COS != tc.want || st.COS != tc.want {
			t.Errorf("%s: class %q (stat %q), want %q", tc.path, fi.COS, st.COS, tc.want)
		}
	}
}

// Classes of service edited at run time apply to new files at once and to
// existing files' migration (TestCOSEditSurvivesRestart: and persist).
func TestEditClassOfService(t *testing.T) {
	t.Parallel()
	_, c := tapeServer(t, nil)
	d := randBytes(80, 100000)
	if _, err := c.Put(ctx, "/d", bytes.NewReader(d), int64(len(d)), client.PutOptions{COS: "disk"}); err != nil {
		t.Fatal(err)
	}
	if res, _ := c.Migrate(ctx); res.Files != 0 {
		t.Fatalf("a disk-only file was migrated: %+v", res)
	}
	if _, err := c.SetCOS(ctx, client.COS{Name: "disk", Pool: "disk", StripeWidth: 2, StripeUnit: 64 << 10, TapeCopies: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Migrate(ctx); err != nil || res.Files != 1 {
		t.Fatalf("after the class gained a tape copy: %+v, %v", res, err)
	}
	if _, err := c.SetCOS(ctx, client.COS{Name: "new", Pool: "disk", StripeWidth: 3, StripeUnit: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Put(ctx, "/n", bytes.NewReader(d), int64(len(d)), client.PutOptions{COS: "new"})
	if err != nil || fi.COS != "new" || len(fi.Layout.Segments) != 2 { // 100000 bytes = 2 units of 64 KiB
		t.Fatalf("put in a new class: %+v, %v", fi, err)
	}
	if _, err := c.SetCOS(ctx, client.COS{Name: "broken", Pool: "disk"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a class without stripes: %v", err)
	}
}

// A large file striped on disk is striped on tape too: its stripes dealt
// round to two drives, each writing its stripes as one tape file on
// another cartridge at once; the recall reads the stripes back (on
// several drives) into a disk copy with the same striping; the catalog
// rebuilt from tape has it too.
func TestStripedTapeCopy(t *testing.T) {
	t.Parallel()
	s, c := tapeServer(t, func(cfg *config.Config) {
		cfg.HSM.StripeMin = 100 << 10
		cfg.HSM.MigrateDrives = 2
	})
	data := randBytes(90, 4*64<<10+5000) // 5 units over 4 stripes
	if _, err := c.Put(ctx, "/big", bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	small := randBytes(91, 50000)
	if _, err := c.Put(ctx, "/small", bytes.NewReader(small), int64(len(small)), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Migrate(ctx)
	if err != nil || res.Files != 2 {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	fi, _ := c.Stat(ctx, "/big")
	vols := map[string]bool{}
	tapeFiles := map[string]int64{} // volume and seq → the next stripe's offset in it
	for i, tc := range fi.Layout.Tapes {
		if tc.Copy != 1 || tc.Stripe != i || tc.Length != fi.Layout.Segments[i].Length || tc.CRC32C != fi.Layout.Segments[i].CRC32C {
			t.Fatalf("tape stripe %d: %+v, disk segment %+v", i, tc, fi.Layout.Segments[i])
		}
		vols[tc.Volume] = true
		k := fmt.Sprint(tc.Volume, "/", tc.Seq)
		if tc.Offset != tapeFiles[k] {
			t.Fatalf("tape stripe %d at offset %d of its tape file, want %d", i, tc.Offset, tapeFiles[k])
		}
		tapeFiles[k] += tc.Length
	}
	if len(fi.Layout.Tapes) != 4 || len(vols) != 2 || len(tapeFiles) != 2 {
		t.Fatalf("striped copy: %d stripes in %d tape files on %d cartridges: %+v", len(fi.Layout.Tapes), len(tapeFiles), len(vols), fi.Layout.Tapes)
	}
	if st := s.Library.Stats(); st.Mounts < 2 {
		t.Fatalf("one drive did all the work: %+v", st)
	}
	c.Purge(ctx, "/big")
	got, err := getBytes(c, "/big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("recall of a striped copy: %v", err)
	}
	fi, _ = c.Stat(ctx, "/big")
	if fi.Layout.StripeWidth != 4 || len(fi.Layout.Segments) != 4 || fi.Residency != api.ResidencyBoth {
		t.Fatalf("recalled disk copy: %+v", fi.Layout)
	}

	store, err := sqlite.Open(filepath.Join(t.TempDir(), "rebuilt.db"), sqlite.Options{Sync: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := hsm.Rebuild(ctx, s.Library, store, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	in, err := store.Lookup(ctx, catalog.RootID, "big")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := store.Bitfile(ctx, in.Bitfile)
	if in.Size != int64(len(data)) || b.StripeWidth != 4 || b.StripeUnit != 64<<10 || len(b.Tapes) != 4 || b.Tapes[3].Stripe != 3 {
		t.Fatalf("rebuilt striped file: %+v %+v", in, b)
	}
}

// The scheduling test through the whole server: 1,000 files on 10
// cartridges, purged, then all staged at once in random order; the
// recaller mounts each cartridge once and every file comes back intact.
// (internal/sched's TestThousandRecallsOnTenCartridges checks the tape
// order and compares positioning with first come, first served.)
func TestThousandRecallsThroughTheServer(t *testing.T) {
	t.Parallel()
	const files, size = 1000, 4096
	s, c := tapeServer(t, func(cfg *config.Config) {
		cfg.Library.Drives, cfg.Library.Cartridges = 4, 12
		// A cartridge takes about 100 of these files (each tape file
		// wants 1 MiB of slack), so they spread over 10 cartridges.
		cfg.Library.Capacity = 1<<20 + 100*(size+400)
		cfg.HSM.Aggregate = 1 // a tape file per file
		cfg.HSM.MigrateDrives = 1
		// No cartridge reaches the file count; all become due by age.
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMaxAge = 100000, "2s"
	})
	data := make([][]byte, files)
	paths := make([]string, files)
	for i := range data {
		data[i], paths[i] = randBytes(uint64(1000+i), size), fmt.Sprintf("/f%04d", i)
		if _, err := c.Put(ctx, paths[i], bytes.NewReader(data[i]), size, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.Migrate(ctx); err != nil || res.Files != files {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	used := 0
	for _, ct := range s.Library.Cartridges() {
		if ct.Files > 0 {
			used++
		}
	}
	if used < 10 {
		t.Fatalf("files on %d cartridges, want 10", used)
	}
	purgeAndEmptyDrives(t, s, c, paths...)
	before := s.Library.Stats()
	order := rand.New(rand.NewPCG(5, 5)).Perm(files)
	shuffled := make([]string, files)
	for i, k := range order {
		shuffled[i] = paths[k]
	}
	// The drives are out of service while the files are staged, so that
	// every request is queued before any cartridge is mounted however
	// slowly the stage runs (under the race detector, on a loaded
	// machine, it took longer than the 2 s a request may wait).
	drives := s.Library.Drives()
	for _, d := range drives {
		if err := c.SetDriveService(ctx, d.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Stage(ctx, shuffled, 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range drives {
		if err := c.SetDriveService(ctx, d.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range paths {
		got, err := getBytes(c, p)
		if err != nil || !bytes.Equal(got, data[i]) {
			t.Fatalf("%s after the recall: %v", p, err)
		}
	}
	if mounts := s.Library.Stats().Mounts - before.Mounts; mounts > int64(used) {
		t.Fatalf("%d mounts to recall files from %d cartridges", mounts, used)
	}
}

// A recall of every fourth small file of a cartridge reads through the
// short gaps between them instead of locating before each one: a locate
// costs seconds, reading 192 KiB on an LTO-5 drive about a millisecond.
func TestRecallReadsThroughShortGaps(t *testing.T) {
	t.Parallel()
	const files, size = 40, 64 << 10
	s, c := tapeServer(t, func(cfg *config.Config) {
		cfg.Library.Generation = "LTO-5" // full-size cartridges: gaps are what they are
		cfg.HSM.MigrateDrives = 1
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMaxAge = files/4, "1h" // one batch, once all are queued
	})
	data := make([][]byte, files)
	var wanted []string
	for i := range data {
		p := fmt.Sprintf("/g%02d", i)
		data[i] = randBytes(uint64(2000+i), size)
		if _, err := c.Put(ctx, p, bytes.NewReader(data[i]), size, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			wanted = append(wanted, p)
		}
	}
	if res, err := c.Migrate(ctx); err != nil || res.Files != files {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	purgeAndEmptyDrives(t, s, c, wanted...)
	before := s.Library.Stats()
	if _, err := c.Stage(ctx, wanted, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range wanted {
		var i int
		fmt.Sscanf(p, "/g%02d", &i)
		if got, err := getBytes(c, p); err != nil || !bytes.Equal(got, data[i]) {
			t.Fatalf("%s after the recall: %v", p, err)
		}
	}
	st := s.Library.Stats()
	locates, through := st.Locates-before.Locates, st.ReadThroughs-before.ReadThroughs
	if through != int64(len(wanted)-1) || locates != 1 {
		t.Fatalf("%d files recalled with %d locates and %d gaps read through; want 1 and %d", len(wanted), locates, through, len(wanted)-1)
	}
	if pos := st.Positioning - before.Positioning; pos > 2*tape.Generations["LTO-5"].LocateStart {
		t.Fatalf("positioning took %v for %d files close together", pos, len(wanted))
	}
}

// A recall that arrives for a cartridge while a batch reads it, for a
// file the drive has yet to pass, joins that batch (sched.Merge): one
// mount, one locate, the gaps read through — not a second batch after the
// first, which would locate again.
func TestRecallJoinsTheBatchBeingRead(t *testing.T) {
	t.Parallel()
	const size = 64 << 10
	s, c := tapeServer(t, func(cfg *config.Config) {
		cfg.Library.Generation = "LTO-5"
		cfg.Library.TimeScale = "x10" // a mount takes 1.2 s: the late recall arrives meanwhile
		cfg.HSM.MigrateDrives = 1
		cfg.HSM.RecallMinFiles, cfg.HSM.RecallMaxAge = 2, "1h" // alone, the late one would wait for the batch's end
	})
	paths := []string{"/j0", "/j1", "/j2", "/j3", "/j4"}
	batch, late := []string{"/j0", "/j2"}, []string{"/j4"} // gaps between them: read through
	data := make([][]byte, len(paths))
	for i, p := range paths {
		data[i] = randBytes(uint64(2100+i), size)
		if _, err := c.Put(ctx, p, bytes.NewReader(data[i]), size, client.PutOptions{COS: "single", NoFixity: true}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.Migrate(ctx); err != nil || res.Files != len(paths) {
		t.Fatalf("migrate: %+v, %v", res, err)
	}
	purgeAndEmptyDrives(t, s, c, paths...)
	before := s.Library.Stats()
	if _, err := c.Stage(ctx, batch, 0); err != nil {
		t.Fatal(err)
	}
	busy := func() bool {
		for _, d := range s.Library.Drives() {
			if d.Busy {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !busy(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no drive took the batch")
		}
	}
	if _, err := c.Stage(ctx, late, 0); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2, 4} {
		if got, err := getBytes(c, paths[i]); err != nil || !bytes.Equal(got, data[i]) {
			t.Fatalf("%s after the recall: %v", paths[i], err)
		}
	}
	st := s.Library.Stats()
	if m, l, r := st.Mounts-before.Mounts, st.Locates-before.Locates, st.ReadThroughs-before.ReadThroughs; m != 1 || l != 1 || r != 2 {
		t.Fatalf("%d mounts, %d locates, %d gaps read through; want 1, 1, 2: the late recall read on the way", m, l, r)
	}
}

// Small files are read ahead of the drive, many at once; a damaged one
// among them (its only copy: lost) is left out of its tape file and named
// in the result, and every other file migrates in the same pass. A second
// migration does not try the lost file again.
func TestMigrationGoesOnPastADamagedSmallFile(t *testing.T) {
	t.Parallel()
	c, dataDir := newClient(t, nil)
	const files = 40
	var paths []string
	for i := 0; i < files; i++ {
		p := fmt.Sprintf("/s%02d", i)
		paths = append(paths, p)
		if _, err := c.Put(ctx, p, bytes.NewReader(randBytes(uint64(300+i), 50000+i)), int64(50000+i), client.PutOptions{COS: "single"}); err != nil {
			t.Fatal(err)
		}
	}
	victim := residency(t, c, "/s17").Layout.Segments[0].Object
	for _, p := range objects(t, dataDir) {
		if strings.HasSuffix(p, victim) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{0xff, 0x00, 0xff}, 1000)
			f.Close()
		}
	}
	res, err := c.Migrate(ctx, paths...)
	if err != nil || res.Files != files-1 || len(res.Damaged) != 1 || !strings.Contains(res.Damaged[0], "/s17 is lost") {
		t.Fatalf("migration over a damaged file: %+v, %v", res, err)
	}
	for _, p := range paths {
		if fi := residency(t, c, p); (len(fi.Layout.Tapes) == 0) != (p == "/s17") {
			t.Fatalf("%s has tape copies %+v", p, fi.Layout.Tapes)
		}
	}
	if res, err := c.Migrate(ctx, paths...); err != nil || res.Files != 0 || len(res.Damaged) != 0 {
		t.Fatalf("migrating again: %+v, %v", res, err)
	}
}

// A new file takes the class of service of its nearest ancestor directory
// that names one, as the namespace says now: the core caches what each
// directory hands down, and setting, changing or moving a directory must
// not leave that cache behind.
func TestDirectoryClassOfServiceInherited(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	if _, err := c.Mkdir(ctx, "/a/b/c", true, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mkdir(ctx, "/x", false, 0); err != nil {
		t.Fatal(err)
	}
	setCOS := func(p, cos string) {
		t.Helper()
		if _, err := c.SetAttr(ctx, client.SetAttr{Path: p, COS: &cos}); err != nil {
			t.Fatalf("set class of %s: %v", p, err)
		}
	}
	n := 0
	check := func(dir, want string) {
		t.Helper()
		for _, size := range []int{0, 100} { // empty files commit at create
			n++
			p := fmt.Sprintf("%s/f%d", dir, n)
			fi, err := c.Put(ctx, p, bytes.NewReader(make([]byte, size)), int64(size), client.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fi.COS != want {
				t.Fatalf("%s (%d bytes): class %q, want %q", p, size, fi.COS, want)
			}
		}
	}
	check("/a/b/c", "default") // resolves /a/b/c into the cache
	setCOS("/a", "archive")
	check("/a/b/c", "archive")
	setCOS("/a/b", "dual")
	check("/a/b/c", "dual")
	check("/a", "archive")
	setCOS("/", "dual")
	check("/x", "dual")
	setCOS("/x", "archive")
	if err := c.Rename(ctx, "/a/b", "/x/b", false); err != nil {
		t.Fatal(err)
	}
	setCOS("/x/b", "")
	check("/x/b/c", "archive") // from /x now, not /a
	setCOS("/x", "")
	check("/x/b/c", "dual") // from /
	setCOS("/", "")
	check("/x/b/c", "default")
}

// The purge policy follows the fuller of the pool's configured use and its
// file system's: a pool well within its capacity on a file system that
// something else has filled past the high-water mark still purges. The
// device lives on a 64 MiB tmpfs the test mounts (as root, as the test
// suite runs), which a foreign file then fills.
func TestPurgeFollowsFullFileSystem(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	s := testutil.Start(t, func(cfg *config.Config) {
		cfg.Devices = []config.Device{{ID: "small0", Path: filepath.Join(mnt, "dev")}}
	})
	c := testutil.Client(t, s)
	for i := range 4 {
		roundTrip(t, c, fmt.Sprintf("/f%d", i), randBytes(uint64(70+i), 1<<20), client.PutOptions{})
	}
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pool := func() client.PoolInfo {
		df, err := c.DF(ctx)
		if err != nil || len(df.Pools) != 1 {
			t.Fatalf("df: %+v, %v", df, err)
		}
		return df.Pools[0]
	}
	if p := pool(); p.FileSystems != 1 || p.FSSize != 64<<20 {
		t.Fatalf("the pool's file system: %+v", p)
	}
	// Within the watermarks: nothing to purge.
	if res, err := c.Purge(ctx); err != nil || res.Files != 0 {
		t.Fatalf("purge with room to spare: %+v, %v", res, err)
	}
	foreign := make([]byte, 56<<20)
	if err := os.WriteFile(filepath.Join(mnt, "foreign"), foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	// The mover reports its file systems every few seconds.
	waitFor(t, func() bool { p := pool(); return p.FSFree < p.FSSize/10 }, "the full file system reported")
	if p := pool(); p.Used*10 > p.Capacity*9 {
		t.Fatalf("configured use is above the high-water mark already: %+v", p)
	}
	res, err := c.Purge(ctx)
	if err != nil || res.Files == 0 {
		t.Fatalf("purge of a pool on a full file system: %+v, %v", res, err)
	}
}

// A cartridge taken out of service is not read: a recall queued on it
// moves to the file's other copy, and one asked for later goes there at
// once; put back, it serves again. Every drive failed, a recall waits
// and says why instead of estimating.
func TestCartridgeOutOfService(t *testing.T) {
	t.Parallel()
	_, c := tapeServer(t, nil)
	data := randBytes(44, 200000)
	onTape(t, c, "/two", data, "dual")
	lib, err := c.Library(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range lib.Drives {
		if err := c.InjectFault(ctx, client.LibraryFault{FailDrive: d.ID}); err != nil {
			t.Fatal(err)
		}
	}
	sts, err := c.Stage(ctx, []string{"/two"}, 0)
	if err != nil || sts[0].State != api.StageQueued || !strings.Contains(sts[0].Waiting, "no usable tape drive") || sts[0].ETA != 0 {
		t.Fatalf("stage with every drive failed: %+v, %v", sts, err)
	}
	if err := c.SetCartridgeService(ctx, sts[0].Volume, false); err != nil {
		t.Fatal(err)
	}
	st, err := c.StageStatus(ctx, "/two")
	if err != nil || st.State != api.StageQueued || st.Volume == sts[0].Volume {
		t.Fatalf("after its cartridge went out of service, the recall is %+v, %v", st, err)
	}
	for _, d := range lib.Drives {
		if err := c.InjectFault(ctx, client.LibraryFault{RepairDrive: d.ID}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetDriveService(ctx, d.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := getBytes(c, "/two"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("recall from the other copy: %v", err)
	}
	if err := c.SetCartridgeService(ctx, sts[0].Volume, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCartridgeService(ctx, "NOSUCH", false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("an unknown cartridge: %v", err)
	}
	if err := c.SetDriveService(ctx, "nosuch", false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("an unknown drive: %v", err)
	}
}

// A policy pass over more candidates than one catalog page (1,000) packs
// them into tape files as the pages come and hands each to a drive as soon
// as it is packed: every file gets the copies its class wants, and files
// keep their write order within and across the tape files of a cartridge,
// the classes of each number of copies in turn.
func TestMigrationPassAcrossPages(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, func(cfg *config.Config) { cfg.HSM.Aggregate = 64 << 10 })
	const files, size = 2500, 2000
	type put struct {
		path   string
		copies int
	}
	var puts []put
	for i := 0; i < files; i++ {
		p := put{fmt.Sprintf("/p%04d", i), 1}
		cos := "single"
		if i%500 == 7 {
			p.copies, cos = 2, "dual" // another group of classes, between the others
		}
		if _, err := c.Put(ctx, p.path, bytes.NewReader(randBytes(uint64(i), size)), size, client.PutOptions{COS: cos}); err != nil {
			t.Fatal(err)
		}
		puts = append(puts, p)
	}
	res, err := c.Migrate(ctx)
	if err != nil || res.Files < files {
		t.Fatalf("migration: %+v, %v", res, err)
	}
	type place struct {
		vol    string
		seq    int
		offset int64
	}
	type key struct {
		vol    string
		copies int
	}
	last := map[key]place{} // a cartridge's last copy of a group, in write order
	for _, p := range puts {
		fi := residency(t, c, p.path)
		if len(fi.Layout.Tapes) != p.copies {
			t.Fatalf("%s: %d tape copies, want %d", p.path, len(fi.Layout.Tapes), p.copies)
		}
		for _, tc := range fi.Layout.Tapes {
			at := place{tc.Volume, tc.Seq, tc.Offset}
			k := key{tc.Volume, p.copies}
			if prev, ok := last[k]; ok && (at.seq < prev.seq || at.seq == prev.seq && at.offset <= prev.offset) {
				t.Fatalf("%s is at tape file %d offset %d of %s, before a file written earlier (tape file %d offset %d)", p.path, at.seq, at.offset, tc.Volume, prev.seq, prev.offset)
			}
			last[k] = at
		}
	}
}

// Damage deep inside a disk copy is found while it is copied to tape,
// whether the tape server reads the object's file (its mover is on this
// host) or a stream: the chunks before it have gone on to the drive, the
// mover is asked to read on from the damaged chunk and check it at rest,
// and the file is dealt with as damaged while the others migrate.
func TestMigrationFindsDamageDeepInACopy(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			t.Parallel()
			s := testutil.Start(t, nil)
			if stream {
				s.Core.MoverPool().SetHandles(false)
			}
			c := testutil.Client(t, s)
			sizes := []int{3<<20 + 512<<10, 5 << 20, 40000}
			var paths []string
			for i, n := range sizes {
				p := fmt.Sprintf("/d%d", i)
				paths = append(paths, p)
				if _, err := c.Put(ctx, p, bytes.NewReader(randBytes(uint64(500+i), n)), int64(n), client.PutOptions{COS: "single"}); err != nil {
					t.Fatal(err)
				}
			}
			victim := residency(t, c, "/d0").Layout.Segments[0].Object
			for _, p := range objects(t, s.Cfg.DataDir) {
				if strings.HasSuffix(p, victim) {
					f, err := os.OpenFile(p, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					f.WriteAt([]byte{0xff, 0x00, 0xff}, 2<<20+4321) // the third chunk
					f.Close()
				}
			}
			res, err := c.Migrate(ctx, paths...)
			if err != nil || res.Files != len(sizes)-1 || len(res.Damaged) != 1 || !strings.Contains(res.Damaged[0], "/d0 is lost") {
				t.Fatalf("migration over a copy damaged in its third chunk: %+v, %v", res, err)
			}
			for _, p := range paths[1:] {
				if fi := residency(t, c, p); len(fi.Layout.Tapes) != 1 {
					t.Fatalf("%s has tape copies %+v", p, fi.Layout.Tapes)
				}
			}
		})
	}
}
