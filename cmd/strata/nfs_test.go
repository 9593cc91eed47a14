package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
)

// The kernel here has no NFS client, so these tests speak NFSv3 with
// go-nfs-client, a client library, to a real `strata nfs` process on
// 127.0.0.1 (MOUNT and NFS on its one port).

type nfsExport struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *cmdtest.Buffer
	port int
}

var nfsServing = regexp.MustCompile(`serving on 127\.0\.0\.1:([0-9]+)`)

// nfs starts `strata nfs` against s (as cred's user; nil: as this
// process, an administrator) and returns once it serves; it stops at
// cleanup.
func (s *server) nfs(cred *syscall.Credential, args ...string) *nfsExport {
	s.t.Helper()
	x := &nfsExport{t: s.t, log: &cmdtest.Buffer{}}
	args = append([]string{"nfs", "--listen", "127.0.0.1:0", "--write-idle", "300ms"}, args...)
	if cred == nil {
		args = append(args, "--admin")
	}
	x.cmd = exec.Command(bin, args...)
	x.cmd.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
	x.cmd.Stderr = x.log
	if cred != nil {
		x.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		x.cmd.Dir = "/"
	}
	out, err := x.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := x.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(x.stop)
	line, _ := bufio.NewReader(out).ReadString('\n')
	go io.Copy(x.log, out)
	m := nfsServing.FindStringSubmatch(line)
	if m == nil {
		x.cmd.Wait()
		s.t.Fatalf("strata nfs did not start: %q\n%s", line, x.log)
	}
	x.port, _ = strconv.Atoi(m[1])
	return x
}

// stop interrupts the export as Ctrl-C does: it stores what is pending
// and exits 0.
func (x *nfsExport) stop() {
	if x.cmd.ProcessState != nil {
		return
	}
	x.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- x.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			x.t.Errorf("strata nfs exited with %v\n%s", err, x.log)
		}
	case <-time.After(30 * time.Second):
		x.cmd.Process.Kill()
		<-done
		x.t.Errorf("strata nfs did not stop on SIGINT\n%s", x.log)
	}
}

// mount mounts the export's root as an NFS client would (as root: from
// a privileged port).
func (x *nfsExport) mount() *nfsc.Target {
	x.t.Helper()
	v, err := x.tryMount(true)
	if err != nil {
		x.t.Fatalf("mount: %v\n%s", err, x.log)
	}
	return v
}

func (x *nfsExport) tryMount(privileged bool) (*nfsc.Target, error) {
	c, err := rpc.DialTCP("tcp", fmt.Sprintf("127.0.0.1:%d", x.port), privileged)
	if err != nil {
		return nil, err
	}
	v, err := (&nfsc.Mount{Client: c}).Mount("/", rpc.AuthNull)
	if err != nil {
		c.Close()
		return nil, err
	}
	x.t.Cleanup(c.Close)
	return v, nil
}

// refuses reports whether the export closes a connection from a
// privileged (or an unprivileged) port of 127.0.0.1 without waiting for a
// call. (go-nfs-client panics when a server it talks to keeps closing
// its connection, so this asks at the TCP level.)
func (x *nfsExport) refuses(privileged bool) bool {
	x.t.Helper()
	d := net.Dialer{}
	var c net.Conn
	var err error
	for port := 1023; ; port-- {
		if privileged {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
		}
		c, err = d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", x.port))
		if err == nil || !privileged || !errors.Is(err, syscall.EADDRINUSE) || port < 600 {
			break
		}
	}
	if err != nil {
		x.t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// logged waits a little for what to appear in the export's log.
func (x *nfsExport) logged(what string) bool {
	for range 100 {
		if strings.Contains(x.log.String(), what) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func nfsWrite(t *testing.T, v *nfsc.Target, p string, data []byte, mode os.FileMode) {
	t.Helper()
	f, err := v.OpenFile(p, mode)
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", p, err)
	}
}

func nfsRead(v *nfsc.Target, p string) ([]byte, error) {
	f, err := v.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// stored waits until the server has p with size n (the export stores a
// file once its writes pause).
func (s *server) stored(p string, n int) map[string]any {
	s.t.Helper()
	for range 400 {
		out, _, code := s.run("stat", "--json", p)
		var fi map[string]any
		if code == 0 && json.Unmarshal([]byte(out), &fi) == nil && fi["size"] == float64(n) {
			return fi
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("%s was not stored with %d bytes: %s", p, n, s.ok("ls", "-l", "/"))
	return nil
}

// TestNFSRoundTrip: files written over NFS, sizes 0 … many stripes, read
// back over NFS and with strata get byte for byte; names, directories,
// renames and removes as a client sees them.
func TestNFSRoundTrip(t *testing.T) {
	s := newServer(t, "")
	x := s.nfs(nil)
	v := x.mount()
	sizes := []int{0, 1, 4095, 1<<20 + 3, 9<<20 + 1, 37<<20 + 5}
	for _, n := range sizes {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7 + n)
		}
		name := fmt.Sprintf("/f%d", n)
		nfsWrite(t, v, name, data, 0o640)
		got, err := nfsRead(v, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes over NFS: %d bytes, %v\n%s", n, len(got), err, x.log)
		}
		fi := s.stored(name, n)
		if fi["mode"] != float64(0o640) {
			t.Fatalf("%s: mode %v, want 0640", name, fi["mode"])
		}
		out := s.dir + name
		s.ok("get", "-f", "--verify", name, out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes differ through strata get", n)
		}
	}

	// The namespace as the client sees it.
	if _, err := v.Mkdir("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	nfsWrite(t, v, "/d/a", []byte("alpha"), 0o644)
	if err := v.Rename("/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	s.stored("/d/b", 5)
	ents, err := v.ReadDirPlus("/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != "." && e.Name() != ".." {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[b]" {
		t.Fatalf("listing after rename: %v", names)
	}
	if got := s.ok("cat", "/d/b"); got != "alpha" {
		t.Fatalf("renamed file: %q", got)
	}
	if _, err := v.Open("/nope"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of a missing file: %v, want NOENT", err)
	}
	if err := v.RmDir("/d"); err == nil {
		t.Fatal("rmdir of a directory with a file in it succeeded")
	}
	if err := v.Remove("/d/b"); err != nil {
		t.Fatal(err)
	}
	if err := v.RmDir("/d"); err != nil {
		t.Fatal(err)
	}
	if _, _, code := s.run("stat", "/d"); code == 0 {
		t.Fatal("/d outlived its rmdir over NFS")
	}
	// A rewrite in place (a client writing into the middle of a file).
	f, err := v.OpenFile("/f4095", 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.Seek(100, io.SeekStart)
	f.Write([]byte("MIDDLE"))
	f.Close()
	for range 400 {
		if b := s.ok("cat", "/f4095"); len(b) == 4095 && b[100:106] == "MIDDLE" {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if b := s.ok("cat", "/f4095"); len(b) != 4095 || b[100:106] != "MIDDLE" {
		t.Fatalf("rewrite in place not stored: %d bytes", len(b))
	}
}

// TestNFSSeesChanges: what other clients store is what NFS reads next,
// never the version an earlier read had open.
func TestNFSSeesChanges(t *testing.T) {
	s := newServer(t, "")
	x := s.nfs(nil)
	v := x.mount()
	src := s.dir + "/src"
	for i, body := range []string{"first version", "second, longer version", "third"} {
		os.WriteFile(src, []byte(body), 0o644)
		args := []string{"put", src, "/g"}
		if i > 0 {
			args = []string{"put", "-f", src, "/g"}
		}
		s.ok(args...)
		got, err := nfsRead(v, "/g")
		if err != nil || string(got) != body {
			t.Fatalf("version %d over NFS: %q %v", i, got, err)
		}
	}
}

// TestNFSAccess: the export acts as the user who runs it (all_squash),
// with the server's permission checks; a read-only export refuses
// changes; an address outside --allow cannot mount.
func TestNFSAccess(t *testing.T) {
	s := newServer(t, "")
	secret := s.dir + "/secret"
	os.WriteFile(secret, []byte("root only"), 0o600)
	s.ok("put", "--mode", "0600", secret, "/secret")
	s.ok("mkdir", "/pub")
	s.ok("chmod", "0777", "/pub")

	reachable(t, s)
	a := mountUser(t, 2101)
	x := s.nfs(a)
	v := x.mount()
	if _, err := nfsRead(v, "/secret"); err == nil {
		t.Fatal("a user's export read root's 0600 file")
	}
	nfsWrite(t, v, "/pub/mine", []byte("of user a"), 0o644)
	if fi := s.stored("/pub/mine", 9); fi["uid"] != float64(2101) {
		t.Fatalf("file made over NFS owned by uid %v, want the export's 2101", fi["uid"])
	}

	ro := s.nfs(nil, "--read-only").mount()
	if got, err := nfsRead(ro, "/secret"); err != nil || string(got) != "root only" {
		t.Fatalf("read through a read-only export: %q %v", got, err)
	}
	if _, err := ro.Create("/new", 0o644); err == nil {
		t.Fatal("a read-only export created a file")
	}
	if err := ro.Remove("/secret"); err == nil {
		t.Fatal("a read-only export removed a file")
	}

	far := s.nfs(nil, "--allow", "10.99.0.0/16")
	if !far.refuses(true) {
		t.Fatal("a client outside --allow was not refused")
	}
	if !far.logged("address not allowed") {
		t.Fatalf("no refusal logged:\n%s", far.log)
	}
	// Only root on a client host binds privileged ports: others are
	// refused unless --insecure.
	if !x.refuses(false) {
		t.Fatal("a client on an unprivileged port was not refused")
	}
	if !x.logged("unprivileged source port") {
		t.Fatalf("no refusal logged:\n%s", x.log)
	}
	if _, err := s.nfs(a, "--insecure").tryMount(false); err != nil {
		t.Fatalf("--insecure: %v", err)
	}
	// An administrator's export would make every client one.
	if _, stderr, code := s.run("nfs", "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(stderr, "--admin") {
		t.Fatalf("an administrator's export without --admin: exit %d %s", code, stderr)
	}
}

// TestNFSRecall: a READ of a file on tape only waits for its recall and
// returns its bytes.
func TestNFSRecall(t *testing.T) {
	s := newServer(t, tapeLibrary)
	data := bytes.Repeat([]byte("tape"), 300_000)
	src := s.dir + "/t"
	os.WriteFile(src, data, 0o644)
	s.ok("put", src, "/t")
	s.ok("migrate")
	s.ok("purge", "/t")
	if out := s.ok("stat", "/t"); !strings.Contains(out, "tape") {
		t.Fatalf("not on tape only: %s", out)
	}
	v := s.nfs(nil).mount()
	got, err := nfsRead(v, "/t")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read of a file on tape over NFS: %d bytes, %v", len(got), err)
	}
}
