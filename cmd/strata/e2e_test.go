package main_test

// End-to-end tests of the real binary: `strata serve` runs as a child
// process on ephemeral 127.0.0.1 ports, and every command is the binary run
// as a user would run it.

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-e2e")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "strata")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a free port below the kernel's ephemeral range
// (32768 and up here): a server restarted on it after a crash must find it
// still free, and an outgoing connection of some other test, which takes
// its local port from that range, can never have taken it meanwhile. A
// port is handed out once per test binary: one picked at random and
// closed at once is still free for the next call, which picked it again
// often enough to give a server's control API its mover's port.
func freePort(t *testing.T) string {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 20000 + mrand.IntN(12000)
		if portsGiven[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		defer ln.Close()
		portsGiven[port] = true
		return ln.Addr().String()
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

type server struct {
	t    *testing.T
	dir  string
	cfg  string
	addr string
	cmd  *exec.Cmd
	log  *cmdtest.Buffer
	// token is root's bearer token, made the first time a command goes
	// over TCP (--tcp-only): on the socket the kernel says who we are.
	token string
}

// newServer writes a config and starts `strata serve`. extra is appended to
// the config (device and class-of-service tables).
func newServer(t *testing.T, extra string) *server {
	dir := t.TempDir()
	s := &server{t: t, dir: dir, addr: freePort(t), cfg: filepath.Join(dir, "strata.toml")}
	// Lines of extra before its first table are top-level keys.
	top := ""
	if i := strings.Index("\n"+extra, "\n["); i > 0 {
		top, extra = extra[:i], extra[i:]
	} else if i < 0 {
		top, extra = extra, ""
	}
	conf := fmt.Sprintf("listen = %q\ndata_dir = %q\nreclaim_every = \"100ms\"\n%s\n[mover]\nlisten = %q\n%s", s.addr, filepath.Join(dir, "data"), top, freePort(t), extra)
	if err := os.WriteFile(s.cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.log = &cmdtest.Buffer{}
	s.cmd = exec.Command(bin, "serve", "--config", s.cfg)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	// Serving, not only listening: a request answered (over TLS, when
	// the server speaks it, not yet caring whose certificate it is).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for i := 0; i < 200; i++ {
		if resp, err := hc.Get(s.scheme() + "://" + s.addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("server did not start:\n%s", s.log)
}

// logged reports whether the server's output says sub within a few
// seconds: serve writes its lines after it starts answering, so a test
// that reads them right after start may come first.
func (s *server) logged(sub string) bool {
	for range 200 {
		if strings.Contains(s.log.String(), sub) {
			return true
		}
		time.Sleep(25 * time.Millisecond)
	}
	return false
}

// scheme is https when the configuration turns TLS on.
func (s *server) scheme() string {
	if b, _ := os.ReadFile(s.cfg); bytes.Contains(b, []byte(`enabled = "on"`)) {
		return "https"
	}
	return "http"
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
	}
}

func (s *server) kill9() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// run runs the binary against the server and returns stdout, stderr, code.
func (s *server) run(args ...string) (string, string, int) {
	var env []string
	if slices.Contains(args, "--tcp-only") {
		if s.token == "" {
			s.token = strings.TrimSpace(s.ok("token", "create", "--user", "root", "--ttl", "1h"))
		}
		env = append(env, "STRATA_TOKEN="+s.token)
	}
	return s.runAs(nil, env, args...)
}

// runAs runs the binary as another user (cred; nil: as this process) with
// extra environment.
func (s *server) runAs(cred *syscall.Credential, env []string, args ...string) (string, string, int) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(append(os.Environ(), "STRATA_SERVER="+s.addr), env...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = "/"
	}
	return cmdtest.Run(s.t, cmd)
}

func (s *server) ok(args ...string) string {
	s.t.Helper()
	out, errs, code := s.run(args...)
	if code != 0 {
		s.t.Fatalf("strata %s: exit %d: %s\nserver log:\n%s", strings.Join(args, " "), code, errs, s.log.Tail(4000))
	}
	return out
}

func writeRandom(t *testing.T, path string, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTour(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "run42.dat")
	data := writeRandom(t, src, 9<<20+17)
	s.ok("mkdir", "-p", "/proj/cfd")
	s.ok("put", src, "/proj/cfd/")
	ls := s.ok("ls", "-l", "/proj/cfd")
	if !strings.Contains(ls, "run42.dat") || !strings.Contains(ls, fmt.Sprint(len(data))) || !strings.HasPrefix(ls, "-rw-r--r--") {
		t.Fatalf("ls -l:\n%s", ls)
	}
	var st struct {
		Size   int64
		Fixity string
		Layout struct {
			StripeWidth int `json:"stripe_width"`
			Segments    []struct{ Device string }
		}
	}
	if err := json.Unmarshal([]byte(s.ok("stat", "--json", "/proj/cfd/run42.dat")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(data)) || st.Layout.StripeWidth != 3 || len(st.Layout.Segments) != 3 || !strings.HasPrefix(st.Fixity, "blake3:") {
		t.Fatalf("stat --json: %+v", st)
	}
	human := s.ok("stat", "/proj/cfd/run42.dat")
	for _, want := range []string{"Size: 9437201", "COS: default", "crc32c", "Fixity: blake3:"} {
		if !strings.Contains(human, want) {
			t.Errorf("stat output lacks %q:\n%s", want, human)
		}
	}
	out := filepath.Join(s.dir, "out.dat")
	// On the server's host a put passes the source file to the mover and
	// a get reads the device files the mover hands over; --no-handover
	// streams both through its socket, --tcp-only as from another host.
	// The same bytes each way.
	for _, flags := range [][]string{nil, {"--no-handover"}, {"--tcp-only"}} {
		s.ok(append(flags, "put", "-f", src, "/proj/cfd/run42.dat")...)
		for _, flags := range [][]string{nil, {"--no-handover"}, {"--tcp-only"}} {
			s.ok(append(flags, "get", "-f", "--verify", "/proj/cfd/run42.dat", out)...)
			if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
				t.Fatalf("get %v: data differs", flags)
			}
		}
	}
	if cat := s.ok("cat", "/proj/cfd/run42.dat"); cat != string(data) {
		t.Fatal("cat: data differs")
	}
	// To tape and back: migrate, purge, and a get that recalls.
	if out := s.ok("migrate", "/proj/cfd/run42.dat"); !strings.HasPrefix(out, "migrated 1 files") {
		t.Fatalf("migrate: %q", out)
	}
	if ls := s.ok("ls", "-l", "/proj/cfd"); !strings.Contains(ls, " disk+tape run42.dat") {
		t.Fatalf("ls -l after migrate:\n%s", ls)
	}
	s.ok("purge", "/proj/cfd/run42.dat")
	if ls := s.ok("ls", "-l", "/proj/cfd"); !strings.Contains(ls, " tape run42.dat") {
		t.Fatalf("ls -l after purge:\n%s", ls)
	}
	if _, stderr, code := s.run("get", "-f", "--no-wait", "/proj/cfd/run42.dat", out); code == 0 || !strings.Contains(stderr, "recall queued") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("get --no-wait of a file on tape: exit %d, %q", code, stderr)
	}
	s.ok("get", "-f", "/proj/cfd/run42.dat", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("get after recall: data differs")
	}
	for view, want := range map[string]string{"tapes": "T00000", "drives": "drive0", "queue": "VOLUME", "cos": "tape x1", "pools": "disk", "lost": "WHY"} {
		if out := s.ok("admin", view); !strings.Contains(out, want) {
			t.Errorf("admin %s lacks %q:\n%s", view, want, out)
		}
	}
	s.ok("mv", "/proj/cfd/run42.dat", "/proj/run43.dat")
	if ls := s.ok("ls", "/proj"); ls != "cfd/\nrun43.dat\n" {
		t.Fatalf("ls after mv: %q", ls)
	}
	df := s.ok("df")
	for _, want := range []string{"disk0", "disk3", "POOL", "disk"} {
		if !strings.Contains(df, want) {
			t.Fatalf("df lacks %q:\n%s", want, df)
		}
	}
	s.ok("rm", "-r", "/proj")
	if ls := s.ok("ls", "/"); ls != "" {
		t.Fatalf("ls / after rm -r: %q", ls)
	}
}

// migrate, purge and stage act on a tree with -r (and refuse a directory
// without it, with a hint); purge -r leaves what has no tape copy.
func TestTreeHSM(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	os.Mkdir(src, 0o755)
	var locals []string
	for i := range 5 {
		locals = append(locals, filepath.Join(src, fmt.Sprintf("f%d", i)))
		writeRandom(t, locals[i], 1000+i)
	}
	s.ok("mkdir", "-p", "/t/a", "/t/b/c")
	s.ok(append(append([]string{"put"}, locals[:3]...), "/t/a/")...)
	s.ok(append(append([]string{"put"}, locals[3:]...), "/t/b/c/")...)
	for _, cmd := range []string{"migrate", "purge", "stage"} {
		if _, errs, code := s.run(cmd, "/t"); code == 0 || !strings.Contains(errs, "is a directory (-r") {
			t.Fatalf("%s of a directory: exit %d, %q", cmd, code, errs)
		}
	}
	if out := s.ok("migrate", "-r", "/t"); !strings.HasPrefix(out, "migrated 5 files") {
		t.Fatalf("migrate -r: %q", out)
	}
	s.ok("put", locals[0], "/t/b/late") // no tape copy: purge -r leaves it
	if out := s.ok("purge", "-r", "/t"); !strings.HasPrefix(out, "purged 5 files") {
		t.Fatalf("purge -r: %q", out)
	}
	if ls := s.ok("ls", "-l", "/t/b"); !strings.Contains(ls, " disk late") {
		t.Fatalf("ls -l /t/b after purge -r:\n%s", ls)
	}
	var sts []struct{ Path, State string }
	if err := json.Unmarshal([]byte(s.ok("stage", "-r", "--json", "/t")), &sts); err != nil || len(sts) != 6 {
		t.Fatalf("stage -r --json: %d files, %v", len(sts), err)
	}
	for _, st := range sts {
		if want := "/t/b/late"; (st.Path == want) != (st.State == "resident") {
			t.Fatalf("stage -r: %s is %s", st.Path, st.State)
		}
	}
	out := filepath.Join(s.dir, "back")
	s.ok("get", "/t/b/c/f4", out)
	if got, _ := os.ReadFile(out); len(got) != 1004 {
		t.Fatalf("get after stage -r: %d bytes", len(got))
	}
}

// A put of many files keeps many in flight (small files as one frame each,
// made durable by the catalog's group commit and the movers' group sync):
// every file arrives whole, small and large. Put again, the first file
// found taken stops it, in one line that says how many were stored.
func TestPutMany(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	os.Mkdir(src, 0o755)
	want := map[string][]byte{}
	var locals []string
	for i := range 300 {
		n := 1 + i*211 // 1 byte … 62 KiB
		if i%100 == 7 {
			n = 3<<20 + i // a few large files, striped and handed over
		}
		name := fmt.Sprintf("f%03d", i)
		want[name] = writeRandom(t, filepath.Join(src, name), n)
		locals = append(locals, filepath.Join(src, name))
	}
	s.ok("mkdir", "/in")
	// STRATA_CPUPROFILE: the command writes its CPU profile (gzipped).
	prof := filepath.Join(s.dir, "put.prof")
	if _, errs, code := s.runAs(nil, []string{"STRATA_CPUPROFILE=" + prof}, append(append([]string{"put"}, locals...), "/in/")...); code != 0 {
		t.Fatalf("put: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("STRATA_CPUPROFILE: %d bytes, %v; want a gzipped profile", len(b), err)
	}
	for name, data := range want {
		out := filepath.Join(s.dir, "out-"+name)
		s.ok("get", "/in/"+name, out)
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes back of %d, %v", name, len(got), len(data), err)
		}
	}
	// The creates and commits of the files in flight went in batches,
	// each call answered and audited on its own.
	m := s.scrape()
	for _, route := range []string{"POST /v1/creates", "POST /v1/commits"} {
		if n := sum(m, "strata_api_requests_total", map[string]string{"route": route, "code": "200"}); n < 1 || n >= 300 {
			t.Errorf("%s: %v requests for 300 files", route, n)
		}
	}
	_, errs, code := s.run(append(append([]string{"put", "--parallel", "4"}, locals...), "/in/")...)
	if code == 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "file exists") || !strings.Contains(errs, "of 300 files stored") {
		t.Fatalf("put over existing files: exit %d, stderr %q", code, errs)
	}
	log, err := os.ReadFile(filepath.Join(s.dir, "data", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	created, refused := 0, 0
	for _, line := range strings.Split(string(log), "\n") {
		switch {
		case strings.Contains(line, `"op":"POST /v1/commit"`) && strings.Contains(line, `"/in/f`) && strings.Contains(line, `"status":200`):
			created++
		case strings.Contains(line, `"op":"POST /v1/c`) && strings.Contains(line, `"/in/f`) && strings.Contains(line, "file exists"):
			refused++
		}
	}
	if created != 300 || refused == 0 {
		t.Errorf("audit log: %d commits of /in/f*, %d refused, want 300 and some", created, refused)
	}
}

func TestErrorsAreOneLine(t *testing.T) {
	s := newServer(t, "")
	local := filepath.Join(s.dir, "f")
	writeRandom(t, local, 1000)
	s.ok("put", local, "/f")
	s.ok("mkdir", "/d")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"stat", "/nope"}, "no such file"},
		{[]string{"put", filepath.Join(s.dir, "missing"), "/x"}, "no such file"},
		{[]string{"put", local, "/f"}, "file exists"},
		{[]string{"put", local, "/nodir/f"}, "no such file"},
		{[]string{"get", "/nope", filepath.Join(s.dir, "o")}, "no such file"},
		{[]string{"get", "/f", local}, "exists (use -f"},
		{[]string{"ls", "relative"}, "absolute"},
		{[]string{"mkdir", "/d"}, "file exists"},
		{[]string{"rm", "/d"}, "is a directory"},
		{[]string{"mv", "/d", "/d/e"}, "into itself"},
		{[]string{"cat", "/d"}, "is a directory"},
		{[]string{"put", "--bogus", "a", "/b"}, "unknown flag"},
		{[]string{"put", "--stripes", "-1", local, "/g"}, "positive"},
		{[]string{"put", "--cos", "nope", local, "/g"}, "class of service"},
		{[]string{"put", "--fixity", "md5", local, "/g"}, "unknown fixity algorithm"},
		{[]string{"put", local, filepath.Join(s.dir, "missing"), "/d/"}, "no such file"},
		{[]string{"put", "--parallel", "0", local, "/d/"}, "positive"},
		{[]string{"mkdir"}, "usage"},
		{[]string{"chmod", "999", "/f"}, "bad mode"},
		{[]string{"--server", "127.0.0.1:1", "ls", "/"}, "cannot reach"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errs, code := s.run(c.args...)
			if code == 0 {
				t.Fatal("exit 0")
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "strata: ") || !strings.Contains(errs, c.want) {
				t.Fatalf("stderr %q, want one line with %q", errs, c.want)
			}
		})
	}
	// The server survived all of it.
	s.ok("stat", "/f")
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.toml")
	os.WriteFile(cfg, []byte("listen = 7420\n"), 0o644)
	cmd := exec.Command(bin, "serve", "--config", cfg)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.HasPrefix(string(out), "strata: config") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("bad config: %v %q", err, out)
	}
}

// TestServeAddressInUse: a port already taken (control API or mover) ends
// serve with one error line and exit 1 (it used to panic cleaning up), and
// leaves the data directory usable.
func TestServeAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, which := range []string{"control", "mover"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			ctl, mov := freePort(t), freePort(t)
			if which == "control" {
				ctl = taken.Addr().String()
			} else {
				mov = taken.Addr().String()
			}
			cfg := filepath.Join(dir, "s.toml")
			os.WriteFile(cfg, []byte(fmt.Sprintf("listen = %q\ndata_dir = %q\n[mover]\nlisten = %q\n", ctl, filepath.Join(dir, "data"), mov)), 0o644)
			out, err := exec.Command(bin, "serve", "--config", cfg).CombinedOutput()
			// The server's log may precede it; the failure is the last line.
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 1 || !strings.HasPrefix(last, "strata: ") || !strings.Contains(last, "address already in use") || strings.Contains(string(out), "panic") {
				t.Fatalf("serve with the %s port taken: %v\n%s", which, err, out)
			}
			// The lock and sockets were released: the directory serves.
			s := &server{t: t, dir: dir, addr: freePort(t), cfg: cfg}
			os.WriteFile(cfg, []byte(fmt.Sprintf("listen = %q\ndata_dir = %q\n[mover]\nlisten = %q\n", s.addr, filepath.Join(dir, "data"), freePort(t))), 0o644)
			s.start()
			defer s.stop()
			s.ok("ls", "/")
		})
	}
}

// objects counts segment objects on the server's devices.
func (s *server) objects() int {
	m, _ := filepath.Glob(filepath.Join(s.dir, "data", "devices", "*", "objects", "*", "*"))
	return len(m)
}

// objectBytes is the size of every object on the devices.
func (s *server) objectBytes() int64 {
	m, _ := filepath.Glob(filepath.Join(s.dir, "data", "devices", "*", "objects", "*", "*"))
	var n int64
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// dfUsed is what `strata df` says all devices hold.
func (s *server) dfUsed() int64 {
	var df struct {
		Devices []struct{ Used int64 }
	}
	json.Unmarshal([]byte(s.ok("df", "--json")), &df)
	var used int64
	for _, d := range df.Devices {
		used += d.Used
	}
	return used
}

func (s *server) waitObjects(want int) {
	s.t.Helper()
	for i := 0; i < 200; i++ {
		if s.objects() == want {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("%d objects on the devices, want %d", s.objects(), want)
}

// TestCrashDuringPut kills the server with SIGKILL while a put streams
// (devices capped at 8 MB/s so the put takes seconds), restarts it, and
// checks that no partial file is visible and all its space is reclaimed.
// A put killed with its server leaves nothing visible and its space
// reclaimed, on either catalog.
func TestCrashDuringPut(t *testing.T) {
	for _, c := range catalogs {
		t.Run(c.name, func(t *testing.T) { crashDuringPut(t, c.config(t)) })
	}
}

func crashDuringPut(t *testing.T, catalog string) {
	devs := ""
	for i := 0; i < 4; i++ {
		devs += fmt.Sprintf("[[device]]\nid = \"disk%d\"\nbandwidth = \"8MB/s\"\n", i)
	}
	s := newServer(t, devs+catalog)
	keep := filepath.Join(s.dir, "keep")
	writeRandom(t, keep, 300<<10)
	s.ok("put", keep, "/keep")
	before := s.objects()

	big := filepath.Join(s.dir, "big")
	writeRandom(t, big, 64<<20)
	put := exec.Command(bin, "put", big, "/big")
	put.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
	var perr bytes.Buffer
	put.Stderr = &perr
	if err := put.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the put's objects hold data (a few MiB of its 64), then
	// kill -9.
	start := s.objectBytes()
	for i := 0; i < 500 && s.objectBytes() < start+4<<20; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if s.objects() <= before {
		t.Fatal("put never started writing")
	}
	s.kill9()
	if err := put.Wait(); err == nil {
		t.Fatal("put succeeded although the server died")
	}
	if !strings.HasPrefix(perr.String(), "strata: ") {
		t.Fatalf("put's error: %q", perr.String())
	}

	s.start()
	if _, errs, code := s.run("stat", "/big"); code == 0 || !strings.Contains(errs, "no such file") {
		t.Fatalf("partial file visible after crash: %q", errs)
	}
	s.waitObjects(before)
	if used := s.dfUsed(); used != 300<<10 {
		t.Fatalf("df says %d bytes used, want %d", used, 300<<10)
	}
	// The surviving file is intact and the server works.
	out := filepath.Join(s.dir, "keep.out")
	s.ok("get", "--verify", "/keep", out)
	s.ok("put", keep, "/again")
}

// ls pages through a directory bigger than the server's page: every
// entry once, in order, in every output form.
func TestLsPages(t *testing.T) {
	s := newServer(t, "list_page = 2\n")
	s.ok("mkdir", "/d")
	empty := filepath.Join(s.dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	var want []string
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("f%d", i)
		s.ok("put", empty, "/d/"+name)
		want = append(want, name)
	}
	if got := s.ok("ls", "/d"); got != strings.Join(want, "\n")+"\n" {
		t.Fatalf("ls:\n%s", got)
	}
	long := strings.Split(strings.TrimSpace(s.ok("ls", "-l", "/d")), "\n")
	if len(long) != 7 || !strings.HasSuffix(long[6], " f6") {
		t.Fatalf("ls -l:\n%s", strings.Join(long, "\n"))
	}
	var ents []struct{ Path string }
	if err := json.Unmarshal([]byte(s.ok("ls", "--json", "/d", "/")), &ents); err != nil || len(ents) != 8 || ents[0].Path != "/d/f0" || ents[7].Path != "/d" {
		t.Fatalf("ls --json: %+v %v", ents, err)
	}
}

// tapeFiles counts complete and partial tape files on the emulated
// cartridges.
func (s *server) tapeFiles() (complete, partial int) {
	m, _ := filepath.Glob(filepath.Join(s.dir, "data", "tapes", "*", "*"))
	for _, p := range m {
		switch {
		case strings.HasSuffix(p, ".partial"):
			partial++
		case !strings.HasSuffix(p, "VOL1"):
			complete++
		}
	}
	return
}

// A slow library (LTO-9 at 20× real time: a mount takes 1.3 s, a flush
// 0.1 s) and one tape file per file, so a kill lands in the middle.
const slowLibrary = "[library]\ntime_scale = \"x20\"\ndrives = 2\ncartridges = 4\n[hsm]\naggregate = \"1MiB\"\nrecall_min_files = 1\n"

func (s *server) putFiles(n int) map[string][]byte {
	files := map[string][]byte{}
	for i := 0; i < n; i++ {
		local := filepath.Join(s.dir, fmt.Sprintf("f%d", i))
		files[fmt.Sprintf("/f%d", i)] = writeRandom(s.t, local, 2<<20+i)
		s.ok("put", local, fmt.Sprintf("/f%d", i))
	}
	return files
}

func (s *server) checkFiles(files map[string][]byte) {
	for p, data := range files {
		out := filepath.Join(s.dir, "check.out")
		s.ok("get", "-f", "--verify", p, out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			s.t.Fatalf("%s differs", p)
		}
	}
}

func (s *server) background(args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	return cmd
}

// kill -9 during a migration: after a restart nothing is lost, no tape
// copy is recorded that is not whole on tape, the half-written tape file
// is gone, and migration completes when asked again.
func TestCrashDuringMigration(t *testing.T) {
	s := newServer(t, slowLibrary)
	files := s.putFiles(12)
	mig := s.background("migrate")
	for i := 0; i < 300; i++ {
		if c, _ := s.tapeFiles(); c >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill9()
	mig.Wait()
	before, _ := s.tapeFiles()
	if before == 0 || before >= 12 {
		t.Fatalf("kill landed outside the migration: %d tape files written", before)
	}
	s.start()
	if _, partial := s.tapeFiles(); partial != 0 {
		t.Fatalf("%d partial tape files after restart", partial)
	}
	s.checkFiles(files)
	if out := s.ok("migrate"); !strings.HasPrefix(out, "migrated ") {
		t.Fatalf("migrate after restart: %q", out)
	}
	ls := s.ok("ls", "-l", "/")
	if strings.Count(ls, "disk+tape") != len(files) {
		t.Fatalf("not every file on tape after the second migration:\n%s", ls)
	}
	// Every recorded copy reads back from tape.
	s.ok("purge")
	for p := range files {
		s.ok("purge", p)
	}
	s.checkFiles(files)
}

// kill -9 with recalls queued and running: after a restart the recalls
// resume by themselves and every file comes back whole.
func TestCrashDuringRecall(t *testing.T) {
	s := newServer(t, slowLibrary)
	files := s.putFiles(6)
	s.ok("migrate")
	for p := range files {
		s.ok("purge", p)
	}
	args := []string{"stage"}
	for p := range files {
		args = append(args, p)
	}
	s.ok(args...)
	// Kill once a recall has begun reading from tape.
	read := func() (n int64) {
		var drives []struct {
			BytesRead int64 `json:"bytes_read"`
		}
		json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &drives)
		for _, d := range drives {
			n += d.BytesRead
		}
		return n
	}
	for i := 0; i < 500 && read() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	s.kill9()
	s.start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ls := s.ok("ls", "-l", "/")
		if strings.Count(ls, "disk+tape") == len(files) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recalls did not resume after restart:\n%s\n%s", ls, s.ok("admin", "queue"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.checkFiles(files)
}

// TestCrashAfterCommit kills the server right after a put returns: the file
// must be there, whole, after restart.
func TestCrashAfterCommit(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "f")
	data := writeRandom(t, src, 5<<20)
	s.ok("put", src, "/f")
	s.kill9()
	s.start()
	out := filepath.Join(s.dir, "f.out")
	s.ok("get", "--verify", "/f", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("data differs after crash")
	}
}

// TestStandaloneMover runs a second mover as its own process with its own
// devices; it registers with the core, and a wide put stripes over the
// devices of both movers, with data flowing to each directly.
func TestStandaloneMover(t *testing.T) {
	s := newServer(t, "")
	mdir := t.TempDir()
	mcfg := filepath.Join(mdir, "mover.toml")
	conf := fmt.Sprintf("secret_file = %q\n[mover]\nid = \"mover1\"\nlisten = %q\ncore = %q\n[[device]]\nid = \"far0\"\npath = %q\n[[device]]\nid = \"far1\"\npath = %q\n",
		filepath.Join(s.dir, "data", "secret"), freePort(t), "http://"+s.addr, filepath.Join(mdir, "far0"), filepath.Join(mdir, "far1"))
	os.WriteFile(mcfg, []byte(conf), 0o644)
	var mlog bytes.Buffer
	metricsAddr := freePort(t)
	mover := exec.Command(bin, "mover", "--config", mcfg, "--metrics", metricsAddr)
	mover.Stdout, mover.Stderr = &mlog, &mlog
	if err := mover.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { mover.Process.Signal(syscall.SIGTERM); mover.Wait() }()
	for i := 0; ; i++ {
		if strings.Contains(s.ok("df"), "far1") {
			break
		}
		if i == 200 {
			t.Fatalf("mover never registered:\n%s", mlog.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
	src := filepath.Join(s.dir, "wide")
	data := writeRandom(t, src, 6*4<<20)
	s.ok("put", "--stripes", "6", src, "/wide")
	var st struct {
		Layout struct{ Segments []struct{ Device string } }
	}
	json.Unmarshal([]byte(s.ok("stat", "--json", "/wide")), &st)
	devs := map[string]bool{}
	for _, seg := range st.Layout.Segments {
		devs[seg.Device] = true
	}
	if len(devs) != 6 || !devs["far0"] || !devs["far1"] {
		t.Fatalf("stripes on %v, want all six devices of both movers", devs)
	}
	out := filepath.Join(s.dir, "wide.out")
	s.ok("get", "--verify", "/wide", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("data differs")
	}
	m, _ := filepath.Glob(filepath.Join(mdir, "far*", "objects", "*", "*"))
	if len(m) != 2 {
		t.Fatalf("%d objects on the standalone mover's devices, want 2", len(m))
	}

	// The mover's own /metrics: registered, and its two devices hold the
	// two stripes it stored (4 MiB each, plus each object's header and
	// chunk checksums).
	got := scrape(t, "http://"+metricsAddr+"/metrics")
	if v := sum(got, "strata_mover_registered", nil); v != 1 {
		t.Fatalf("strata_mover_registered %v, want 1", v)
	}
	used := sum(got, "strata_mover_device_used_bytes", nil)
	if n := len(got["strata_mover_device_used_bytes"].GetMetric()); n != 2 || used < 2*4<<20 || used > 2*4<<20+8192 {
		t.Fatalf("mover devices: %d series, %v bytes used, want 2 and %d (+ object overhead)", n, used, 2*4<<20)
	}
}

func TestMoverWithWrongSecretIsRefused(t *testing.T) {
	s := newServer(t, "")
	mdir := t.TempDir()
	secret := filepath.Join(mdir, "secret")
	os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	mcfg := filepath.Join(mdir, "mover.toml")
	os.WriteFile(mcfg, []byte(fmt.Sprintf("secret_file = %q\n[mover]\nid = \"rogue\"\nlisten = %q\ncore = %q\n[[device]]\nid = \"rogue0\"\npath = %q\n",
		secret, freePort(t), "http://"+s.addr, filepath.Join(mdir, "r0"))), 0o644)
	var mlog bytes.Buffer
	mover := exec.Command(bin, "mover", "--config", mcfg)
	mover.Stdout, mover.Stderr = &mlog, &mlog
	mover.Start()
	defer func() { mover.Process.Signal(syscall.SIGTERM); mover.Wait() }()
	for i := 0; i < 200 && !strings.Contains(mlog.String(), "bad proof"); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if !strings.Contains(mlog.String(), "bad proof") {
		t.Fatalf("mover log: %s", mlog.String())
	}
	if strings.Contains(s.ok("df"), "rogue0") {
		t.Fatal("a mover with the wrong secret registered its device")
	}
}

// TestProgressBar runs put and get on a pseudo-terminal (util-linux
// script(1)): a progress bar is drawn. Without a terminal, nothing is.
func TestProgressBar(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1) from util-linux is needed to give the CLI a terminal")
	}
	s := newServer(t, "")
	src := filepath.Join(s.dir, "big.dat")
	writeRandom(t, src, 12<<20)
	cmdline := fmt.Sprintf("stty cols 120 rows 40; %s put %s /big && %s get -f /big %s", bin, src, bin, filepath.Join(s.dir, "back.dat"))
	cmd := exec.Command(scriptBin, "-qec", cmdline, "/dev/null")
	cmd.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("on a terminal: %v\n%s", err, out)
	}
	for _, want := range []string{"put big.dat", "get big", "12.0 MiB / 12.0 MiB"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if _, errs, code := s.run("put", src, "/quiet"); code != 0 || errs != "" {
		t.Fatalf("without a terminal, put wrote %q to stderr (exit %d)", errs, code)
	}
}

// A class of service edited with the CLI is kept in the catalog: it is
// still there after a restart, over the configuration's.
func TestCOSEditSurvivesRestart(t *testing.T) {
	s := newServer(t, "")
	if out := s.ok("admin", "cos", "set", "default", "--tape-copies", "2", "--stripes", "2"); !strings.Contains(out, "2 stripes") || !strings.Contains(out, "2 tape copies") {
		t.Fatalf("cos set: %q", out)
	}
	s.ok("admin", "cos", "set", "scratch", "--pool", "disk", "--tape-copies", "0")
	s.stop()
	s.start()
	out := s.ok("admin", "cos")
	if !strings.Contains(out, "scratch") || !regexp.MustCompile(`default\s+disk:disk -> tape x2\s+2\s`).MatchString(out) {
		t.Fatalf("classes after restart:\n%s", out)
	}
	if _, stderr, code := s.run("admin", "cos", "set", "bad", "--stripes", "0"); code == 0 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("a bad class: exit %d, %q", code, stderr)
	}
}

// get into a device or a pipe writes to it, as cp does: /dev/null stays
// the device (replacing it, as a regular file would be with -f, breaks the
// machine), and a FIFO's reader gets the bytes.
func TestGetToADevice(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "f")
	data := writeRandom(t, src, 3<<20+1)
	s.ok("put", src, "/f")
	// A null device of the test's own (1, 3 is /dev/null's): a
	// regression replaces it, not the machine's.
	null := filepath.Join(s.dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod (needs root): %v", err)
	}
	for _, args := range [][]string{{"get", "/f", null}, {"get", "-f", "/f", null}} {
		s.ok(args...)
		if st, err := os.Stat(null); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("strata %s: the device is now %v (%v)", strings.Join(args, " "), st.Mode(), err)
		}
	}
	fifo := filepath.Join(s.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	s.ok("get", "/f", fifo)
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("through a FIFO: %d bytes, want %d, or they differ", len(b), len(data))
	}
}
