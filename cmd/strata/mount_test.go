package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
)

// mounted is a `strata mount` process and its mount point.
type mounted struct {
	t   *testing.T
	dir string
	cmd *exec.Cmd
	log *cmdtest.Buffer
}

// needFUSE skips a test on a machine without FUSE, unless the test run
// requires it (scripts/test.sh installs fuse3 and sets
// STRATA_REQUIRE_FUSE=1: there a missing FUSE fails).
func needFUSE(t *testing.T) {
	t.Helper()
	_, err := os.Stat("/dev/fuse")
	if err == nil {
		_, err = exec.LookPath("fusermount3")
	}
	if err == nil {
		return
	}
	mountUnavailable(t, "FUSE unavailable: %v", err)
}

// mountUnavailable ends a mount test that this machine cannot run: it
// fails where the run requires FUSE (STRATA_REQUIRE_FUSE, as
// scripts/test.sh sets it), else it skips.
func mountUnavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("STRATA_REQUIRE_FUSE") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// mount runs `strata mount` on a new directory, as cred (nil: as this
// process), and waits until the kernel lists the mount.
func (s *server) mount(cred *syscall.Credential, args ...string) *mounted {
	s.t.Helper()
	needFUSE(s.t)
	dir := filepath.Join(s.t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	m := &mounted{t: s.t, dir: dir, log: &cmdtest.Buffer{}}
	m.cmd = exec.Command(bin, append(append([]string{"mount"}, args...), dir)...)
	m.cmd.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if cred != nil {
		if fi, err := os.Stat("/dev/fuse"); err == nil && fi.Mode().Perm()&0o006 != 0o006 {
			mountUnavailable(s.t, "/dev/fuse is not open to other users (mode %v; scripts/test.sh makes it 0666)", fi.Mode().Perm())
		}
		os.Chown(dir, int(cred.Uid), int(cred.Gid))
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		m.cmd.Dir = "/"
	}
	if err := m.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(m.unmount)
	for range 200 {
		if m.isMounted() {
			return m
		}
		if m.cmd.ProcessState != nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("mount did not appear:\n%s", m.log)
	return nil
}

func (m *mounted) isMounted() bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return bytes.Contains(b, []byte(" "+m.dir+" "))
}

// unmount stops the mount as Ctrl-C would; a mount left behind (the
// process was killed) is detached.
func (m *mounted) unmount() {
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { m.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			m.cmd.Process.Kill()
			<-done
		}
	}
	if m.isMounted() {
		exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	}
}

func (m *mounted) path(p string) string { return filepath.Join(m.dir, p) }

// sh runs a shell command in the mount, as cred (nil: as this process).
func (m *mounted) sh(cred *syscall.Credential, script string) (string, error) {
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = m.dir
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (m *mounted) mustSh(script string) string {
	m.t.Helper()
	out, err := m.sh(nil, script)
	if err != nil {
		m.t.Fatalf("%s: %v\n%s\nmount log:\n%s", script, err, out, m.log.Tail(3000))
	}
	return out
}

// TestMountRoundTrip: files of every size class written through the mount
// (in memory only, streamed past the head, several stripes) read back the
// same through the mount and through `strata get`; the mount ends cleanly
// on Ctrl-C.
func TestMountRoundTrip(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil)
	// Run by root, the mount reads ahead 1 MiB, not the kernel's 128 KiB
	// (set just after the mount appears).
	if fi, err := os.Stat(m.dir); err == nil && os.Getuid() == 0 {
		dev := fi.Sys().(*syscall.Stat_t).Dev
		var ra []byte
		for range 100 {
			if ra, _ = os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev))); strings.TrimSpace(string(ra)) == "1024" {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if strings.TrimSpace(string(ra)) != "1024" {
			t.Errorf("read-ahead of the mount: %q KiB, want 1024", ra)
		}
	}
	sizes := []int{0, 1, 4095, 1<<20 + 3, 8 << 20, 8<<20 + 1, 37<<20 + 5}
	for _, n := range sizes {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + n)
		}
		name := fmt.Sprintf("f%d", n)
		if err := os.WriteFile(m.path(name), data, 0o640); err != nil {
			t.Fatalf("write %d bytes: %v\n%s", n, err, m.log)
		}
		got, err := os.ReadFile(m.path(name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes through the mount: %d bytes, %v", n, len(got), err)
		}
		if n > 0 {
			// Files of 1 MiB and more are read past the page cache
			// (FOPEN_DIRECT_IO), smaller ones through it; both map.
			resident, mapped := readMapped(t, m.path(name))
			if n >= 1<<20 && resident != 0 {
				t.Errorf("%d bytes read: %d pages in the page cache, want none", n, resident)
			}
			if n < 1<<20 && resident == 0 {
				t.Errorf("%d bytes read: none in the page cache", n)
			}
			if !bytes.Equal(mapped, data) {
				t.Fatalf("%d bytes: a shared mapping shows other bytes", n)
			}
		}
		out := filepath.Join(s.dir, name)
		s.ok("get", "-f", "--verify", "/"+name, out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes differ through strata get", n)
		}
		fi, err := os.Stat(m.path(name))
		if err != nil || fi.Size() != int64(n) || fi.Mode().Perm() != 0o640 {
			t.Fatalf("stat %s: %v %v", name, fi, err)
		}
	}
	m.unmount()
	if m.isMounted() || m.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("Ctrl-C: mounted %v, exit %d\n%s", m.isMounted(), m.cmd.ProcessState.ExitCode(), m.log)
	}
}

// readMapped reads path whole through one descriptor, then maps that
// descriptor shared: it returns how many of the file's pages the kernel
// held after the read, and what the mapping shows.
func readMapped(t *testing.T, path string) (int, []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap %s shared: %v", path, err)
	}
	defer unix.Munmap(b)
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore %s: %v", path, e)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, bytes.Clone(b)
}

// TestMountErrno: every misuse gets the errno POSIX gives it.
func TestMountErrno(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil)
	m.mustSh("mkdir -p d/sub && echo x > f && echo y > d/g && mkdir e")
	p := m.path
	cases := []struct {
		name string
		do   func() error
		want syscall.Errno
	}{
		{"open missing", func() error { _, err := os.Open(p("nope")); return err }, syscall.ENOENT},
		{"stat missing", func() error { _, err := os.Stat(p("d/nope")); return err }, syscall.ENOENT},
		{"create under missing dir", func() error { return os.WriteFile(p("nope/f"), nil, 0o644) }, syscall.ENOENT},
		{"mkdir existing", func() error { return os.Mkdir(p("d"), 0o755) }, syscall.EEXIST},
		{"mkdir over file", func() error { return os.Mkdir(p("f"), 0o755) }, syscall.EEXIST},
		{"mkdir under file", func() error { return os.Mkdir(p("f/x"), 0o755) }, syscall.ENOTDIR},
		{"create exclusive existing", func() error {
			_, err := os.OpenFile(p("f"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			return err
		}, syscall.EEXIST},
		{"rmdir file", func() error { return syscall.Rmdir(p("f")) }, syscall.ENOTDIR},
		{"unlink dir", func() error { return syscall.Unlink(p("e")) }, syscall.EISDIR},
		{"rmdir non-empty", func() error { return syscall.Rmdir(p("d")) }, syscall.ENOTEMPTY},
		{"open dir for write", func() error { _, err := os.OpenFile(p("d"), os.O_WRONLY, 0); return err }, syscall.EISDIR},
		{"rename dir into itself", func() error { return syscall.Rename(p("d"), p("d/sub/d")) }, syscall.EINVAL},
		{"rename file over dir", func() error { return syscall.Rename(p("f"), p("e")) }, syscall.EISDIR},
		{"rename dir over file", func() error { return syscall.Rename(p("e"), p("f")) }, syscall.ENOTDIR},
		{"rename dir over non-empty dir", func() error { return syscall.Rename(p("e"), p("d")) }, syscall.ENOTEMPTY},
		{"hard link", func() error { return os.Link(p("f"), p("f2")) }, syscall.EPERM},
		{"mkfifo", func() error { return syscall.Mkfifo(p("fifo"), 0o644) }, syscall.EPERM},
		{"read a directory", func() error { _, err := os.ReadFile(p("d")); return err }, syscall.EISDIR},
		{"name too long", func() error { return os.WriteFile(p(strings.Repeat("n", 300)), nil, 0o644) }, syscall.ENAMETOOLONG},
	}
	for _, c := range cases {
		err := c.do()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// And what works: a directory over an empty one, mv, rm -r, chmod,
	// touch, symbolic links (ls shows them, cat follows them).
	m.mustSh("mkdir e2 && mv e e2 && test -d e2 && ! test -e e && mv f d/f && chmod 600 d/f && touch -d '2001-02-03 04:05:06' d/f && ln -s d/f l && ln -s /elsewhere dangling")
	fi, err := os.Stat(p("d/f"))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.ModTime().Year() != 2001 {
		t.Fatalf("chmod/touch: %v %v", fi, err)
	}
	if out := m.mustSh("cat l && readlink dangling && ls -l l"); !strings.HasPrefix(out, "x\n/elsewhere\nl") || !strings.Contains(out, "l -> d/f") {
		t.Fatalf("symlinks: %q", out)
	}
	if out := s.ok("ls", "-l", "/"); !strings.Contains(out, "l -> d/f") {
		t.Fatalf("strata ls of a symlink: %q", out)
	}
	m.mustSh("rm -r d e2 l dangling && test -z \"$(ls -A)\"")
}

// TestMountWriteBack: writes out of order, appends, truncation, reading
// and writing one descriptor, rewriting in place — through the
// write-back file; readers elsewhere (another mount, the CLI) see the old
// version until the writer closes, and the new one after.
func TestMountWriteBack(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil)
	m2 := s.mount(nil, "--attr-timeout", "0s") // sees changes from elsewhere at once
	p := m.path("f")
	orig := bytes.Repeat([]byte("0123456789"), 1<<20) // 10 MiB: streamed
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(m2.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("%v\nmount log:\n%s\nserver log:\n%s", err, m.log.Tail(4000), s.log.Tail(4000))
	}
	want := append([]byte(nil), orig...)
	for _, w := range []struct {
		off int64
		s   string
	}{{5, "AAAA"}, {8 << 20, "BB"}, {0, "C"}, {int64(len(orig)) + 10, "tail"}} {
		if _, err := f.WriteAt([]byte(w.s), w.off); err != nil {
			t.Fatal(err)
		}
		if end := int(w.off) + len(w.s); end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[w.off:], w.s)
	}
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 3); err != nil || string(buf) != string(want[3:9]) {
		t.Fatalf("read own writes: %q %v", buf, err)
	}
	// Before close: another reader still sees the old version.
	if _, err := old.ReadAt(buf, 3); err != nil || string(buf) != string(orig[3:9]) {
		t.Fatalf("old reader: %q %v", buf, err)
	}
	if got := s.ok("cat", "/f"); got != string(orig) {
		t.Fatal("the new version is visible before close")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.ok("cat", "/f"); got != string(want) {
		t.Fatalf("after close: %d bytes, want %d", len(got), len(want))
	}
	if got, err := os.ReadFile(m2.path("f")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("another mount after close: %d bytes, %v", len(got), err)
	}
	// Append, truncate, truncate to nothing and write again.
	m.mustSh("printf end >> f && truncate -s 20 f && printf x >> f")
	want = append(append(want[:0:0], want[:20]...), 'x')
	if got := s.ok("cat", "/f"); got != string(want) {
		t.Fatalf("append/truncate: %q, want %q", got, want)
	}
	m.mustSh(": > f && printf new >> f")
	if got := s.ok("cat", "/f"); got != "new" {
		t.Fatalf("truncate to nothing: %q", got)
	}
	// A file created and written out of order (the write-back file from
	// the start), and one opened read-write and only read.
	g, err := os.Create(m.path("g"))
	if err != nil {
		t.Fatal(err)
	}
	g.WriteAt([]byte("world"), 6)
	g.WriteAt([]byte("hello "), 0)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.ok("cat", "/g"); got != "hello world" {
		t.Fatalf("out of order: %q", got)
	}
	r, err := os.OpenFile(m.path("g"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(m.path("g")); err != nil || string(b) != "hello world" {
		t.Fatalf("read: %q %v", b, err)
	}
	r.Close()
	if fi := s.ok("stat", "--json", "/g"); !strings.Contains(fi, `"size": 11`) {
		t.Fatalf("a read-write open that wrote nothing changed the file: %s", fi)
	}
}

// wholeVersion is one whole version of TestMountRenameAtomic's file.
var wholeVersion = regexp.MustCompile(`^version [0-9]+$`)

// TestMountRenameAtomic: a file replaced again and again by rename (the
// way editors and rsync save) is always there for a reader, old or new,
// never missing and never partial.
func TestMountRenameAtomic(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil, "--attr-timeout", "0s")
	if err := os.WriteFile(m.path("f"), []byte("version 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var bad atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(m.path("f"))
			if err != nil || !wholeVersion.Match(b) {
				bad.Store(fmt.Sprintf("%q %v", b, err))
				return
			}
		}
	}()
	for i := 1; i <= 30; i++ {
		tmp := m.path(fmt.Sprintf(".f.%d", i))
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("version %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, m.path("f")); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatalf("a reader saw %s\nmount log:\n%s\nserver log:\n%s", v, m.log.Tail(3000), s.log.Tail(3000))
	}
	if got := s.ok("cat", "/f"); got != "version 30" {
		t.Fatalf("%q", got)
	}
	// A descriptor writing the file a rename replaces writes to a file
	// with no name: its close stores nothing over the new one.
	w, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("stale"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("g"), []byte("the new f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("g"), m.path("f")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := s.ok("cat", "/f"); got != "the new f" {
		t.Fatalf("after the replaced file's descriptor closed: %q", got)
	}
}

// TestMountKilled: a mount killed in the middle of a write leaves nothing
// of it on the server, and its mount point answers ENOTCONN at once
// rather than hanging.
func TestMountKilled(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil)
	f, err := os.Create(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 24 { // past the head: an upload is under way
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	m.cmd.Process.Kill()
	m.cmd.Wait()
	f.Close()
	done := make(chan error, 1)
	go func() { _, err := os.Stat(m.path("big")); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("stat in a dead mount: %v, want ENOTCONN", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stat in a dead mount hangs")
	}
	if out, _, code := s.run("stat", "/big"); code == 0 {
		t.Fatalf("half a file is visible: %s", out)
	}
	// Its reservation is given back once the lease ends; nothing of it
	// is left in the namespace.
	if out := s.ok("ls", "/"); strings.TrimSpace(out) != "" {
		t.Fatalf("namespace holds %q", out)
	}
}

// TestMountPrograms: what users run, through the mount: cp -a and rsync
// -a of a tree of 2,000 files in 40 directories, tar x of a tarball of
// 750 of them, git clone and git status, sqlite3 (random writes), fio
// sequential and random.
func TestMountPrograms(t *testing.T) {
	s := newServer(t, "")
	m := s.mount(nil)
	src := filepath.Join(t.TempDir(), "tree")
	for i := range 2000 {
		d := filepath.Join(src, fmt.Sprintf("d%02d", i%40))
		os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d", i)), bytes.Repeat([]byte{byte(i)}, i*8%5000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("d00/f0000", filepath.Join(src, "link"))
	m.mustSh("cp -a " + src + " cp && diff -r " + src + " cp")
	m.mustSh("rsync -a " + src + "/ rs/ && diff -r " + src + " rs && rsync -a --delete " + src + "/ rs/")
	if out := m.mustSh("find cp -type f | wc -l && du -s cp | cut -f1"); !strings.HasPrefix(out, "2000\n") {
		t.Fatalf("find: %q", out)
	}
	// The tarball: 15 of the directories (750 files) and the link.
	tarball := filepath.Join(t.TempDir(), "t.tar")
	part := filepath.Join(t.TempDir(), "part")
	if out, err := exec.Command("sh", "-c", "mkdir "+part+" && cd "+src+" && cp -a link d0? d1[0-4] "+part+" && tar -C "+part+" -cf "+tarball+" .").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	m.mustSh("mkdir tx && tar -C tx -xf " + tarball + " && diff -r " + part + " tx")
	repo := filepath.Join(t.TempDir(), "repo")
	for _, c := range []string{"init -q " + repo, "-C " + repo + " -c user.name=t -c user.email=t@x commit -q --allow-empty -m one"} {
		if out, err := exec.Command("sh", "-c", "git "+c).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v %s", c, err, out)
		}
	}
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	exec.Command("sh", "-c", "cd "+repo+" && git add a.txt && git -c user.name=t -c user.email=t@x commit -q -m two").Run()
	if out := m.mustSh("git clone -q " + repo + " clone && cd clone && git status --porcelain && git log --oneline | wc -l"); strings.TrimSpace(out) != "2" {
		t.Fatalf("git: %q", out)
	}
	if out := m.mustSh("sqlite3 db.sqlite 'create table t(a); insert into t select value from generate_series(1,5000); update t set a = a*2 where a % 3 = 0; select count(*), sum(a) from t;'"); strings.TrimSpace(out) != "5000|16668333" {
		t.Fatalf("sqlite3: %q", out)
	}
	m.mustSh("fio --name=seq --filename=fio.seq --rw=write --bs=1M --size=16M --output=/dev/null && fio --name=seqr --filename=fio.seq --rw=read --bs=1M --size=16M --output=/dev/null")
	m.mustSh("fio --name=rand --filename=fio.rand --rw=randrw --bs=4k --size=4M --output=/dev/null --verify=crc32c")
}

// tapeLibrary is a library of small cartridges (a few megabytes each), so
// that a couple of hundred small files span several; it runs 500 times
// faster than real drives, and its recalls wait half a minute (of its
// time) for company. One migration stream writes the files in order, as
// a tree archived together lies on tape. Drives keep a cartridge for a
// minute after its last recall (recall_linger): with "0s", the storm
// below took 37 mounts of 6 cartridges; with it, 6.
const tapeLibrary = "[library]\ntime_scale = \"x500\"\ndrives = 2\ncartridges = 12\ncapacity = \"12MiB\"\n[hsm]\naggregate = \"1MiB\"\nrecall_min_files = 1000\nrecall_max_age = \"30s\"\nrecall_linger = \"60s\"\nmigrate_drives = 1\n"

// drives sums the tape drives' mounts.
func (s *server) driveMounts() int64 {
	var ds []struct {
		Mounts int64 `json:"mounts"`
	}
	if err := json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &ds); err != nil {
		s.t.Fatal(err)
	}
	var n int64
	for _, d := range ds {
		n += d.Mounts
	}
	return n
}

// TestMountRecall: opening a file that is on tape only waits for its
// recall and then reads it; O_NONBLOCK gets EAGAIN at once (and queues the
// recall); --recall-timeout gets ETIMEDOUT. A storm of opens — 200
// tape-only files from 10 threads, each reading its own run of names
// (grep -r over a tree, in parallel) — is served a cartridge at a time:
// the drives mount each cartridge about once, not once per file.
func TestMountRecall(t *testing.T) {
	s := newServer(t, tapeLibrary)
	m := s.mount(nil)
	const n, threads = 200, 10
	data := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 'x'}, 100_000+i) }
	m.mustSh("mkdir tree")
	paths := make([]string, n)
	for i := range n {
		paths[i] = fmt.Sprintf("/tree/f%03d", i)
		if err := os.WriteFile(m.path(paths[i]), data(i), 0o644); err != nil {
			t.Fatalf("%v\n%s", err, m.log)
		}
	}
	s.ok("migrate")
	s.ok(append([]string{"purge"}, paths...)...)
	var carts []struct {
		TapeFiles int `json:"tape_files"`
	}
	json.Unmarshal([]byte(s.ok("admin", "tapes", "--json")), &carts)
	used := 0
	for _, c := range carts {
		if c.TapeFiles > 0 {
			used++
		}
	}
	if used < 3 {
		t.Fatalf("the files are on %d cartridges; the test needs several", used)
	}

	// O_NONBLOCK: EAGAIN at once.
	if _, err := os.OpenFile(m.path(paths[0]), os.O_RDONLY|syscall.O_NONBLOCK, 0); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("O_NONBLOCK open of a file on tape: %v, want EAGAIN", err)
	}
	// A recall timeout shorter than any recall: ETIMEDOUT.
	impatient := s.mount(nil, "--recall-timeout", "1ms")
	if _, err := os.ReadFile(impatient.path(paths[n-1])); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("open with a 1 ms recall timeout: %v, want ETIMEDOUT", err)
	}

	before := s.driveMounts()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * n / threads; i < (k+1)*n/threads; i++ {
				b, err := os.ReadFile(m.path(paths[i]))
				if err != nil || !bytes.Equal(b, data(i)) {
					errs <- fmt.Errorf("%s: %d bytes, %v", paths[i], len(b), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mounts := s.driveMounts() - before
	t.Logf("200 opens of tape-only files on %d cartridges: %d mounts", used, mounts)
	if mounts > int64(2*used) {
		for _, l := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(l, "mounting for recalls") {
				t.Log(l)
			}
		}
		t.Fatalf("%d mounts for %d cartridges: the recalls were not batched by cartridge", mounts, used)
	}
}

// TestMountXattrs: user.* attributes are stored with the file (and kept
// when cp -a copies them onto a file not yet stored); user.strata.* show
// residency, class, copies and fixity, and setting user.strata.cos and
// user.strata.stage changes the class and asks for a recall.
func TestMountXattrs(t *testing.T) {
	s := newServer(t, tapeLibrary)
	m := s.mount(nil)
	m.mustSh("echo data > f && setfattr -n user.color -v blue f && setfattr -n user.bin -v 0x00ff f")
	if out := m.mustSh("getfattr --only-values -n user.color f"); out != "blue" {
		t.Fatalf("user.color = %q", out)
	}
	out := m.mustSh("getfattr -d -m - f")
	for _, want := range []string{`user.color="blue"`, `user.bin=0s`, `user.strata.residency="disk"`, `user.strata.cos="default"`, `user.strata.copies="1"`, `user.strata.fixity="blake3:`} {
		if !strings.Contains(out, want) {
			t.Errorf("getfattr -d lacks %s:\n%s", want, out)
		}
	}
	if _, err := m.sh(nil, "setfattr -n user.color -v red --raw f 2>&1; setfattr -x user.nothing f"); err == nil {
		t.Error("removing a missing attribute succeeded")
	}
	if out, err := m.sh(nil, "getfattr -n user.nothing f"); err == nil || !strings.Contains(out, "No such attribute") {
		t.Errorf("getfattr of a missing attribute: %v %s", err, out)
	}
	if out, err := m.sh(nil, "setfattr -n user.strata.copies -v 9 f"); err == nil {
		t.Errorf("a computed attribute was set: %s", out)
	}
	if out, err := m.sh(nil, "setfattr -n trusted.x -v 1 f"); err == nil {
		t.Errorf("a trusted.* attribute was set: %s", out)
	}
	m.mustSh("setfattr -x user.bin f")
	if out := m.mustSh("getfattr -d f"); strings.Contains(out, "user.bin") {
		t.Fatalf("removed attribute still there:\n%s", out)
	}
	// cp -a sets attributes on the new file before it is stored.
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("x"), 0o644)
	if err := exec.Command("setfattr", "-n", "user.origin", "-v", "lab", src).Run(); err == nil {
		m.mustSh("cp -a " + src + " copied")
		if out := m.mustSh("getfattr --only-values -n user.origin copied"); out != "lab" {
			t.Fatalf("cp -a kept user.origin = %q", out)
		}
	}
	// Class of service, tape copies, residency, recall by attribute.
	m.mustSh("setfattr -n user.strata.cos -v dual f")
	s.ok("migrate", "/f")
	s.ok("purge", "/f")
	out = m.mustSh("getfattr --only-values -n user.strata.cos f; echo; getfattr --only-values -n user.strata.residency f; echo; getfattr --only-values -n user.strata.copies f")
	if out != "dual\ntape\n2" {
		t.Fatalf("after migrate and purge: %q", out)
	}
	m.mustSh("setfattr -n user.strata.stage -v 1 f")
	deadline := time.Now().Add(30 * time.Second)
	for m.mustSh("getfattr --only-values -n user.strata.residency f") != "disk+tape" {
		if time.Now().After(deadline) {
			t.Fatal("user.strata.stage did not recall the file")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := m.mustSh("cat f"); got != "data\n" {
		t.Fatalf("recalled %q", got)
	}
}

// mountUser is a user of this host to mount as (fusermount3 wants a name
// for the uid): scripts/test.sh makes strata-mount-a and -b, 2101 and
// 2102.
func mountUser(t *testing.T, uid uint32) *syscall.Credential {
	t.Helper()
	u, err := user.LookupId(fmt.Sprint(uid))
	if err != nil {
		mountUnavailable(t, "no user %d to mount as (scripts/test.sh creates it): %v", uid, err)
	}
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uid, Gid: uint32(gid)}
}

// TestMountPermissions: two users, each with a mount of their own, in a
// shared sticky directory: the server's rules hold through the mount —
// a private file cannot be read or written by the other, the sticky bit
// keeps each from removing or renaming the other's files, and new files
// belong to whoever wrote them.
func TestMountPermissions(t *testing.T) {
	s := newServer(t, "")
	s.ok("mkdir", "/shared")
	s.ok("chmod", "1777", "/shared")
	reachable(t, s)
	ca, cb := mountUser(t, 2101), mountUser(t, 2102)
	ma, mb := s.mount(ca), s.mount(cb)
	as := func(m *mounted, who *syscall.Credential, script string) (string, error) { return m.sh(who, script) }
	if out, err := as(ma, ca, "echo secret > shared/a && chmod 600 shared/a && echo pub > shared/p && ls -ln shared"); err != nil {
		t.Fatalf("alice: %v %s\n%s", err, out, ma.log)
	}
	for _, c := range []struct {
		script string
		ok     bool
	}{
		{"cat shared/p", true},
		{"cat shared/a", false},
		{"echo x > shared/a", false},
		{"echo x >> shared/p", false},
		{"rm shared/p", false},
		{"mv shared/p shared/q", false},
		{"chmod 666 shared/p", false},
		{"mkdir shared/bob && echo b > shared/bob/f && stat -c %u shared/bob/f", true},
	} {
		out, err := as(mb, cb, c.script)
		if (err == nil) != c.ok {
			t.Errorf("bob: %s: %v %s", c.script, err, out)
		}
		if !c.ok && err != nil && !strings.Contains(out, "ermission denied") && !strings.Contains(out, "not permitted") {
			t.Errorf("bob: %s: %q, want a permission error", c.script, out)
		}
	}
	if got := s.ok("cat", "/shared/bob/f"); got != "b\n" {
		t.Fatalf("bob's file: %q", got)
	}
	if out := s.ok("ls", "-l", "/shared"); !strings.Contains(out, "2101") || !strings.Contains(out, "2102") {
		t.Fatalf("owners: %s", out)
	}
	// A file others may write is written into, not replaced: bob edits
	// alice's 0666 file in the sticky directory (which would refuse him a
	// replacement of her entry), and it stays hers, with its mode; he may
	// touch it, but not set its times or mode (EPERM, not EACCES).
	if out, err := as(ma, ca, "echo one > shared/w && chmod 666 shared/w"); err != nil {
		t.Fatalf("alice: %v %s", err, out)
	}
	if out, err := as(mb, cb, "echo two >> shared/w && dd if=/dev/zero of=shared/w bs=1 count=1 seek=1 conv=notrunc status=none && touch shared/w"); err != nil {
		t.Fatalf("bob writing alice's 0666 file: %v %s\n%s", err, out, mb.log)
	}
	if out := s.ok("stat", "--json", "/shared/w"); !strings.Contains(out, `"uid": 2101`) || !strings.Contains(out, `"mode": 438`) || !strings.Contains(out, `"size": 8`) {
		t.Fatalf("alice's file after bob's writes: %s", out)
	}
	for _, script := range []string{"chmod 644 shared/w", "touch -d 2001-01-01 shared/w"} {
		if out, err := as(mb, cb, script); err == nil || !strings.Contains(out, "not permitted") {
			t.Errorf("bob: %s: %v %s, want EPERM", script, err, out)
		}
	}
	// FUSE lets only the mounting user in, not even root.
	if _, err := os.ReadFile(ma.path("shared/p")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("root in alice's mount: %v, want EACCES", err)
	}
}

// TestMountFailedStore: a store the server refuses (here a quota) fails
// close(2) with the errno that says why, and leaves the old version (for
// a new file, what an earlier close stored, or nothing).
func TestMountFailedStore(t *testing.T) {
	s := newServer(t, "")
	reachable(t, s)
	s.ok("mkdir", "/q")
	s.ok("chown", "2101", "/q")
	cred := mountUser(t, 2101)
	m := s.mount(cred)
	if out, err := m.sh(cred, "head -c 300000 /dev/zero > q/old"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	s.ok("quota", "set", "--user", "2101", "--bytes", "1MiB")
	for _, script := range []string{
		// dd reports what close(2) returns (head and a shell's > do not).
		"dd if=/dev/zero of=q/new bs=64k count=30 status=none",              // one put at close
		"dd if=/dev/zero of=q/big bs=1M count=12 status=none",               // streamed: the reservation is refused
		"dd if=/dev/zero of=q/old bs=64k count=30 conv=notrunc status=none", // written back over the old
	} {
		out, err := m.sh(cred, script)
		if err == nil || !strings.Contains(out, "quota exceeded") {
			t.Errorf("%s: %v %q, want a failure naming the quota", script, err, out)
		}
	}
	// dd closed its first descriptor of q/new before writing (open,
	// dup2, close): that close stored the file empty, as creat(2) had
	// made it; the refused data never shows.
	if out, _, code := s.run("stat", "--json", "/q/new"); code == 0 && !strings.Contains(out, `"size": 0`) {
		t.Errorf("refused data is visible: %s", out)
	}
	if out, _, code := s.run("stat", "--json", "/q/big"); code == 0 && !strings.Contains(out, `"size": 0`) {
		t.Errorf("refused streamed data is visible: %s", out)
	}
	if fi := s.ok("stat", "--json", "/q/old"); !strings.Contains(fi, `"size": 300000`) {
		t.Errorf("the old version did not stay: %s", fi)
	}
	if out := m.log.String(); !strings.Contains(out, "quota") {
		t.Errorf("the mount did not say why: %s", out)
	}
}

// TestMountGateway: an administrator's mount with --allow-other serves
// every local user as themselves — owners are the writers, a private file
// stays private — and squashes root to nobody. A user who is not an
// administrator can neither start such a mount nor ask the server to act
// for someone else.
func TestMountGateway(t *testing.T) {
	s := newServer(t, "")
	reachable(t, s)
	s.ok("mkdir", "/shared")
	s.ok("chmod", "1777", "/shared")
	a, b := mountUser(t, 2101), mountUser(t, 2102)
	m := s.mount(nil, "--allow-other")
	if out, err := m.sh(a, "echo secret > shared/a && chmod 600 shared/a && stat -c %u shared/a"); err != nil || strings.TrimSpace(out) != "2101" {
		t.Fatalf("alice through the gateway: %v %q\n%s", err, out, m.log)
	}
	if out := s.ok("stat", "--json", "/shared/a"); !strings.Contains(out, `"uid": 2101`) {
		t.Fatalf("the server's owner: %s", out)
	}
	if out, err := m.sh(b, "cat shared/a"); err == nil || !strings.Contains(out, "ermission denied") {
		t.Fatalf("bob read alice's private file through the gateway: %v %q", err, out)
	}
	// Root is nobody here: no reading the private file, no writing in /.
	if _, err := os.ReadFile(m.path("shared/a")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("root through a squashing gateway: %v", err)
	}
	if err := os.WriteFile(m.path("rootfile"), nil, 0o644); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("root created in / through a squashing gateway: %v", err)
	}
	// Not an administrator: refused, by the CLI and by the server.
	dir := filepath.Join(t.TempDir(), "m2")
	os.Mkdir(dir, 0o755)
	os.Chown(dir, 2101, 2101)
	if _, errs, code := s.runAs(a, nil, "mount", "--allow-other", dir); code == 0 || !strings.Contains(errs, "administrator") {
		t.Fatalf("a user's --allow-other mount: exit %d %q", code, errs)
	}
	sock := filepath.Join(s.dir, "data", "strata.sock")
	cmd := exec.Command("curl", "-s", "--unix-socket", sock, "-H", "Strata-On-Behalf-Of: 0:0", "http://strata/v1/whoami")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "only an administrator may act for another user") {
		t.Fatalf("a user asking to act as root: %s", out)
	}
}
