// Package pgtest runs a throwaway PostgreSQL server for tests, from the
// server binaries of the machine's PostgreSQL packages (Debian's
// postgresql; scripts/test.sh installs them), so that the PostgreSQL
// catalog is tested against a real server and not a fake.
//
// One cluster serves a whole test binary: it starts on the first DSN call,
// in a temporary directory, listening on a Unix socket there only, with
// fsync off (the tests are about the catalog's behaviour, not the
// database's durability). Each DSN is a new schema, so tests never see
// each other's tables. Main stops the cluster; should the test binary die
// first, the server is killed with it (the parent-death signal).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv, when set, turns a missing PostgreSQL into a test failure
// instead of a skip (scripts/test.sh sets it, having installed it).
const RequireEnv = "STRATA_REQUIRE_POSTGRES"

var errNoServer = errors.New("no PostgreSQL server binaries (apt-get install postgresql)")

var (
	once    sync.Once
	shared  *cluster
	errOnce error
)

type cluster struct {
	dir    string // holds data/ and the socket
	cmd    *exec.Cmd
	done   chan error
	n      atomic.Int64
	launch func() error // starts the server (again) on its data
}

const port = 5432 // on the private socket directory only: no clash

// Main runs a package's tests and then stops the cluster, if one started.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop shuts the cluster down and removes its files.
func Stop() {
	if shared == nil {
		return
	}
	shared.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-shared.done:
	case <-time.After(20 * time.Second):
		shared.cmd.Process.Kill()
		<-shared.done
	}
	os.RemoveAll(shared.dir)
	shared = nil
}

// DSN returns a connection string for a new, empty schema in the test
// binary's cluster, starting the cluster if need be. It skips the test
// when PostgreSQL is not installed, unless RequireEnv is set.
func DSN(t testing.TB) string {
	t.Helper()
	schema := newSchema(t) // first: it starts the cluster
	return shared.dsn(schema)
}

// URL is DSN as a postgres:// URL.
func URL(t testing.TB) string {
	t.Helper()
	schema := newSchema(t)
	q := url.Values{"host": {shared.dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}, "search_path": {schema}}
	return "postgres://strata@/postgres?" + q.Encode()
}

func newSchema(t testing.TB) string {
	t.Helper()
	once.Do(func() { shared, errOnce = start() })
	if errOnce != nil {
		if errors.Is(errOnce, errNoServer) && os.Getenv(RequireEnv) == "" {
			t.Skip(errOnce)
		}
		t.Fatal(errOnce)
	}
	schema := fmt.Sprintf("t%d", shared.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, shared.dsn("public"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// Server is a PostgreSQL server of one test's own (Serve): on a network,
// and there to be stopped, paused and resumed.
type Server struct {
	c *cluster
	// DSN reaches it over TCP at the address it listens on, schema
	// strata.
	DSN string
}

// Serve starts a PostgreSQL server for t alone, listening on ip (port
// 5432) in the network namespace netns (a path, as nsenter --net takes
// it), or with netns and ip "" on its Unix socket only, and stops it when
// t ends. It skips t when PostgreSQL is not
// installed, unless RequireEnv is set.
func Serve(t testing.TB, netns, ip string) *Server {
	t.Helper()
	c, err := startAt(where{netns: netns, listen: ip})
	if err != nil {
		if errors.Is(err, errNoServer) && os.Getenv(RequireEnv) == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	host := ip
	if ip == "" {
		host = c.dir // its Unix socket only
	}
	s := &Server{c: c, DSN: fmt.Sprintf("host=%s port=%d user=strata dbname=postgres sslmode=disable search_path=strata", host, port)}
	t.Cleanup(s.stop)
	return s
}

// Pause stops the server's processes (SIGSTOP): connections stay open and
// nothing answers, as when the database host hangs.
func (s *Server) Pause() { syscall.Kill(-s.c.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume lets a paused server go on.
func (s *Server) Resume() { syscall.Kill(-s.c.cmd.Process.Pid, syscall.SIGCONT) }

// Restart stops the server as an administrator would (fast shutdown: every
// session ended, work in flight rolled back) and starts it again on the
// same data, returning once it answers. Clients see their connections
// end and, for the moment between, connections refused.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.shutdown()
	if err := s.c.launch(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

func (s *Server) shutdown() {
	s.Resume()
	s.c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.c.done:
	case <-time.After(20 * time.Second):
		s.c.cmd.Process.Kill()
		<-s.c.done
	}
}

func (s *Server) stop() {
	s.shutdown()
	os.RemoveAll(s.c.dir)
}

func (c *cluster) dsn(schema string) string {
	return fmt.Sprintf("host=%s port=%d user=strata dbname=postgres sslmode=disable search_path=%s", c.dir, port, schema)
}

// binDir finds the newest installed server, e.g. /usr/lib/postgresql/15/bin.
func binDir() (string, error) {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(m) == 0 {
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errNoServer
	}
	sort.Slice(m, func(i, j int) bool { return version(m[i]) < version(m[j]) })
	return filepath.Dir(m[len(m)-1]), nil
}

func version(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

// where a cluster listens: the shared one on its Unix socket only, a
// test's own (Serve) on an address in a network namespace too.
type where struct {
	netns  string // "" for this process's
	listen string // an IP address; "" for the socket only
}

func start() (*cluster, error) { return startAt(where{}) }

func startAt(w where) (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-pg-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	fail := func(err error) (*cluster, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// initdb and postgres refuse to run as root; as root they run as the
	// packages' postgres user.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("running as root needs the postgres user: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "strata", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if w.listen != "" {
		// initdb trusts loopback only; the bed's hosts are on its bridge.
		f, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("host all all 0.0.0.0/0 trust\n")
			f.Close()
		}
		if err != nil {
			return fail(err)
		}
	}
	c.launch = func() error { return c.run(bin, data, w, cred) }
	if err := c.launch(); err != nil {
		return fail(err)
	}
	return c, nil
}

// run starts the server on data and waits until it answers.
func (c *cluster) run(bin, data string, w where, cred *syscall.Credential) error {
	dir := c.dir
	c.done = make(chan error, 1)
	// The server is started from a goroutine that keeps its OS thread for
	// good: the parent-death signal follows the thread that forked, and
	// Go may end threads.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		args := []string{"-D", data, "-k", dir, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=" + w.listen, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=200"}
		cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
		attr := &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if w.netns != "" {
			// nsenter enters the namespace as root; setpriv becomes the
			// postgres user and sets the parent-death signal again (a
			// change of user clears it) before it execs the server.
			// Neither forks: the server is still this thread's child.
			argv := []string{"--net=" + w.netns, "--", "setpriv", "--pdeathsig", "KILL"}
			if cred != nil {
				argv = append(argv, "--reuid", strconv.Itoa(int(cred.Uid)), "--regid", strconv.Itoa(int(cred.Gid)), "--clear-groups")
			}
			cmd = exec.Command("nsenter", append(append(argv, filepath.Join(bin, "postgres")), args...)...)
			attr.Credential = nil
		}
		cmd.Dir = dir
		log, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			started <- err
			return
		}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = attr
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.cmd = cmd
		started <- nil
		c.done <- cmd.Wait()
		log.Close()
		select {} // keep the thread: the server's parent-death signal is tied to it
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, c.dsn("public"))
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-c.done:
			out, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("postgres exited: %v\n%s", werr, out)
		default:
		}
		if time.Now().After(deadline) {
			c.cmd.Process.Kill()
			<-c.done
			out, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("postgres did not start: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
