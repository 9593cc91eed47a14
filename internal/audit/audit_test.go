package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestWriteRotateRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(p, 2000, 3)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				uid := uint32(g)
				r := Record{Time: t0.Add(time.Duration(g*100+i) * time.Second), User: fmt.Sprint("u", g), UID: &uid, Op: "POST /v1/create", Paths: []string{fmt.Sprintf("/f%d-%d", g, i)}, Status: 200}
				if i%5 == 0 {
					r.Status, r.Error = 403, "permission denied"
				}
				if err := l.Write(r); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	files := Files(p)
	if len(files) != 4 { // the log and 3 rotated (older ones dropped)
		t.Fatalf("files %v", files)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	var all, denied, u2 int
	last := time.Time{}
	Read(p, Filter{}, func(r Record, _ []byte) error {
		all++
		return nil
	})
	Read(p, Filter{Denied: true}, func(r Record, _ []byte) error {
		if r.Status != 403 {
			t.Errorf("denied filter let %d through", r.Status)
		}
		denied++
		return nil
	})
	Read(p, Filter{User: "u2", Since: t0.Add(210 * time.Second)}, func(r Record, _ []byte) error {
		if r.User != "u2" || r.Time.Before(t0.Add(210*time.Second)) || r.Time.Before(last) {
			t.Errorf("filter let %+v through", r)
		}
		last = r.Time
		u2++
		return nil
	})
	// 100 records of ~130 bytes in 2000-byte files: the oldest were
	// rotated away, every line kept is whole.
	if all == 0 || all >= 100 || denied == 0 || u2 == 0 {
		t.Fatalf("read %d, denied %d, u2 since %d", all, denied, u2)
	}
	if err := Read(filepath.Join(t.TempDir(), "none"), Filter{}, nil); err == nil {
		t.Error("no log: no error")
	}
}
