package main_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/testutil/pgtest"
)

// The catalog lost: with the server stopped, `strata rebuild-catalog`
// writes a new one from the cartridges alone, into a SQLite file or a
// PostgreSQL schema, and a server started on it serves every migrated
// file back from tape. A second rebuild into the same target is refused
// with one line.
func TestRebuildCatalog(t *testing.T) {
	for _, target := range []struct {
		name    string
		new     func(t *testing.T, dir string) string // the rebuild's argument
		catalog func(arg string) string               // the [catalog] table that opens it
		again   string                                // the second rebuild's error
	}{
		{"sqlite", func(_ *testing.T, dir string) string { return filepath.Join(dir, "rebuilt.db") },
			func(arg string) string { return fmt.Sprintf("[catalog]\npath = %q\n", arg) }, "exists"},
		{"postgres", func(t *testing.T, _ string) string { return pgtest.URL(t) },
			func(arg string) string { return fmt.Sprintf("[catalog]\ndriver = \"postgres\"\ndsn = %q\n", arg) }, "already holds tables"},
	} {
		t.Run(target.name, func(t *testing.T) {
			s := newServer(t, "[library]\ntime_scale = \"instant\"\ndrives = 2\ncartridges = 4\n[hsm]\nrecall_min_files = 1\n")
			s.ok("mkdir", "-p", "/proj/cfd", "/logs")
			files := map[string][]byte{}
			for i, p := range []string{"/proj/cfd/run42.dat", "/proj/cfd/run43.dat", "/logs/a.log", "/top"} {
				src := filepath.Join(s.dir, fmt.Sprintf("src%d", i))
				files[p] = writeRandom(t, src, 1000+i*70000)
				s.ok("put", src, p)
			}
			s.ok("chmod", "600", "/logs/a.log")
			if out := s.ok("migrate"); !strings.HasPrefix(out, "migrated 4 files") {
				t.Fatalf("migrate: %q", out)
			}
			s.stop()

			arg := target.new(t, s.dir)
			out := s.ok("rebuild-catalog", "--config", s.cfg, arg)
			if !strings.HasPrefix(out, "rebuilt ") || !strings.Contains(out, ": 4 files (4 tape copies)") {
				t.Fatalf("rebuild-catalog: %q", out)
			}
			if _, stderr, code := s.run("rebuild-catalog", "--config", s.cfg, arg); code == 0 || !strings.Contains(stderr, target.again) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("second rebuild into the same catalog: exit %d, %q", code, stderr)
			}

			f, err := os.OpenFile(s.cfg, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(target.catalog(arg))
			f.Close()
			s.start()
			if ls := s.ok("ls", "-l", "/logs"); !strings.Contains(ls, "-rw------- ") || !strings.Contains(ls, " tape a.log") {
				t.Fatalf("ls -l /logs on the rebuilt catalog:\n%s", ls)
			}
			if ls := s.ok("ls", "/proj/cfd"); ls != "run42.dat\nrun43.dat\n" {
				t.Fatalf("ls /proj/cfd on the rebuilt catalog: %q", ls)
			}
			for p, want := range files {
				got := filepath.Join(s.dir, "back")
				s.ok("get", "-f", p, got)
				if b, _ := os.ReadFile(got); !bytes.Equal(b, want) {
					t.Fatalf("%s: %d bytes back from tape, want %d, or they differ", p, len(b), len(want))
				}
			}
		})
	}
}
