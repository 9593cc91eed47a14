package tape

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// The model reproduces the vendors' figures it was built from: an average
// locate from BOT within 2 % of the data sheet, a full traverse of 90–130 s
// (IBM LTO data sheets: 100–130 s; Fermilab's LTO-4 figures, ~50 s average
// and ~100 s full, give 95 s in this model), and a full cartridge written in
// capacity / rate.
func TestModelMatchesDataSheets(t *testing.T) {
	for _, name := range GenerationNames() {
		g := Generations[name]
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var sum time.Duration
			const n = 20000
			for i := 0; i < n; i++ {
				sum += g.LocateTime(Position{}, g.PositionOf(r.Int64N(g.Capacity)))
			}
			avg := sum / n
			if d := (avg - g.AvgLocate).Seconds() / g.AvgLocate.Seconds(); d > 0.02 || d < -0.02 {
				t.Errorf("average locate from BOT %v, data sheet %v", avg, g.AvgLocate)
			}
			full := g.LocateTime(Position{}, Position{Wrap: 0, LPos: g.Length})
			if full < 90*time.Second || full > 130*time.Second {
				t.Errorf("full traverse %v, want 90–130 s", full)
			}
		})
	}
}

func TestSerpentinePositions(t *testing.T) {
	g := Generations["LTO-9"]
	bpw := int64(g.BytesPerWrap()) + 1 // rounded up: offset bpw is on the next wrap
	cases := []struct {
		off  int64
		wrap int
		lpos float64
	}{
		{0, 0, 0},
		{bpw / 2, 0, g.Length / 2},
		{bpw, 1, g.Length}, // turn around at the far end
		{bpw + bpw/4, 1, g.Length * 3 / 4},
		{2 * bpw, 2, 0},                  // back at BOT
		{g.Capacity * 2, g.Wraps - 1, 0}, // past the end clamps to the last wrap
	}
	for _, tc := range cases {
		p := g.PositionOf(tc.off)
		if p.Wrap != tc.wrap || p.LPos < tc.lpos-0.01 || p.LPos > tc.lpos+0.01 {
			t.Errorf("offset %d: got %+v, want wrap %d at %.1f m", tc.off, p, tc.wrap, tc.lpos)
		}
	}
	// Files next to each other on adjacent wraps at the same end are close;
	// locate time depends on distance, not on byte offset.
	near := g.LocateTime(g.PositionOf(bpw-1), g.PositionOf(bpw+1))
	far := g.LocateTime(g.PositionOf(0), g.PositionOf(bpw/2))
	if near >= far {
		t.Errorf("adjacent wraps at the turn-around: %v, half a wrap away: %v", near, far)
	}
}

func TestLookupGeneration(t *testing.T) {
	for _, name := range []string{"LTO-9", "lto9", "Lto-5"} {
		if _, err := LookupGeneration(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LookupGeneration("DLT"); err == nil {
		t.Error("DLT accepted")
	}
}

func FuzzDecodeHeader(f *testing.F) {
	b, _ := EncodeHeader(&Header{Volume: "T00000", Seq: 1, Entries: []Entry{{Path: "/a", Size: 3}, {Path: "/b", Offset: 3, Size: 5}}})
	f.Add(b)
	f.Add([]byte("STRATAH1\x00\x00\x00\x02\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, n, err := DecodeHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if n > int64(len(data)) {
			t.Fatalf("label of %d bytes from %d", n, len(data))
		}
		again, err := EncodeHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		h2, _, err := DecodeHeader(bytes.NewReader(again))
		if err != nil || h2.DataLen() != h.DataLen() || len(h2.Entries) != len(h.Entries) {
			t.Fatalf("re-encoded header differs: %v", err)
		}
	})
}

// Labels written before fixity algorithms were named kept the whole-file
// hash under "sha256"; they still decode, into Fixity, next to new labels.
func TestHeaderFixityLegacyKey(t *testing.T) {
	b, err := EncodeHeader(&Header{Volume: "T00000", Seq: 1, Entries: []Entry{
		{Path: "/old", Size: 3, LegacySHA256: "sha256:ab"},
		{Path: "/new", Offset: 3, Size: 5, Fixity: "blake3:cd"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"sha256":"sha256:ab"`)) || !bytes.Contains(b, []byte(`"fixity":"blake3:cd"`)) {
		t.Fatalf("label %s", b)
	}
	h, _, err := DecodeHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"sha256:ab", "blake3:cd"} {
		if e := h.Entries[i]; e.Fixity != want || e.LegacySHA256 != "" {
			t.Errorf("entry %d: fixity %q legacy %q, want %q", i, e.Fixity, e.LegacySHA256, want)
		}
	}
}
