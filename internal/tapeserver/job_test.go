package tapeserver

import (
	"context"
	"testing"
)

// TestUnitWriterPieces: a stripe's bytes go out in pieces of at most
// piece bytes that never cross a unit's end, however they are written.
func TestUnitWriterPieces(t *testing.T) {
	for _, tc := range []struct {
		unit, piece, length int64
		writes              int
		want                []int64
	}{
		{20, 8, 50, 7, []int64{8, 8, 4, 8, 8, 4, 8, 2}},
		{4, 4, 10, 3, []int64{4, 4, 2}},
		{20, 8, 20, 20, []int64{8, 8, 4}},
	} {
		out := make(chan []byte, 100)
		u := &unitWriter{ctx: context.Background(), unit: tc.unit, piece: tc.piece, left: tc.length, out: out}
		data := make([]byte, tc.length)
		for i := range data {
			data[i] = byte(i)
		}
		for p := data; len(p) > 0; {
			n := min(len(p), tc.writes)
			if _, err := u.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := u.flush(); err != nil {
			t.Fatal(err)
		}
		close(out)
		var got []int64
		var back []byte
		for p := range out {
			got = append(got, int64(len(p)))
			back = append(back, p...)
		}
		if string(back) != string(data) || len(got) != len(tc.want) {
			t.Fatalf("unit %d piece %d: pieces %v, want %v", tc.unit, tc.piece, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("unit %d piece %d: pieces %v, want %v", tc.unit, tc.piece, got, tc.want)
			}
		}
	}
}
