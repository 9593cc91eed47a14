package cli

import "testing"

// A name that would rewrite a terminal is shown escaped, an ordinary one
// as it is.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"run42.dat":        "run42.dat",
		"ü 日本 a b":         "ü 日本 a b",
		"new\nline":        `"new\nline"`,
		"\x1b[2Jgone":      `"\x1b[2Jgone"`,
		"bad\xffutf8":      `"bad\xffutf8"`,
		"/proj/\u009bc1/x": `"/proj/\u009bc1/x"`,
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %s, want %s", in, got, want)
		}
	}
}
