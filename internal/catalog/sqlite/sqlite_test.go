package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/catalogtest"
)

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalog.Store {
		s, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsData(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := s.Mkdir(ctx, catalog.Inode{Parent: catalog.RootID, Name: "keep", Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Lookup(ctx, catalog.RootID, "keep")
	if err != nil || got.ID != d.ID {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

func TestBadSync(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{Sync: "sometimes"}); err == nil {
		t.Fatal("bad sync mode accepted")
	}
}

// The writer's thread runs at raised priority when the process may lower a
// niceness (root here in CI); otherwise the store says why it could not.
func TestWriterPriority(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "c.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.WriterPriority()
	if os.Geteuid() != 0 {
		if err == nil {
			t.Skip("not root, yet allowed to raise priority (CAP_SYS_NICE)")
		}
		return
	}
	if err != nil {
		t.Fatalf("as root: %v", err)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	raised := 0
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended meanwhile
		}
		// Field 19 is the niceness; fields start after the ")" that closes
		// the command name.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 16 && f[16] == "-10" {
			raised++
		}
	}
	if raised == 0 {
		t.Fatal("no thread at nice -10: the writer's priority was not raised")
	}
}
