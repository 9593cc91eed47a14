package core

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzSplitPath: whatever a request names, an accepted path is absolute,
// within the limits, made of valid UTF-8 names without control
// characters, "." or "..", and reads back the same once cleaned.
func FuzzSplitPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "//a///b/", "/a/../b", "/a/./b", "a/b", "/a\x00b", "/new\nline", "/\x1b[2J", "/\xff\xfe", "/ü/日本",
		"/" + strings.Repeat("x", 300), strings.Repeat("/d", 300), "/\u0085", "/\u200b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		comps, err := splitPath(p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || len(p) > MaxPathLen || len(comps) > MaxDepth {
			t.Fatalf("%q accepted", p)
		}
		for _, c := range comps {
			if c == "" || c == "." || c == ".." || len(c) > 255 || !utf8.ValidString(c) || strings.ContainsAny(c, "/\x00") || strings.IndexFunc(c, unicode.IsControl) >= 0 {
				t.Fatalf("%q: bad component %q", p, c)
			}
		}
		again, err := splitPath(joinPath(comps))
		if err != nil || strings.Join(again, "/") != strings.Join(comps, "/") {
			t.Fatalf("%q: %q does not read back: %q %v", p, joinPath(comps), again, err)
		}
	})
}
