package faultfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
)

// Each case runs a script of operations on files in one directory, then
// crashes, restores and checks what survived. Steps:
//
//	pre NAME TEXT     the file exists before the FS sees it (durable)
//	create NAME       create NAME and keep it open
//	write NAME TEXT   append TEXT through NAME's open handle
//	sync NAME         fsync NAME
//	close NAME
//	reopen NAME       open NAME again and fsync it through that descriptor
//	syncdir           fsync the directory
//	syncfs            syncfs the file system
//	remove NAME
//	rename OLD NEW
//
// want lists NAME=TEXT for a file that must hold TEXT and NAME! for one
// that must be gone.
func TestCrash(t *testing.T) {
	for _, c := range []struct {
		name, script, want string
	}{
		{"never synced", "create a; write a x; close a", "a!"},
		{"file synced, directory not", "create a; write a x; sync a; close a", "a!"},
		{"file and directory synced", "create a; write a x; sync a; syncdir; close a", "a=x"},
		{"written after its sync", "create a; write a one; sync a; syncdir; write a two", "a=one"},
		{"entry durable, data not", "create a; write a x; syncdir; close a", "a="},
		{"syncfs covers all", "create a; write a x; create b; write b y; syncfs", "a=x b=y"},
		{"unsynced removal", "pre a old; remove a", "a=old"},
		{"synced removal", "pre a old; remove a; syncdir", "a!"},
		{"removal of a synced file", "create a; write a x; sync a; syncdir; close a; remove a", "a=x"},
		{"unsynced rename over a file", "pre b old; create a; write a new; sync a; close a; rename a b", "a! b=old"},
		{"synced rename over a file", "pre b old; create a; write a new; sync a; close a; rename a b; syncdir", "a! b=new"},
		{"rename of a durable file", "pre a x; rename a b", "a=x b!"},
		{"recreated, unsynced", "pre a old; remove a; create a; write a new; sync a", "a=old"},
		{"recreated, synced", "pre a old; remove a; create a; write a new; sync a; syncdir", "a=new"},
		{"synced through another descriptor", "create a; write a x; close a; reopen a; syncdir", "a=x"},
		{"written through a handle after rename", "create a; sync a; syncdir; rename a b; write a x; sync a; syncdir", "a! b=x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := faultfs.New(fsio.OS)
			open := map[string]fsio.File{}
			size := map[string]int64{}
			p := func(n string) string { return filepath.Join(dir, n) }
			for _, step := range strings.Split(c.script, ";") {
				w := strings.Fields(step)
				var err error
				switch w[0] {
				case "pre":
					err = os.WriteFile(p(w[1]), []byte(w[2]), 0o600)
				case "create":
					open[w[1]], err = fs.Create(p(w[1]), 0, 0o600)
				case "write":
					_, err = open[w[1]].WriteAt([]byte(w[2]), size[w[1]])
					size[w[1]] += int64(len(w[2]))
				case "sync":
					err = open[w[1]].Sync()
				case "reopen": // open again and fsync through the new descriptor
					var f fsio.File
					if f, err = fs.Open(p(w[1])); err == nil {
						err = f.Sync()
						f.Close()
					}
				case "close":
					err = open[w[1]].Close()
					delete(open, w[1])
				case "syncdir", "syncfs":
					var d fsio.File
					if d, err = fs.Open(dir); err == nil {
						if w[0] == "syncdir" {
							err = d.Sync()
						} else {
							err = d.SyncFS()
						}
						d.Close()
					}
				case "remove":
					err = fs.Remove(p(w[1]))
				case "rename":
					err = fs.Rename(p(w[1]), p(w[2]))
				default:
					t.Fatalf("bad step %q", step)
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
			}
			fs.Crash()
			if _, err := fs.Stat(dir); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Stat after the crash: %v, want EIO", err)
			}
			for _, f := range open {
				f.Close()
			}
			if err := fs.Restore(); err != nil {
				t.Fatal(err)
			}
			for _, w := range strings.Fields(c.want) {
				if name, ok := strings.CutSuffix(w, "!"); ok {
					if _, err := os.Stat(p(name)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s survived the crash (%v)", name, err)
					}
					continue
				}
				name, text, _ := strings.Cut(w, "=")
				if b, err := os.ReadFile(p(name)); err != nil || string(b) != text {
					t.Errorf("%s after the crash: %q, %v; want %q", name, b, err, text)
				}
			}
		})
	}
}

func TestInject(t *testing.T) {
	for _, c := range []struct {
		name  string
		rule  faultfs.Rule
		fails []bool // the outcome of six writes, two to each of x.a, y.b, z.a in turn
		err   error
	}{
		{"every write", faultfs.Rule{Op: faultfs.OpWrite}, []bool{true, true, true, true, true, true}, syscall.EIO},
		{"the third write on", faultfs.Rule{Op: faultfs.OpWrite, Nth: 3}, []bool{false, false, true, true, true, true}, syscall.EIO},
		{"the second write once", faultfs.Rule{Op: faultfs.OpWrite, Nth: 2, Count: 1, Err: syscall.ENOSPC}, []bool{false, true, false, false, false, false}, syscall.ENOSPC},
		{"by name", faultfs.Rule{Op: faultfs.OpWrite, Name: "*.a"}, []bool{true, true, false, false, true, true}, syscall.EIO},
		{"by name, second match", faultfs.Rule{Name: "*.a", Op: faultfs.OpWrite, Nth: 2, Count: 2}, []bool{false, true, false, false, true, false}, syscall.EIO},
		{"other operations", faultfs.Rule{Op: faultfs.OpSync}, []bool{false, false, false, false, false, false}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := faultfs.New(fsio.OS)
			fs.Inject(c.rule)
			var files []fsio.File
			for _, n := range []string{"x.a", "y.b", "z.a"} {
				f, err := fs.Create(filepath.Join(dir, n), 0, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files = append(files, f, f)
			}
			failed := 0
			for i, f := range files {
				_, err := f.WriteAt([]byte("data"), int64(i%2)*4)
				if (err != nil) != c.fails[i] {
					t.Errorf("write %d: %v, want failure %v", i+1, err, c.fails[i])
				}
				if err != nil {
					failed++
					if !errors.Is(err, c.err) {
						t.Errorf("write %d: %v, want %v", i+1, err, c.err)
					}
					if !strings.Contains(err.Error(), f.Name()) {
						t.Errorf("error %q does not name the file", err)
					}
				}
			}
			if fs.Injected() != failed {
				t.Errorf("Injected() = %d, %d failed", fs.Injected(), failed)
			}
			fs.Clear()
			if _, err := files[0].WriteAt([]byte("data"), 0); err != nil {
				t.Errorf("a write after Clear: %v", err)
			}
		})
	}
}

// A rule may crash the FS at its operation: that one and all after fail.
func TestCrashRule(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New(fsio.OS)
	fs.Inject(faultfs.Rule{Op: faultfs.OpSync, Nth: 2, Crash: true})
	f, err := fs.Create(filepath.Join(dir, "a"), 0, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil || fs.Crashed() {
		t.Fatalf("first sync: %v, crashed %v", err, fs.Crashed())
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) || !fs.Crashed() {
		t.Fatalf("second sync: %v, crashed %v", err, fs.Crashed())
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write after the crash: %v", err)
	}
}
