package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// openSource reads what os.Open reads, and fails as it fails.
func TestOpenSource(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("strata"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openSource(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 6)
	if n, err := f.ReadAt(b, 0); n != 6 || err != nil || string(b) != "strata" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 6 || f.Name() != p {
		t.Fatalf("stat %v, %v, name %q", st, err, f.Name())
	}
	_, err = openSource(p + ".missing")
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != p+".missing" {
		t.Fatalf("a missing file: %v", err)
	}
}

// BenchmarkOpenSource opens, stats, reads 4 KiB of and closes a small
// file, as a put of many small files does each: with openSource and,
// for the baseline in the same run, with os.Open.
func BenchmarkOpenSource(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, c := range []struct {
		name string
		open func(string) (*os.File, error)
	}{{"openSource", openSource}, {"os.Open", os.Open}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f, err := c.open(p)
				if err != nil {
					b.Fatal(err)
				}
				f.Stat()
				f.ReadAt(buf, 0)
				f.Close()
			}
		})
	}
}
