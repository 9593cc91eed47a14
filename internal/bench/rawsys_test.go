package bench

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rawLstat answers as lstat does: the same inode for a file, ENOENT for a
// missing one, the link itself for a symlink, and long paths too; rawUnlink
// as unlink does; rawPwrite and rawPread as pwrite and pread do.
func TestRawSyscallsAreLstatAndUnlink(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := filepath.Join(dir, "l")
	if err := os.Symlink(f, l); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, strings.Repeat("d", 200), strings.Repeat("e", 200), strings.Repeat("g", 200))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, l, dir, deep} {
		var a, b unix.Stat_t
		if err := rawLstat(filepath.Dir(p), filepath.Base(p), &a); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := unix.Lstat(p, &b); err != nil {
			t.Fatal(err)
		}
		if a.Ino != b.Ino || a.Mode != b.Mode || a.Size != b.Size {
			t.Errorf("%s: raw %+v, lstat %+v", p, a, b)
		}
	}
	var st unix.Stat_t
	if err := rawLstat(dir, "missing", &st); !errors.Is(err, unix.ENOENT) {
		t.Errorf("missing file: %v, want ENOENT", err)
	}
	if err := rawLstat(dir, "a\x00b", &st); err == nil {
		t.Error("a path with a NUL byte was statted")
	}
	if err := rawUnlink(filepath.Dir(f), filepath.Base(f)); err != nil {
		t.Fatal(err)
	}
	if err := rawUnlink(filepath.Dir(f), filepath.Base(f)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second unlink: %v, want ENOENT", err)
	}
	if err := rawUnlink(filepath.Dir(dir), filepath.Base(dir)); !errors.Is(err, unix.EISDIR) {
		t.Errorf("unlink of a directory: %v, want EISDIR", err)
	}
	g, err := os.Create(filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, err := rawPwrite(int(g.Fd()), []byte("hello"), 4096); err != nil || n != 5 {
		t.Fatalf("pwrite: %d %v", n, err)
	}
	b := make([]byte, 5)
	if _, err := g.ReadAt(b, 4096); err != nil || string(b) != "hello" {
		t.Errorf("read back %q %v", b, err)
	}
	if n, err := rawPwrite(-1, []byte("x"), 0); n != 0 || !errors.Is(err, unix.EBADF) {
		t.Errorf("bad fd: %d %v, want 0 EBADF", n, err)
	}
	r := make([]byte, 8)
	if n, err := rawPread(int(g.Fd()), r, 4094); err != nil || n != 7 || string(r[:n]) != "\x00\x00hello" {
		t.Errorf("pread: %d %q %v, want 7 \"\\x00\\x00hello\"", n, r[:n], err)
	}
	if n, err := rawPread(int(g.Fd()), r, 1<<20); err != nil || n != 0 {
		t.Errorf("pread past the end: %d %v, want 0 nil", n, err)
	}
	if n, err := readAt(int(g.Fd()), true, r[:5], 4096); err != nil || n != 5 || string(r[:5]) != "hello" {
		t.Errorf("readAt: %d %q %v", n, r[:5], err)
	}
	if n, err := readAt(int(g.Fd()), true, r, 4096); !errors.Is(err, io.EOF) || n != 5 {
		t.Errorf("readAt across the end: %d %v, want 5 EOF", n, err)
	}
	if n, err := rawPread(-1, r, 0); n != 0 || !errors.Is(err, unix.EBADF) {
		t.Errorf("bad fd: %d %v, want 0 EBADF", n, err)
	}
}
