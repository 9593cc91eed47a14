// Package fsiotest is the conformance suite for fsio.FS: what Strata's
// storage code relies on of a file system, checked against real files.
// Every implementation (the OS's, faultfs with no faults) must pass it.
package fsiotest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/fsio"
)

// Run runs the suite against the FS newFS returns for each test, working
// in a fresh directory of the test's.
func Run(t *testing.T, newFS func(t *testing.T) fsio.FS) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, fs fsio.FS, dir string)
	}{
		{"CreateIsExclusive", createIsExclusive},
		{"WriteReadAt", writeReadAt},
		{"AllocateTruncateStat", allocateTruncateStat},
		{"SyncFileDirFS", syncFileDirFS},
		{"RenameRemove", renameRemove},
		{"Missing", missing},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			fs := newFS(t)
			if err := fs.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			c.fn(t, fs, dir)
		})
	}
}

func create(t *testing.T, fs fsio.FS, p string, data []byte) {
	t.Helper()
	f, err := fs.Create(p, 0, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.WriteAt(data, 0); err != nil || n != len(data) {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, fs fsio.FS, p string) []byte {
	t.Helper()
	f, err := fs.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, info.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt: %d of %d, %v", n, len(b), err)
	}
	return b
}

func createIsExclusive(t *testing.T, fs fsio.FS, dir string) {
	p := filepath.Join(dir, "x")
	create(t, fs, p, []byte("one"))
	if _, err := fs.Create(p, 0, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second Create of %s: %v, want ErrExist", p, err)
	}
	info, err := fs.Stat(p)
	if err != nil || info.Mode().Perm() != 0o600 || info.Size() != 3 {
		t.Fatalf("Stat: %v, %v", info, err)
	}
}

func writeReadAt(t *testing.T, fs fsio.FS, dir string) {
	p := filepath.Join(dir, "x")
	f, err := fs.Create(p, 0, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != p || f.OS() == nil {
		t.Fatalf("Name %q, OS %v", f.Name(), f.OS())
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, w := range []struct {
		off int64
		p   []byte
	}{{1 << 20, big}, {0, []byte("head")}, {5, []byte("gap")}} {
		if n, err := f.WriteAt(w.p, w.off); err != nil || n != len(w.p) {
			t.Fatalf("WriteAt(%d): %d, %v", w.off, n, err)
		}
	}
	f.Close()
	want := make([]byte, 1<<20+len(big))
	copy(want, "head\x00gap")
	copy(want[1<<20:], big)
	if got := content(t, fs, p); !bytes.Equal(got, want) {
		t.Fatal("read back differs from what was written")
	}
	r, err := fs.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := make([]byte, 10)
	if n, err := r.ReadAt(b, int64(len(want))-4); n != 4 || err != io.EOF {
		t.Fatalf("ReadAt past the end: %d, %v; want 4, EOF", n, err)
	}
}

func allocateTruncateStat(t *testing.T, fs fsio.FS, dir string) {
	f, err := fs.Create(filepath.Join(dir, "x"), 0, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := func() int64 {
		info, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	if err := f.Allocate(0, 1<<20); err != nil {
		t.Skip("fallocate not supported here:", err)
	}
	if size() != 1<<20 {
		t.Fatalf("size after Allocate: %d", size())
	}
	if err := f.Truncate(100); err != nil || size() != 100 {
		t.Fatalf("Truncate: %v, size %d", err, size())
	}
}

func syncFileDirFS(t *testing.T, fs fsio.FS, dir string) {
	f, err := fs.Create(filepath.Join(dir, "x"), 0, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal("Sync:", err)
	}
	if err := f.SyncFS(); err != nil {
		t.Fatal("SyncFS:", err)
	}
	f.Close()
	d, err := fs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal("Sync of a directory:", err)
	}
	if info, err := d.Stat(); err != nil || !info.IsDir() {
		t.Fatalf("Stat of a directory: %v, %v", info, err)
	}
}

func renameRemove(t *testing.T, fs fsio.FS, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	create(t, fs, a, []byte("new"))
	create(t, fs, b, []byte("old"))
	if err := fs.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := content(t, fs, b); string(got) != "new" {
		t.Fatalf("after Rename over it, %s holds %q", b, got)
	}
	if _, err := fs.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat of the old name: %v", err)
	}
	if err := fs.Remove(b); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(b); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat after Remove: %v", err)
	}
}

func missing(t *testing.T, fs fsio.FS, dir string) {
	p := filepath.Join(dir, "nothing")
	if _, err := fs.Open(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open: %v", err)
	}
	if err := fs.Remove(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove: %v", err)
	}
	if err := fs.Rename(p, p+"2"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Rename: %v", err)
	}
	if _, err := fs.Create(filepath.Join(p, "x"), 0, 0o600); err == nil {
		t.Fatal("Create under a missing directory succeeded")
	}
}
