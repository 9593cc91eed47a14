package fsio_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
	"github.com/strata-storage/strata/internal/fsio/fsiotest"
)

func TestOS(t *testing.T) {
	fsiotest.Run(t, func(*testing.T) fsio.FS { return fsio.OS })
}

// faultfs with no rules is a file system like any other.
func TestFaultFS(t *testing.T) {
	fsiotest.Run(t, func(*testing.T) fsio.FS { return faultfs.New(fsio.OS) })
}

// OpenFile opens as os.OpenFile does: the mode's permission bits, its
// errors as *os.PathError that errors.Is knows, directories too.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	f, err := fsio.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("strata"), 0); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil || st.Mode().Perm() != 0o640&^umask() || f.Name() != p {
		t.Fatalf("stat %v, %v; name %q", st, err, f.Name())
	}
	f.Close()
	if _, err := fsio.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("an exclusive create of an existing file: %v", err)
	}
	var pe *fs.PathError
	if _, err := fsio.OpenFile(p+".missing", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != p+".missing" {
		t.Errorf("a missing file: %v", err)
	}
	d, err := fsio.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Errorf("a directory's fsync: %v", err)
	}
	if names, err := d.Readdirnames(-1); err != nil || len(names) != 1 {
		t.Errorf("a directory's entries: %v, %v", names, err)
	}
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// BenchmarkOpen opens, stats, reads 4 KiB of and closes a small file, as
// a mover reading an object or a put reading its source does: with
// OpenFile and, the baseline in the same run, with os.Open.
func BenchmarkOpen(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, c := range []struct {
		name string
		open func(string) (*os.File, error)
	}{
		{"OpenFile", func(p string) (*os.File, error) { return fsio.OpenFile(p, os.O_RDONLY, 0) }},
		{"os.Open", os.Open},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f, err := c.open(p)
				if err != nil {
					b.Fatal(err)
				}
				f.Stat()
				f.ReadAt(buf, 0)
				f.Close()
			}
		})
	}
}
