package sqlstore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// nice reads a thread's niceness from /proc (field 19 of its stat line).
func nice(t *testing.T, statPath string) (string, bool) {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return "", false // the thread ended meanwhile
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 17 {
		t.Fatalf("short stat line %q", s)
	}
	return f[16], true
}

func boostedThreads(t *testing.T, want string) int {
	tasks, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range tasks {
		if v, ok := nice(t, p); ok && v == want {
			n++
		}
	}
	return n
}

// While operations queue for the writer its thread has raised priority
// (root may lower a niceness: CI runs as root); after a run of lone
// operations no thread keeps it.
func TestWriterBoost(t *testing.T) {
	dir := t.TempDir()
	wdb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	wdb.SetMaxOpenConns(1)
	rdb, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "w.db"))
	if _, err := wdb.Exec("CREATE TABLE ids (name TEXT PRIMARY KEY, next INTEGER NOT NULL); INSERT INTO ids VALUES ('inodes', 1), ('bitfiles', 1)"); err != nil {
		t.Fatal(err)
	}
	s, err := New(Dialect{Name: "sqlite"}, wdb, rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriterPriority(); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("not allowed to lower a niceness here: %v", err)
		}
		t.Fatalf("as root: %v", err)
	}
	ctx := context.Background()
	boosted := strconv.Itoa(s.boost.boosted)
	niceOf := func() (string, error) {
		var v string
		err := s.write(ctx, func(*Tx) error {
			v, _ = nice(t, "/proc/thread-self/stat")
			return nil
		})
		return v, err
	}
	if v, err := niceOf(); err != nil || v == boosted {
		t.Fatalf("a lone operation ran at nice %s (%v), want the base", v, err)
	}

	// Hold the writer in one operation while others queue behind it: they
	// form a group of several, which boosts.
	hold, held := make(chan struct{}), make(chan struct{})
	go s.write(ctx, func(*Tx) error { close(held); <-hold; return nil })
	<-held
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = niceOf()
		}()
	}
	for len(s.ops) < len(got) {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	for i, v := range got {
		if v != boosted {
			t.Fatalf("queued operation %d ran at nice %s, want %s", i, v, boosted)
		}
	}

	for range unboostAfter {
		if _, err := niceOf(); err != nil {
			t.Fatal(err)
		}
	}
	if n := boostedThreads(t, boosted); n > 0 {
		t.Fatalf("%d threads kept nice %s after %d lone operations", n, boosted, unboostAfter)
	}
	if v, _ := niceOf(); v == boosted {
		t.Fatalf("lone operation after unboosting ran at nice %s", v)
	}
}
