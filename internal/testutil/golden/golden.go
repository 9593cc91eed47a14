// Package golden compares what a test produced with a file kept in its
// package's testdata, for output that should not drift unnoticed (the
// scheduler's decisions, the CLI's listings). `go test -run NAME -update`
// rewrites the files from what the code does now; the diff is then
// reviewed and committed like code.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from what the code does now")

// Check compares got with testdata/name, or writes it there with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -run '%s' -update makes it)", err, t.Name())
	}
	if want := string(b); got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		line := min(len(gl), len(wl))
		for i := range line {
			if gl[i] != wl[i] {
				line = i
				break
			}
		}
		at := func(l []string) string {
			if line < len(l) {
				return l[line]
			}
			return "(end)"
		}
		t.Fatalf("output differs from %s at line %d:\n got: %s\nwant: %s\nIf the change is meant, run go test -run '%s' -update and review the diff.", p, line+1, at(gl), at(wl), t.Name())
	}
}
