package taperest

import (
	"testing"
	"time"
)

func TestParseLifetime(t *testing.T) {
	for s, want := range map[string]time.Duration{"P1D": 24 * time.Hour, "PT12H": 12 * time.Hour, "P2DT3H4M5S": 51*time.Hour + 4*time.Minute + 5*time.Second, "PT30M": 30 * time.Minute, "PT0S": 0} {
		if got, err := parseLifetime(s); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "P", "PT", "1D", "P1H", "P-1D", "PT1.5H", "P1DT", "p1d"} {
		if _, err := parseLifetime(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func FuzzParseLifetime(f *testing.F) {
	f.Add("P1DT2H")
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseLifetime(s); err == nil && d < 0 {
			t.Fatalf("%q: negative %v", s, d)
		}
	})
}
