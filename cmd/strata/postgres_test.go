package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// catalogs are the catalog databases end-to-end tests run on: config
// returns the [catalog] table that selects one (for PostgreSQL, a new
// schema in the test binary's throwaway cluster).
var catalogs = []struct {
	name   string
	config func(t *testing.T) string
}{
	{"sqlite", func(*testing.T) string { return "" }},
	{"postgres", func(t *testing.T) string {
		return fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\n", pgtest.DSN(t))
	}},
}

// The tour on a PostgreSQL catalog: a server keeps its namespace in
// PostgreSQL across a restart, and a second server on the same catalog is
// refused with one line.
func TestPostgresCatalog(t *testing.T) {
	dsn := pgtest.DSN(t)
	catalog := fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\n", dsn)
	s := newServer(t, catalog)
	s.ok("mkdir", "-p", "/proj/cfd")
	files := map[string][]byte{}
	for _, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 1 << 20} {
		name := fmt.Sprintf("f%d", n)
		src := filepath.Join(s.dir, name)
		files[name] = writeRandom(t, src, n)
		s.ok("put", src, "/proj/cfd/"+name)
	}
	s.ok("mv", "/proj/cfd/f1", "/proj/cfd/one")
	files["one"] = files["f1"]
	delete(files, "f1")
	s.ok("rm", "/proj/cfd/f0")
	delete(files, "f0")

	check := func() {
		t.Helper()
		ls := s.ok("ls", "/proj/cfd")
		if got := strings.Fields(ls); len(got) != len(files) {
			t.Fatalf("ls: %q, want %d entries", ls, len(files))
		}
		for name, want := range files {
			out := filepath.Join(s.dir, name+".out")
			s.ok("get", "/proj/cfd/"+name, out)
			if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes back, want %d, or they differ", name, len(got), len(want))
			}
			os.Remove(out)
		}
	}
	check()

	// A second server on the same catalog, with its own data directory.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "second.toml")
	conf := fmt.Sprintf("listen = %q\ndata_dir = %q\n[mover]\nlisten = %q\n%s", freePort(t), filepath.Join(dir, "data"), freePort(t), catalog)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	second := exec.Command(bin, "serve", "--config", cfg)
	second.Stderr = &errb
	if err := second.Run(); err == nil {
		t.Fatal("a second server on the same catalog started")
	}
	if msg := strings.TrimSpace(errb.String()); !strings.Contains(msg, "another strata server is using this PostgreSQL catalog") || strings.Count(msg, "\n") > 0 {
		t.Fatalf("second server's error: %q", msg)
	}

	s.stop()
	s.start()
	check()
	if out := s.ok("stat", "/proj/cfd/one"); !strings.Contains(out, "Size: 1 (1 B)") {
		t.Fatalf("stat: %q", out)
	}
}

// PostgreSQL restarted (twice) while clients put and list: requests wait
// for the database and go on; no command fails and every file put reads
// back.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := pgtest.Serve(t, "", "")
	s := newServer(t, fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\n", pg.DSN))
	s.ok("mkdir", "/load")
	src := filepath.Join(s.dir, "src")
	data := writeRandom(t, src, 256<<10)
	stop := make(chan struct{})
	failed := make(chan string, 1)
	var n int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, args := range [][]string{{"put", src, fmt.Sprintf("/load/f%d", n)}, {"ls", "/load"}, {"stat", fmt.Sprintf("/load/f%d", n)}} {
				if _, errs, code := s.run(args...); code != 0 {
					failed <- fmt.Sprintf("strata %s: exit %d: %s", strings.Join(args, " "), code, errs)
					return
				}
			}
		}
	}()
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		pg.Restart(t)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	select {
	case msg := <-failed:
		t.Fatalf("across the database's restarts: %s\nserver log:\n%s", msg, s.log.Tail(3000))
	default:
	}
	for i := 0; i < n; i++ {
		out := filepath.Join(s.dir, "out")
		s.ok("get", "-f", fmt.Sprintf("/load/f%d", i), out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("f%d differs", i)
		}
	}
	t.Logf("%d files put across two restarts", n)
}
