package wire

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

// A hand-encoded Request must decode to what encoding/json's encoding of
// it decodes to: the same fields, the same strings (invalid UTF-8
// replaced alike).
func checkRequestJSON(t *testing.T, r Request) {
	t.Helper()
	ours := r.appendJSON(nil)
	ref, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got, want Request
	if err := json.Unmarshal(ours, &got); err != nil {
		t.Fatalf("%q does not decode: %v", ours, err)
	}
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q decodes to %+v, encoding/json's %q to %+v", ours, got, ref, want)
	}
}

func TestRequestJSON(t *testing.T) {
	for _, r := range []Request{
		{},
		{Op: "read", Token: "abc.def", Device: "d0", Object: "0000000000001234.00", Length: 65536},
		{Op: "write", Offset: -1, Length: 1 << 62, Verify: true, Handle: true, Ring: true},
		{Op: "write", Source: &Source{Size: 5 << 30, Unit: 1 << 20, Width: 8, Stripe: 7}},
		{Op: "q\"uo\\te", Token: "\x00\x1f\n\r\t\x7f", Device: "é€😀", Object: "\xff\xfe bad \u2028\u2029 <&>"},
	} {
		checkRequestJSON(t, r)
	}
}

func FuzzRequestJSON(f *testing.F) {
	f.Add("read", "tok", "d0", "obj", int64(0), int64(65536), false, false, false, int64(-1))
	f.Add("w\"\\", "\x00\xff", "\u2028", "é", int64(-5), int64(0), true, true, true, int64(3))
	f.Fuzz(func(t *testing.T, op, tok, dev, obj string, off, n int64, verify, handle, ring bool, size int64) {
		r := Request{Op: op, Token: tok, Device: dev, Object: obj, Offset: off, Length: n, Verify: verify, Handle: handle, Ring: ring}
		if size >= 0 {
			r.Source = &Source{Size: size, Unit: n, Width: int(off), Stripe: int(size % 7)}
		}
		checkRequestJSON(t, r)
	})
}

// A request sent from a new goroutine, as a tape server reading files
// ahead and a put's stripes send them: by hand, and by the JSON library
// (whose encoder's frame grows the new goroutine's stack).
func BenchmarkRequestNewGoroutine(b *testing.B) {
	req := Request{Op: "read", Token: strings.Repeat("t", 180), Device: "d0", Object: "0000000000001234.00", Length: 65536}
	for _, c := range []struct {
		name string
		v    any
	}{{"hand", req}, {"library", struct{ Request }{req}}} {
		b.Run(c.name, func(b *testing.B) {
			fw := NewWriter(io.Discard)
			done := make(chan error)
			b.ReportAllocs()
			for b.Loop() {
				go func() { done <- fw.Msg(c.v) }()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
