package wire

import (
	"bufio"
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	payloads := [][]byte{{}, []byte("x"), bytes.Repeat([]byte("abc"), 100000)}
	var total uint32
	for _, p := range payloads {
		if _, err := w.Data(p); err != nil {
			t.Fatal(err)
		}
		total = crc32.Update(total, Castagnoli, p)
	}
	if err := w.End(total); err != nil {
		t.Fatal(err)
	}
	if err := w.Msg(map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Error(Status{Code: "not_found", Error: "gone"}); err != nil {
		t.Fatal(err)
	}

	r := NewReader(&buf)
	scratch := make([]byte, MaxData)
	var got uint32
	for _, p := range payloads {
		h, err := r.Next()
		if err != nil || h.Type != TypeData {
			t.Fatalf("next: %v %+v", err, h)
		}
		b, err := r.Payload(h, scratch)
		if err != nil || !bytes.Equal(b, p) {
			t.Fatalf("payload mismatch: %v", err)
		}
		got = crc32.Update(got, Castagnoli, b)
	}
	h, err := r.Next()
	if err != nil || h.Type != TypeEnd || h.CRC != got {
		t.Fatalf("end: %v %+v want crc %x", err, h, got)
	}
	var m map[string]int
	if err := r.ReadMsg(&m); err != nil || m["a"] != 1 {
		t.Fatalf("msg: %v %v", err, m)
	}
	var st Status
	err = r.ReadMsg(&st)
	var se *StatusError
	if !errors.As(err, &se) || se.Status.Code != "not_found" || se.Status.Error != "gone" {
		t.Fatalf("error frame: %v", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestCorruptPayloadDetected(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewWriter(&buf).Data([]byte("hello world")); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[HeaderSize+3] ^= 0x01
	r := NewReader(bytes.NewReader(b))
	h, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Payload(h, make([]byte, 64))
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("want checksum error, got %v", err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	cases := []struct {
		name string
		h    []byte
	}{
		{"short", []byte{1, 0, 0}},
		{"unknown type", []byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"reserved", []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"huge data", []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"end with payload", []byte{2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
		{"huge msg", []byte{4, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseHeader(c.h); !errors.Is(err, ErrFrame) {
				t.Fatalf("want ErrFrame, got %v", err)
			}
		})
	}
}

func TestRingFrames(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	spans := []RingSpan{{0, 1}, {7 << 20, 1 << 20}, {1<<32 - 1, MaxData}}
	for _, sp := range spans {
		if err := w.Ring(sp); err != nil {
			t.Fatal(err)
		}
	}
	w.Ring(RingSpan{0, 0})
	w.Ring(RingSpan{0, MaxData + 1})
	r := NewReader(&buf)
	p := make([]byte, RingSpanSize)
	for i := range len(spans) + 2 {
		h, err := r.Next()
		if err != nil || h.Type != TypeRing {
			t.Fatalf("frame %d: %+v, %v", i, h, err)
		}
		b, err := r.Payload(h, p)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := ParseRingSpan(b)
		switch {
		case i < len(spans) && (err != nil || sp != spans[i]):
			t.Errorf("span %d: %+v, %v; want %+v", i, sp, err, spans[i])
		case i >= len(spans) && !errors.Is(err, ErrFrame):
			t.Errorf("span %+v: %v, want ErrFrame", sp, err)
		}
	}
	// A ring frame of another size is malformed at its header.
	var hb [HeaderSize]byte
	PutHeader(hb[:], Header{Type: TypeRing, Length: 9})
	if _, err := ParseHeader(hb[:]); !errors.Is(err, ErrFrame) {
		t.Errorf("9-byte ring frame: %v, want ErrFrame", err)
	}
}

// FuzzReader feeds arbitrary bytes to the frame reader: it must never panic
// or allocate beyond its limits, whatever a peer sends.
func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Data([]byte("seed"))
	w.End(1)
	w.Msg(Status{OK: true})
	w.Ring(RingSpan{Offset: 1 << 20, Length: 1 << 20})
	f.Add(buf.Bytes())
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		scratch := make([]byte, 4096)
		for i := 0; i < 64; i++ {
			h, err := r.Next()
			if err != nil {
				return
			}
			switch h.Type {
			case TypeData:
				if int(h.Length) > len(scratch) {
					return
				}
				if _, err := r.Payload(h, scratch); err != nil {
					return
				}
			case TypeRing:
				p, err := r.Payload(h, scratch)
				if err != nil {
					return
				}
				if sp, err := ParseRingSpan(p); err == nil && (sp.Length == 0 || sp.Length > MaxData) {
					t.Fatalf("span %+v accepted", sp)
				}
			case TypeMsg, TypeError:
				var st Status
				if err := r.Decode(h, &st); err != nil {
					return
				}
			}
		}
	})
}

// A read's control messages, as every small object's read and write pays
// them: the request (with its token) and the status.
func BenchmarkMessages(b *testing.B) {
	req := Request{Op: "read", Token: strings.Repeat("t", 180), Device: "d0", Object: "0000000000001234.00", Length: 65536}
	st := Status{OK: true, Length: 65536, CRC32C: 0xdeadbeef}
	var buf bytes.Buffer
	fw, fr := NewWriter(&buf), NewReader(&buf)
	b.ReportAllocs()
	for b.Loop() {
		if err := fw.Msg(req); err != nil {
			b.Fatal(err)
		}
		if err := fw.Msg(st); err != nil {
			b.Fatal(err)
		}
		var q Request
		var s Status
		if err := fr.ReadMsg(&q); err != nil {
			b.Fatal(err)
		}
		if err := fr.ReadMsg(&s); err != nil {
			b.Fatal(err)
		}
	}
}

// countingWriter counts the writes that reach it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return w.Buffer.Write(p) }

// A whole small write, gathered or not, is the same bytes as its request,
// data and End frames written one by one, and reads back as them; a
// payload that bypasses the buffer goes out with its request and End
// frame in one gathered write (net.Buffers writes each buffer to a plain
// writer: three here, where a socket takes one writev).
func TestWriteRequest(t *testing.T) {
	req := Request{Op: "write", Token: "t", Device: "d0", Object: "o1"}
	for _, n := range []int{0, 100, directMin - 1, directMin, MaxData} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 13)
		}
		var want bytes.Buffer
		plain := NewWriter(&want)
		if err := plain.Msg(req); err != nil {
			t.Fatal(err)
		}
		crc := uint32(0)
		if n > 0 {
			var err error
			if crc, err = plain.Data(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := plain.End(crc); err != nil {
			t.Fatal(err)
		}

		var raw countingWriter
		bw := bufio.NewWriterSize(&raw, 32<<10)
		fw := &Writer{w: bw, raw: &raw}
		got, err := fw.WriteRequest(req, p)
		if err != nil || got != crc {
			t.Fatalf("%d bytes: crc %08x, %v; want %08x", n, got, err, crc)
		}
		if n >= directMin && raw.writes != 3 {
			t.Errorf("%d bytes: %d writes before the flush, want the gathered 3", n, raw.writes)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw.Bytes(), want.Bytes()) {
			t.Fatalf("%d bytes: %d bytes written, want %d as written one by one", n, raw.Len(), want.Len())
		}
		fr := NewReader(&raw)
		var back Request
		if h, err := fr.Next(); err != nil || h.Type != TypeMsg {
			t.Fatalf("%d bytes: first frame %+v, %v", n, h, err)
		} else if err := fr.Decode(h, &back); err != nil || back != req {
			t.Fatalf("%d bytes: request %+v, %v", n, back, err)
		}
		if n > 0 {
			h, err := fr.Next()
			if err != nil || h.Type != TypeData {
				t.Fatalf("%d bytes: data frame %+v, %v", n, h, err)
			}
			if q, err := fr.Payload(h, make([]byte, n)); err != nil || !bytes.Equal(q, p) {
				t.Fatalf("%d bytes: payload: %v", n, err)
			}
		}
		if h, err := fr.Next(); err != nil || h.Type != TypeEnd || h.CRC != crc {
			t.Fatalf("%d bytes: end frame %+v, %v", n, h, err)
		}
	}
	// Something already buffered: written in order behind it.
	var raw countingWriter
	bw := bufio.NewWriterSize(&raw, 32<<10)
	fw := &Writer{w: bw, raw: &raw}
	if err := fw.Msg(req); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.WriteRequest(req, make([]byte, directMin)); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	fr := NewReader(&raw)
	for _, want := range []byte{TypeMsg, TypeMsg, TypeData, TypeEnd} {
		h, err := fr.Next()
		if err != nil || h.Type != want {
			t.Fatalf("frame %+v, %v; want type %d", h, err, want)
		}
		if h.Length > 0 {
			if _, err := fr.Payload(h, make([]byte, h.Length)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
