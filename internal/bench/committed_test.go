package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedReportsRead: every strata bench report committed under
// docs/ and bench/results/ reads back with the current ReadJSON (unknown
// fields forbidden), so the validations and figures made from them can be
// recomputed with the build of the day.
func TestCommittedReportsRead(t *testing.T) {
	n := 0
	for _, root := range []string{"../../docs", "../../bench/results"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !bytes.Contains(b[:min(len(b), 200)], []byte(`"tool": "strata bench"`)) {
				return nil // another tool's JSON
			}
			n++
			if _, err := ReadJSON(bytes.NewReader(b)); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 50 {
		t.Fatalf("read %d committed reports; expected the validations' (more than 50)", n)
	}
}
