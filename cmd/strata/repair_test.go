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
)

// As a new user would see it: one byte flipped in a migrated file's disk
// object does not fail `strata get` (the file comes back whole from its
// tape copy, and the damaged object goes); in a file with no tape copy it
// fails with one line saying the file is lost; and `strata migrate` of a
// directory migrates every healthy file and names the damaged one, as
// `strata scrub` does.
func TestDamagedCopyThroughTheCLI(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	data := writeRandom(t, src, 3<<20+5)
	s.ok("put", src, "/kept")
	s.ok("migrate", "/kept")
	s.ok("put", src, "/lone")
	flipObject := func(path string) string {
		t.Helper()
		out := s.ok("stat", path)
		var obj string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[0] == "0" && f[1] == "0" {
				obj = f[3] // copy 0, stripe 0: device, object
			}
		}
		if obj == "" {
			t.Fatalf("no stripe 0 in\n%s", out)
		}
		m, _ := filepath.Glob(filepath.Join(s.dir, "data", "devices", "*", "objects", "*", obj))
		if len(m) != 1 {
			t.Fatalf("object %s: %v", obj, m)
		}
		f, err := os.OpenFile(m[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xee}, 4321)
		f.Close()
		return m[0]
	}
	bad := flipObject("/kept")
	got := filepath.Join(s.dir, "got")
	s.ok("get", "/kept", got)
	if b, _ := os.ReadFile(got); !bytes.Equal(b, data) {
		t.Fatal("get over a damaged disk copy returned other bytes")
	}
	for i := 0; ; i++ { // reclaimed every 100 ms
		if _, err := os.Stat(bad); os.IsNotExist(err) {
			break
		}
		if i > 100 {
			t.Fatal("the damaged object was not reclaimed")
		}
		s.ok("df") // a pause that does some work
	}

	flipObject("/lone")
	_, errs, code := s.run("get", "/lone", filepath.Join(s.dir, "lone"))
	if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "/lone is lost") {
		t.Fatalf("get of a file whose only copy is damaged: exit %d, %q", code, errs)
	}

	s.ok("mkdir", "/batch")
	for _, name := range []string{"a", "b", "c"} {
		s.ok("put", src, "/batch/"+name)
	}
	flipObject("/batch/b")
	out, errs, code := s.run("migrate", "-r", "/batch")
	if code != 1 || !strings.Contains(out, "migrated 2 files") || !strings.Contains(errs, "/batch/b is lost") {
		t.Fatalf("migrate past a damaged file: exit %d, %q, %q", code, out, errs)
	}
	// A scrub of the whole namespace names what is still damaged.
	out, errs, code = s.run("scrub", "-r", "/")
	if code != 1 || !strings.Contains(out, "verified 5 copies") || strings.Count(errs, " is lost") != 2 {
		t.Fatalf("scrub -r /: exit %d, %q, %q", code, out, errs)
	}
	// Bad usage: one line, exit 1.
	for _, args := range [][]string{{"scrub"}, {"scrub", "--volume", "T00000", "/lone"}, {"scrub", "--volume", "NOSUCH"}} {
		if _, errs, code := s.run(args...); code != 1 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "strata: ") {
			t.Fatalf("strata %v: exit %d, %q", args, code, errs)
		}
	}
	fams := s.scrape()
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"strata_damaged_copies_total", map[string]string{"copy": "disk"}, 3},
		{"strata_repaired_copies_total", nil, 1},
		{"strata_lost_files_total", nil, 2},
	} {
		if got := sum(fams, c.name, c.match); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.match, got, c.want)
		}
	}
}

// A server killed while a recall writes its disk object leaves nothing
// behind: whether the recall resumes after the restart (the file comes
// back whole) or the file is removed first (nothing resumes it), every
// object of the cut-short attempt is reclaimed and df counts exactly what
// is stored.
func TestCrashWhileRecallWrites(t *testing.T) {
	for _, then := range []string{"get", "rm"} {
		t.Run(then, func(t *testing.T) {
			devs := ""
			for i := 0; i < 4; i++ {
				devs += fmt.Sprintf("[[device]]\nid = \"disk%d\"\nbandwidth = \"8MB/s\"\n", i)
			}
			s := newServer(t, devs)
			src := filepath.Join(s.dir, "big")
			data := writeRandom(t, src, 24<<20)
			s.ok("put", src, "/big")
			s.ok("migrate", "/big")
			s.ok("purge", "/big")
			s.waitObjects(0)

			get := exec.Command(bin, "get", "/big", filepath.Join(s.dir, "first"))
			get.Env = append(os.Environ(), "STRATA_SERVER="+s.addr)
			if err := get.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 1000 && s.objectBytes() < 4<<20; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if s.objectBytes() < 4<<20 {
				t.Fatal("the recall never started writing")
			}
			s.kill9()
			get.Wait()
			s.start()

			want := int64(0)
			if then == "get" {
				out := filepath.Join(s.dir, "out")
				s.ok("get", "/big", out)
				if b, _ := os.ReadFile(out); !bytes.Equal(b, data) {
					t.Fatal("the file recalled after the crash differs")
				}
				want = int64(len(data))
			} else {
				s.ok("rm", "/big")
			}
			s.waitObjects(map[string]int{"get": 1, "rm": 0}[then])
			if used := s.dfUsed(); used != want {
				t.Fatalf("df says %d bytes used, want %d", used, want)
			}
		})
	}
}
