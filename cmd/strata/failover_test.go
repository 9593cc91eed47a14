package main_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-storage/strata/internal/testutil/cmdtest"
	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// haSite is two cores on one PostgreSQL catalog, one active and one
// standing by, and a standalone mover that registers with whichever is
// active: the fail-over layout of docs/DEPLOYMENT.md on one host. The
// cores share the cluster secret and the emulated library's directory
// (on a real site: tape servers, or the library's state on shared
// storage).
type haSite struct {
	t      *testing.T
	dir    string
	dsn    string
	cores  [2]*server
	mover  *exec.Cmd
	mlog   *cmdtest.Buffer
	server string // STRATA_SERVER: both cores
}

// newHASite starts the site; bandwidth caps each of the mover's two
// devices (so that a transfer can be caught in flight).
func newHASite(t *testing.T, bandwidth string) *haSite {
	dsn := pgtest.DSN(t)
	h := &haSite{t: t, dir: t.TempDir(), dsn: dsn}
	secret := filepath.Join(h.dir, "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := range h.cores {
		dir := filepath.Join(h.dir, fmt.Sprintf("core%d", i))
		os.MkdirAll(dir, 0o700)
		s := &server{t: t, dir: dir, addr: freePort(t), cfg: filepath.Join(dir, "strata.toml")}
		// No devices of its own: the data lives on the movers.
		conf := fmt.Sprintf(`listen = %q
data_dir = %q
secret_file = %q
reclaim_every = "100ms"
device = []
[mover]
id = "core%d"
listen = %q
[catalog]
driver = "postgres"
dsn = %q
standby = true
[library]
path = %q
time_scale = "instant"
drives = 2
cartridges = 4
`, s.addr, filepath.Join(dir, "data"), secret, i, freePort(t), dsn, filepath.Join(h.dir, "tapes"))
		if err := os.WriteFile(s.cfg, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		h.cores[i] = s
		addrs = append(addrs, s.addr)
		t.Cleanup(s.stop)
	}
	h.server = strings.Join(addrs, ",")
	h.cores[0].start()
	h.standby(1)

	mdir := filepath.Join(h.dir, "mover")
	mcfg := filepath.Join(mdir, "mover.toml")
	os.MkdirAll(mdir, 0o700)
	conf := fmt.Sprintf("secret_file = %q\n[mover]\nid = \"mover1\"\nlisten = %q\ncore = %q\n[[device]]\nid = \"far0\"\npath = %q\nbandwidth = %q\n[[device]]\nid = \"far1\"\npath = %q\nbandwidth = %q\n",
		secret, freePort(t), "http://"+addrs[0]+",http://"+addrs[1], filepath.Join(mdir, "far0"), bandwidth, filepath.Join(mdir, "far1"), bandwidth)
	os.WriteFile(mcfg, []byte(conf), 0o644)
	h.mlog = &cmdtest.Buffer{}
	h.mover = exec.Command(bin, "mover", "--config", mcfg)
	h.mover.Stdout, h.mover.Stderr = h.mlog, h.mlog
	if err := h.mover.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.mover.Process.Signal(syscall.SIGTERM); h.mover.Wait() })
	for i := 0; !strings.Contains(h.ok("df"), "far1"); i++ {
		if i == 400 {
			t.Fatalf("mover never registered:\n%s", h.mlog)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return h
}

// standby starts core i, which must stand by: it says so, and it does not
// listen.
func (h *haSite) standby(i int) {
	s := h.cores[i]
	s.log = &cmdtest.Buffer{}
	s.cmd = exec.Command(bin, "serve", "--config", s.cfg)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	for j := 0; !strings.Contains(s.log.String(), "standing by"); j++ {
		if j == 400 || s.cmd.ProcessState != nil {
			h.t.Fatalf("core %d does not stand by:\n%s", i, s.log)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + s.addr + "/healthz"); err == nil {
		resp.Body.Close()
		h.t.Fatalf("core %d answers while it stands by", i)
	}
}

// run runs the CLI against both cores.
func (h *haSite) run(args ...string) (string, string, int) {
	return h.cores[0].runAs(nil, []string{"STRATA_SERVER=" + h.server}, args...)
}

func (h *haSite) ok(args ...string) string {
	h.t.Helper()
	out, errs, code := h.run(args...)
	if code != 0 {
		h.t.Fatalf("strata %s: exit %d: %s\ncore0:\n%s\ncore1:\n%s\nmover:\n%s", strings.Join(args, " "), code, errs,
			h.cores[0].log.Tail(2000), h.cores[1].log.Tail(2000), h.mlog.Tail(2000))
	}
	return out
}

// served waits until core i serves requests (it took over).
func (h *haSite) served(i int) {
	h.t.Helper()
	s := h.cores[i]
	for j := 0; ; j++ {
		if resp, err := http.Get("http://" + s.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		if j == 600 {
			h.t.Fatalf("core %d never took over:\n%s", i, s.log)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// A standby takes over when the active core is killed, and again the
// other way round: clients that name both cores see no error, every file
// reads back byte for byte (from disk, and from tape after a migration by
// the first core), and a put works on the new core.
func TestFailover(t *testing.T) {
	h := newHASite(t, "0")
	src := t.TempDir()
	files := map[string][]byte{}
	put := func(name string, n int) {
		p := filepath.Join(src, name)
		files[name] = writeRandom(t, p, n)
		h.ok("put", p, "/ha/"+name)
	}
	h.ok("mkdir", "/ha")
	put("a", 1<<20)
	put("b", 5<<20+3)
	h.ok("migrate", "/ha/b")
	h.ok("purge", "/ha/b")
	check := func() {
		t.Helper()
		for name, want := range files {
			out := filepath.Join(src, name+".out")
			h.ok("get", "/ha/"+name, out)
			if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes back, want %d, or they differ", name, len(got), len(want))
			}
			os.Remove(out)
		}
	}
	check()

	for round, from := range []int{0, 1} {
		to := 1 - from
		h.cores[from].kill9()
		// The first command after the kill waits for the standby by
		// itself: no error reaches the user.
		h.ok("ls", "/ha")
		h.served(to)
		check()
		put(fmt.Sprintf("after%d", round), 2<<20)
		check()
		if !strings.Contains(h.cores[to].log.String(), "taking over") {
			t.Fatalf("core %d did not say it took over:\n%s", to, h.cores[to].log)
		}
		h.standby(from) // back as the standby of the new active core
	}
}

// Transfers in flight when the active core dies: a put begun under it
// begins again on the standby (its first attempt is never visible), and a
// get goes on reading with a layout from the new core once the mover
// refuses the old core's tokens. Both end with the right bytes and no
// error.
func TestFailoverMidTransfer(t *testing.T) {
	h := newHASite(t, "10MB")
	src := t.TempDir()
	old := filepath.Join(src, "old")
	oldData := writeRandom(t, old, 80<<20)
	h.ok("put", old, "/old")
	fresh := filepath.Join(src, "fresh")
	freshData := writeRandom(t, fresh, 40<<20)

	type result struct {
		what, errs string
		code       int
	}
	done := make(chan result, 2)
	got := filepath.Join(src, "old.out")
	go func() { _, e, c := h.run("get", "/old", got); done <- result{"get", e, c} }()
	go func() { _, e, c := h.run("put", fresh, "/fresh"); done <- result{"put", e, c} }()
	time.Sleep(time.Second)
	h.cores[0].kill9()
	for range 2 {
		r := <-done
		if r.code != 0 {
			t.Fatalf("%s across the fail-over: exit %d: %s\ncore1:\n%s\nmover:\n%s", r.what, r.code, r.errs, h.cores[1].log.Tail(3000), h.mlog.Tail(2000))
		}
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, oldData) {
		t.Fatalf("get across the fail-over: %d bytes, want %d, or they differ", len(b), len(oldData))
	}
	out := filepath.Join(src, "fresh.out")
	h.ok("get", "/fresh", out)
	if b, _ := os.ReadFile(out); !bytes.Equal(b, freshData) {
		t.Fatalf("put across the fail-over: %d bytes back, want %d, or they differ", len(b), len(freshData))
	}
	if !strings.Contains(h.mlog.String(), "epoch=2") {
		t.Fatalf("the mover never registered with the new core:\n%s", h.mlog)
	}
}

// An active core that loses its database session (here the database ends
// it; a partition or a dead link does the same after the keepalive
// timeouts) stops by itself, with one line saying why, and the standby
// takes over.
func TestFailoverWhenTheCatalogIsLost(t *testing.T) {
	h := newHASite(t, "0")
	src := filepath.Join(t.TempDir(), "f")
	data := writeRandom(t, src, 1<<20)
	h.ok("put", src, "/f")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The writer's session is the one holding the catalog's advisory lock
	// (key "stra", the schema's hash).
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = 1937011297
		AND objid = (hashtext(current_schema())::bigint & 4294967295)::oid`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ending the active core's session: %d ended, %v", n, err)
	}
	if err := h.cores[0].cmd.Wait(); err == nil {
		t.Fatal("the core that lost the catalog exited 0")
	}
	lines := strings.Split(strings.TrimSpace(h.cores[0].log.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "strata: lost the catalog") {
		t.Fatalf("the core that lost the catalog ended with %q, want one line saying so", last)
	}
	h.served(1)
	out := filepath.Join(t.TempDir(), "f.out")
	h.ok("get", "/f", out)
	if b, _ := os.ReadFile(out); !bytes.Equal(b, data) {
		t.Fatal("data differs after the fail-over")
	}
}
