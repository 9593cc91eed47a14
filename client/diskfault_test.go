package client_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/testutil"
)

// restart stops s after its faultfs crashed, leaves the files as the
// crash would and starts a server on the same data (through the OS: the
// machine is back).
func restart(t *testing.T, s *server.Server, fs *faultfs.FS) (*server.Server, *client.Client) {
	t.Helper()
	cfg := s.Cfg
	s.Close()
	if err := fs.Restore(); err != nil {
		t.Fatal(err)
	}
	s2, err := server.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2, testutil.Client(t, s2)
}

// faultServer starts a server whose devices' files go through a faultfs,
// reclaiming what a failed write leaves as soon as it is asked to.
func faultServer(t *testing.T, edit func(*config.Config)) (*server.Server, *client.Client, *faultfs.FS) {
	t.Helper()
	fs := faultfs.New(fsio.OS)
	s := testutil.StartWith(t, server.Options{FS: fs}, func(c *config.Config) {
		c.ReclaimGrace = "1ms"
		if edit != nil {
			edit(c)
		}
	})
	return s, testutil.Client(t, s), fs
}

// Sizes that take each of a device's write paths (testutil's 64 KiB
// stripe unit over four devices): objects of at most 1 MiB are written
// through the page cache and made durable by a group syncfs; larger ones
// are preallocated, written with O_DIRECT and fsynced with their directory.
const (
	smallFile = 200 << 10
	largeFile = 16 << 20
)

// Every failure a device's file system can return while a file is put:
// the put fails with one error naming the cause, no version of the file
// appears half-written, an overwritten file keeps its old version, the
// objects the failed put left are reclaimed, and the server goes on
// serving the same put once the fault is gone.
func TestPutSurvivesDiskFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		rule faultfs.Rule
		size int
		want string // in the put's error
	}{
		{"create fails", faultfs.Rule{Op: faultfs.OpCreate}, smallFile, "input/output error"},
		{"write fails mid-object", faultfs.Rule{Op: faultfs.OpWrite, Nth: 3}, largeFile, "input/output error"},
		{"disk full mid-object", faultfs.Rule{Op: faultfs.OpWrite, Nth: 2, Err: syscall.ENOSPC}, largeFile, "no space"},
		{"small object's write fails", faultfs.Rule{Op: faultfs.OpWrite}, smallFile, "input/output error"},
		{"preallocation finds the disk full", faultfs.Rule{Op: faultfs.OpAllocate, Err: syscall.ENOSPC}, largeFile, "no space"},
		{"object fsync fails", faultfs.Rule{Op: faultfs.OpSync}, largeFile, "input/output error"},
		{"directory fsync fails", faultfs.Rule{Op: faultfs.OpSyncDir}, largeFile, "input/output error"},
		{"group syncfs fails", faultfs.Rule{Op: faultfs.OpSyncFS}, smallFile, "input/output error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, cl, fs := faultServer(t, nil)
			old := randBytes(1, c.size)
			roundTrip(t, cl, "/kept", old, client.PutOptions{})
			before := objects(t, s.Cfg.DataDir)

			fs.Inject(c.rule)
			for _, p := range []string{"/new", "/kept"} {
				data := randBytes(2, c.size)
				_, err := cl.Put(ctx, p, bytes.NewReader(data), int64(len(data)), client.PutOptions{Overwrite: true})
				if err == nil {
					t.Fatalf("put %s succeeded through %+v", p, c.rule)
				}
				if !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
					t.Errorf("put %s: %v; want an error saying %q", p, err, c.want)
				}
				if full := errors.Is(c.rule.Err, syscall.ENOSPC); errors.Is(err, client.ErrNoSpace) != full {
					t.Errorf("put %s: %v; is ErrNoSpace: %v, want %v", p, err, !full, full)
				}
			}
			if fs.Injected() == 0 {
				t.Fatal("no fault was injected")
			}
			fs.Clear()
			if _, err := cl.Stat(ctx, "/new"); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("/new after its failed put: %v", err)
			}
			if got, err := getBytes(cl, "/kept"); err != nil || !bytes.Equal(got, old) {
				t.Fatalf("/kept after a failed overwrite: %v", err)
			}
			if _, err := s.Core.Reclaim(ctx); err != nil {
				t.Fatal(err)
			}
			if after := objects(t, s.Cfg.DataDir); !slices.Equal(after, before) {
				t.Fatalf("objects after reclaim: %d, before the failed puts %d", len(after), len(before))
			}
			roundTrip(t, cl, "/new", randBytes(3, c.size), client.PutOptions{})
		})
	}
}

// A crash that loses everything not yet synced loses nothing a put was
// acknowledged for: clients put files until the devices' file system
// "loses power" under them; after a restart every acknowledged file reads
// back whole and verified, every visible file is one that was put whole,
// and the objects of the puts cut short are reclaimed.
func TestCrashKeepsAcknowledgedFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		sizes []int
	}{
		// Small objects are made durable by group syncs, large ones by
		// their own fsyncs (which a group sync also covers: only large
		// files show a large object's own syncs at work).
		{"mixed", []int{smallFile, 3000, largeFile, 0}},
		{"large", []int{largeFile, largeFile + 12345}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			crashWhilePutting(t, c.sizes)
		})
	}
}

func crashWhilePutting(t *testing.T, sizes []int) {
	fs := faultfs.New(fsio.OS)
	s := testutil.StartWith(t, server.Options{FS: fs}, func(c *config.Config) {
		c.Catalog.Sync = "full" // a commit the client saw is on disk
		c.ReclaimGrace = "1ms"
	})
	cl := testutil.Client(t, s)
	type put struct {
		path string
		seed uint64
		size int
	}
	var (
		mu    sync.Mutex
		acked []put
		tried = map[string]put{}
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				p := put{fmt.Sprintf("/w%d-%03d", w, i), uint64(w*1000 + i), sizes[i%len(sizes)]}
				mu.Lock()
				tried[p.path] = p
				mu.Unlock()
				data := randBytes(p.seed, p.size)
				if _, err := cl.Put(ctx, p.path, bytes.NewReader(data), int64(p.size), client.PutOptions{}); err != nil {
					return // the crash
				}
				mu.Lock()
				if acked = append(acked, p); len(acked) == 24 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	fs.Crash()
	wg.Wait()
	s2, cl2 := restart(t, s, fs)
	cfg := s2.Cfg
	for _, p := range acked {
		got, err := getBytes(cl2, p.path)
		if err != nil || !bytes.Equal(got, randBytes(p.seed, p.size)) {
			t.Errorf("acknowledged %s (%d bytes) after the crash: %v", p.path, p.size, err)
		}
	}
	visible, err := cl2.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	for _, fi := range visible {
		p, ok := tried[fi.Path]
		if !ok {
			t.Errorf("%s appeared from nowhere", fi.Path)
			continue
		}
		if got, err := getBytes(cl2, fi.Path); err != nil || !bytes.Equal(got, randBytes(p.seed, p.size)) {
			t.Errorf("%s is visible after the crash but not whole: %v", fi.Path, err)
		}
		full, err := cl2.Stat(ctx, fi.Path)
		if err != nil {
			t.Fatal(err)
		}
		if full.Layout != nil {
			for _, sg := range full.Layout.Segments {
				keep[sg.Object] = true
			}
		}
	}
	if len(visible) < len(acked) {
		t.Errorf("%d files visible, %d acknowledged", len(visible), len(acked))
	}
	if _, err := s2.Core.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, cfg.DataDir) {
		if !keep[filepath.Base(o)] {
			t.Errorf("object %s belongs to no file after reclaim", o)
		}
	}
	t.Logf("%d puts acknowledged, %d visible after the crash, %d tried", len(acked), len(visible), len(tried))
}

// Tier moves meet the same faults: a migration that cannot read the disk
// copy, a recall or a repack that cannot write one. Each fails with a
// clear error, leaves the file as it was (on disk, on tape, on its old
// cartridge), leaves no objects behind after reclaim, and succeeds once
// the fault is gone.
func TestTierMovesSurviveDiskFaults(t *testing.T) {
	t.Parallel()
	data := randBytes(7, 300<<10)
	t.Run("migrate", func(t *testing.T) {
		t.Parallel()
		s, cl, fs := faultServer(t, nil)
		roundTrip(t, cl, "/f", data, client.PutOptions{})
		fs.Inject(faultfs.Rule{Op: faultfs.OpRead})
		if res, err := cl.Migrate(ctx, "/f"); err == nil {
			t.Fatalf("migrate of an unreadable disk copy: %+v", res)
		} else if !bytes.Contains([]byte(err.Error()), []byte("input/output error")) {
			t.Errorf("migrate: %v", err)
		}
		fs.Clear()
		if fi := residency(t, cl, "/f"); fi.Residency != api.ResidencyDisk {
			t.Fatalf("after the failed migration: %q", fi.Residency)
		}
		if _, err := s.Core.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		if res, err := cl.Migrate(ctx, "/f"); err != nil || res.Files != 1 {
			t.Fatalf("migrate once the disk reads: %+v, %v", res, err)
		}
		if got, err := getBytes(cl, "/f"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get after migration: %v", err)
		}
	})
	t.Run("recall", func(t *testing.T) {
		t.Parallel()
		s, cl, fs := faultServer(t, nil)
		onTape(t, cl, "/f", data, "")
		if _, err := s.Core.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		fs.Inject(faultfs.Rule{Op: faultfs.OpWrite})
		_, err := getBytes(cl, "/f")
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("input/output error")) {
			t.Fatalf("get through a recall that cannot write: %v", err)
		}
		fs.Clear()
		if fi := residency(t, cl, "/f"); fi.Residency != api.ResidencyTape {
			t.Fatalf("after the failed recall: %q", fi.Residency)
		}
		if _, err := s.Core.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		if left := objects(t, s.Cfg.DataDir); len(left) != 0 {
			t.Fatalf("the failed recall left %d objects", len(left))
		}
		if got, err := getBytes(cl, "/f"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get once the disk writes: %v", err)
		}
	})
	t.Run("repack", func(t *testing.T) {
		t.Parallel()
		s, cl, fs := faultServer(t, nil)
		onTape(t, cl, "/f", data, "")
		vol := residency(t, cl, "/f").Layout.Tapes[0].Volume
		if _, err := s.Core.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		fs.Inject(faultfs.Rule{Op: faultfs.OpWrite})
		if res, err := cl.Repack(ctx, vol); err == nil {
			t.Fatalf("repack through a disk that cannot write: %+v", res)
		} else if !bytes.Contains([]byte(err.Error()), []byte("input/output error")) {
			t.Errorf("repack: %v", err)
		}
		fs.Clear()
		fi := residency(t, cl, "/f")
		if fi.Residency != api.ResidencyTape || len(fi.Layout.Tapes) != 1 || fi.Layout.Tapes[0].Volume != vol {
			t.Fatalf("after the failed repack: %q %+v", fi.Residency, fi.Layout.Tapes)
		}
		if _, err := s.Core.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
		if left := objects(t, s.Cfg.DataDir); len(left) != 0 {
			t.Fatalf("the failed repack left %d objects", len(left))
		}
		if res, err := cl.Repack(ctx, vol); err != nil || res.Files != 1 {
			t.Fatalf("repack once the disk writes: %+v, %v", res, err)
		}
		if got, err := getBytes(cl, "/f"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get from the new cartridge: %v", err)
		}
	})
}

// The emulated library's files go through the same file system: a tape
// file that cannot be written or made durable fails its migration, which
// records no tape copy, and the file migrates once the fault is gone.
// Tape files are named by their 7-digit sequence number (".partial" while
// written), cartridges' directories by their volume.
func TestMigrationSurvivesTapeFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		rule faultfs.Rule
	}{
		{"tape file write", faultfs.Rule{Op: faultfs.OpWrite, Name: "*.partial"}},
		{"tape file fsync at the flush", faultfs.Rule{Op: faultfs.OpSync, Name: "???????"}},
		{"cartridge directory fsync at the flush", faultfs.Rule{Op: faultfs.OpSyncDir, Name: "T?????"}},
		{"tape file rename", faultfs.Rule{Op: faultfs.OpRename}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, cl, fs := faultServer(t, nil)
			data := randBytes(8, 300<<10)
			roundTrip(t, cl, "/f", data, client.PutOptions{})
			fs.Inject(c.rule)
			if res, err := cl.Migrate(ctx, "/f"); err == nil {
				t.Fatalf("migrate through %+v: %+v", c.rule, res)
			} else if !bytes.Contains([]byte(err.Error()), []byte("input/output error")) {
				t.Errorf("migrate: %v", err)
			}
			if fs.Injected() == 0 {
				t.Fatal("no fault was injected")
			}
			fs.Clear()
			if fi := residency(t, cl, "/f"); fi.Residency != api.ResidencyDisk || len(fi.Layout.Tapes) != 0 {
				t.Fatalf("after the failed migration: %q %+v", fi.Residency, fi.Layout.Tapes)
			}
			if res, err := cl.Migrate(ctx, "/f"); err != nil || res.Files != 1 {
				t.Fatalf("migrate once the fault is gone: %+v, %v", res, err)
			}
			if _, err := cl.Purge(ctx, "/f"); err != nil {
				t.Fatal(err)
			}
			if got, err := getBytes(cl, "/f"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("get from tape: %v", err)
			}
		})
	}
}

// A drive that fails while it writes a file's data (the tape file's
// second write: the first is its header) is taken out of
// service, as one that fails at its mount is, and the file migrates on the
// other drive; the stream's next tape file of the same pass goes on in
// the other drive at once.
func TestDriveFailingMidWriteLeavesService(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		next bool // a second file, in a tape file of its own after the first's
	}{
		{"one file", false},
		{"the pass going on", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, cl, fs := faultServer(t, func(c *config.Config) { c.HSM.MigrateDrives, c.HSM.Aggregate = 1, 100<<10 })
			roundTrip(t, cl, "/f", randBytes(9, 300<<10), client.PutOptions{COS: "single"}) // one stripe: the aggregating path
			names := []string{"/f"}
			if c.next {
				roundTrip(t, cl, "/g", randBytes(10, 300<<10), client.PutOptions{COS: "single"})
				names = nil // a pass over both
			}
			fs.Inject(faultfs.Rule{Op: faultfs.OpWrite, Name: "*.partial", Nth: 2, Count: 1, Err: tape.ErrDriveFailed})
			if res, err := cl.Migrate(ctx, names...); err == nil || !errors.Is(err, tape.ErrDriveFailed) && !strings.Contains(err.Error(), tape.ErrDriveFailed.Error()) {
				t.Fatalf("migrate through a failing drive: %+v, %v", res, err)
			}
			lib, err := cl.Library(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, d := range lib.Drives {
				if strings.HasPrefix(d.OutOfService, "failed") {
					out = append(out, d.ID)
				}
			}
			if len(out) != 1 {
				t.Fatalf("drives out of service after a failure mid-write: %v (%+v)", out, lib.Drives)
			}
			if c.next {
				if tapes := residency(t, cl, "/g").Layout.Tapes; len(tapes) != 1 {
					t.Fatalf("the next file's tape copies: %+v", tapes)
				}
				for _, d := range lib.Drives {
					if d.ID != out[0] && d.BytesWrite == 0 {
						t.Fatalf("the next tape file was not written in %s: %+v", d.ID, lib.Drives)
					}
				}
			}
			if res, err := cl.Migrate(ctx, "/f"); err != nil || res.Files != 1 {
				t.Fatalf("migrate on the other drive: %+v, %v", res, err)
			}
			if fi := residency(t, cl, "/f"); len(fi.Layout.Tapes) != 1 {
				t.Fatalf("tape copies: %+v", fi.Layout.Tapes)
			}
		})
	}
}

// A cartridge that fails a write (its drive not reported failed) takes no
// more writes and the migration goes on on another cartridge; when the
// write fails there too, the drive is the likelier cause and leaves
// service instead, and the file migrates on the other drive. A striped
// file's stripes, written on several drives at once, go to other
// cartridges at the next pass.
func TestCartridgeFailingAWrite(t *testing.T) {
	t.Parallel()
	striped := func(c *config.Config) { c.HSM.StripeMin, c.HSM.MigrateDrives = 100<<10, 2 }
	oneStream := func(c *config.Config) { c.HSM.MigrateDrives, c.HSM.Aggregate = 1, 100<<10 }
	for _, c := range []struct {
		name      string
		edit      func(*config.Config)
		cos       string
		err       error // what the writes fail with (EIO)
		failures  int   // writes that fail, from the first tape file's first data write on
		migrated  bool  // by the first migrate
		readOnly  int
		drivesOut int
		next      bool // a second file, in a tape file of its own after the first's
	}{
		{"once", nil, "single", nil, 1, true, 1, 0, false},
		{"on two cartridges", nil, "single", nil, 2, false, 1, 1, false},
		{"on two cartridges, the pass going on", oneStream, "single", nil, 2, false, 1, 1, true},
		{"a striped file's", striped, "", nil, 1, false, 1, 0, false},
		// The emulated library's own storage full is no cartridge's
		// fault: the pass fails and nothing is marked.
		{"the emulator's storage full", nil, "single", syscall.ENOSPC, 1, false, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, cl, fs := faultServer(t, c.edit)
			roundTrip(t, cl, "/f", randBytes(9, 4*64<<10+5000), client.PutOptions{COS: c.cos})
			if c.next {
				roundTrip(t, cl, "/g", randBytes(10, 4*64<<10+5000), client.PutOptions{COS: c.cos})
			}
			fs.Inject(faultfs.Rule{Op: faultfs.OpWrite, Name: "*.partial", Nth: 2, Count: c.failures, Err: cmp.Or(c.err, error(syscall.EIO))})
			names := []string{"/f"}
			if c.next {
				names = nil // a pass over both
			}
			res, err := cl.Migrate(ctx, names...)
			if c.migrated != (err == nil) {
				t.Fatalf("migrate with %d failing writes: %+v, %v", c.failures, res, err)
			}
			if err != nil && c.readOnly > 0 && !strings.Contains(err.Error(), tape.ErrWriteFailed.Error()) {
				t.Fatalf("a cartridge's failure not said to be one: %v", err)
			}
			lib, err := cl.Library(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var readOnly, drivesOut []string
			for _, ct := range lib.Cartridges {
				if strings.HasPrefix(ct.OutOfService, "read-only: a write in") {
					readOnly = append(readOnly, ct.Volume)
				}
			}
			for _, d := range lib.Drives {
				if d.OutOfService != "" {
					drivesOut = append(drivesOut, d.ID)
				}
			}
			if len(readOnly) != c.readOnly || len(drivesOut) != c.drivesOut {
				t.Fatalf("read-only cartridges %v, drives out %v (%+v %+v)", readOnly, drivesOut, lib.Cartridges, lib.Drives)
			}
			if c.next {
				// The stream's next tape file went on in the other drive.
				if tapes := residency(t, cl, "/g").Layout.Tapes; len(tapes) != 1 || tapes[0].Volume == readOnly[0] {
					t.Fatalf("the next file's tape copies %+v with %s read-only", tapes, readOnly[0])
				}
			}
			if !c.migrated {
				if res, err := cl.Migrate(ctx, "/f"); err != nil || res.Files != 1 {
					t.Fatalf("migrate on the other drive: %+v, %v", res, err)
				}
			}
			tapes := residency(t, cl, "/f").Layout.Tapes
			if len(tapes) == 0 || slices.ContainsFunc(tapes, func(tc api.TapeCopy) bool { return slices.Contains(readOnly, tc.Volume) }) {
				t.Fatalf("tape copies %+v with %v read-only", tapes, readOnly)
			}
		})
	}
}

// A crash during a migration, or just after it, loses nothing: after the
// restart every file reads back from disk, and every tape copy the catalog
// recorded reads back from tape once the disk copy is purged.
func TestCrashAroundMigration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		rule   faultfs.Rule
		copies bool // the migration was recorded before the crash
	}{
		{"at a tape file's fsync", faultfs.Rule{Op: faultfs.OpSync, Name: "???????", Crash: true}, false},
		{"at the cartridge's directory fsync", faultfs.Rule{Op: faultfs.OpSyncDir, Name: "T?????", Crash: true}, false},
		{"after the copies were recorded", faultfs.Rule{Op: faultfs.OpCreate, Name: "*.0.0", Crash: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := faultfs.New(fsio.OS)
			s := testutil.StartWith(t, server.Options{FS: fs}, func(c *config.Config) {
				c.Catalog.Sync = "full"
				c.ReclaimGrace = "1ms"
			})
			cl := testutil.Client(t, s)
			files := map[string][]byte{}
			for i := range 4 {
				p := fmt.Sprintf("/f%d", i)
				files[p] = randBytes(uint64(10+i), 200<<10+i*1000)
				roundTrip(t, cl, p, files[p], client.PutOptions{})
			}
			fs.Inject(c.rule)
			_, err := cl.Migrate(ctx)
			if c.copies {
				if err != nil {
					t.Fatal(err)
				}
				extra := randBytes(99, 1000)
				if _, err := cl.Put(ctx, "/after", bytes.NewReader(extra), int64(len(extra)), client.PutOptions{}); err == nil {
					t.Fatal("a put after the crash succeeded")
				}
			} else if err == nil {
				t.Fatal("the migration went through the crash")
			}
			if !fs.Crashed() {
				t.Fatal("the FS did not crash")
			}
			_, cl2 := restart(t, s, fs)
			onTape := 0
			for p, data := range files {
				if got, err := getBytes(cl2, p); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s after the crash: %v", p, err)
				}
				if len(residency(t, cl2, p).Layout.Tapes) == 0 {
					continue
				}
				onTape++
				if _, err := cl2.Purge(ctx, p); err != nil {
					t.Fatal(err)
				}
				if got, err := getBytes(cl2, p); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s from the tape copy the catalog recorded: %v", p, err)
				}
			}
			if want := map[bool]int{true: len(files)}[c.copies]; onTape != want {
				t.Fatalf("%d files on tape after the crash, want %d", onTape, want)
			}
		})
	}
}
