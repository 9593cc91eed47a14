package wire

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
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

// FuzzReader feeds arbitrary bytes to the frame reader: it must never panic
// or allocate beyond its limits, whatever a peer sends.
func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Data([]byte("seed"))
	w.End(1)
	w.Msg(Status{OK: true})
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
			case TypeMsg, TypeError:
				var st Status
				if err := r.Decode(h, &st); err != nil {
					return
				}
			}
		}
	})
}
