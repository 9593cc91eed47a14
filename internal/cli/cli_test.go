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

// The server address a command uses: as given without a CA; with one,
// host:port means https (each core of a list, and the default address,
// which `strata serve` tells its host's users to reach with --ca).
func TestServerAddr(t *testing.T) {
	for _, tc := range []struct{ addr, ca, want string }{
		{"", "", ""},
		{"", "ca.pem", "https://127.0.0.1:7420"},
		{"h:7420", "", "h:7420"},
		{"h:7420", "ca.pem", "https://h:7420"},
		{"h1:7420, h2:7420", "ca.pem", "https://h1:7420,https://h2:7420"},
		{"http://h:7420", "ca.pem", "http://h:7420"},
		{"unix:/run/strata.sock", "ca.pem", "unix:/run/strata.sock"},
	} {
		if got := serverAddr(tc.addr, tc.ca); got != tc.want {
			t.Errorf("serverAddr(%q, %q) = %q, want %q", tc.addr, tc.ca, got, tc.want)
		}
	}
}
