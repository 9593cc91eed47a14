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
	l, err := Open(p, 2000, 3, func(err error) { t.Error(err) })
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
				l.Write(r)
			}
		}()
	}
	wg.Wait()
	l.Close()
	files := Files(p)
	if len(files) < 2 || len(files) > 4 { // rotated, at most 3 kept
		t.Fatalf("files %v", files)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	// Every filter returns exactly the records of the whole log it should.
	var all []Record
	Read(p, Filter{}, func(r Record, _ []byte) error { all = append(all, r); return nil })
	if len(all) == 0 || len(all) > 100 {
		t.Fatalf("read %d records", len(all))
	}
	for _, f := range []Filter{{Denied: true}, {User: "u2"}, {User: "2"}, {User: "uid:2", Since: t0.Add(210 * time.Second)}, {Since: t0.Add(150 * time.Second)}} {
		want := 0
		for _, r := range all {
			if f.match(r) {
				want++
			}
		}
		got := 0
		Read(p, f, func(r Record, _ []byte) error {
			if !f.match(r) {
				t.Errorf("%+v let %+v through", f, r)
			}
			got++
			return nil
		})
		if got != want {
			t.Errorf("%+v: %d records, want %d", f, got, want)
		}
	}
	if err := Read(filepath.Join(t.TempDir(), "none"), Filter{}, nil); err == nil {
		t.Error("no log: no error")
	}
}
