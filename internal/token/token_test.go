package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	s := NewSigner([]byte("secret"))
	now := time.Unix(1000, 0)
	c := Claims{Op: OpWrite, Device: "d0", Object: "o1", MaxLen: 10, Epoch: 3, Expires: 2000}
	tok := s.Sign(c)
	got, err := s.Check(tok, OpWrite, "d0", "o1", now)
	if err != nil || got != c {
		t.Fatalf("check: %v %+v", err, got)
	}
	cases := []struct {
		name         string
		tok          string
		op, dev, obj string
		now          time.Time
		want         error
	}{
		{"wrong op", tok, OpRead, "d0", "o1", now, ErrScope},
		{"wrong object", tok, OpWrite, "d0", "o2", now, ErrScope},
		{"expired", tok, OpWrite, "d0", "o1", time.Unix(2001, 0), ErrExpired},
		{"tampered", tok[:len(tok)-2] + "AA", OpWrite, "d0", "o1", now, ErrInvalid},
		{"other key", NewSigner([]byte("other")).Sign(c), OpWrite, "d0", "o1", now, ErrInvalid},
		{"garbage", "not-a-token", OpWrite, "d0", "o1", now, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Check(tc.tok, tc.op, tc.dev, tc.obj, tc.now); !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
}

func TestReceipt(t *testing.T) {
	s := NewSigner([]byte("k"))
	r := s.Receipt("d", "o", 5, 0xabc)
	if !s.CheckReceipt(r, "d", "o", 5, 0xabc) {
		t.Fatal("valid receipt rejected")
	}
	if s.CheckReceipt(r, "d", "o", 6, 0xabc) || s.CheckReceipt(r, "d", "o", 5, 0xabd) {
		t.Fatal("receipt accepted for other length/crc")
	}
}

func FuzzVerify(f *testing.F) {
	s := NewSigner([]byte("k"))
	f.Add(s.Sign(Claims{Op: OpRead, Expires: 5}))
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, tok string) {
		s.Verify(tok, time.Unix(0, 0))
	})
}

// The pooled MACs are the MACs: many goroutines signing at once get what
// a fresh HMAC of the key computes, and each other's tokens verify.
func TestMACsConcurrent(t *testing.T) {
	s := NewSigner([]byte("secret"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				msg := []byte(fmt.Sprintf("m%d.%d", g, i))
				m := hmac.New(sha256.New, s.key)
				m.Write(msg)
				if got := s.mac(msg); !hmac.Equal(got, m.Sum(nil)) {
					t.Errorf("mac of %q differs from a fresh HMAC", msg)
					return
				}
				c := Claims{Op: OpWrite, Device: "d", Object: string(msg), Expires: 2000}
				if _, err := s.Check(s.Sign(c), OpWrite, "d", string(msg), time.Unix(1000, 0)); err != nil {
					t.Errorf("check: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSmallFileMACs is the four MACs of a small file's put (its token
// signed and checked, its receipt made and checked) over a token's body;
// "fresh" makes a new HMAC for each, as the signer did before it pooled
// them.
func BenchmarkSmallFileMACs(b *testing.B) {
	s := NewSigner([]byte("secret"))
	c := Claims{Op: OpWrite, Device: "d3", Object: "0000001234.0.0", MaxLen: 4096, Epoch: 1, Expires: 2000, User: "alice", UID: 1000}
	body := []byte(s.Sign(c))
	b.Run("pooled", func(b *testing.B) {
		for b.Loop() {
			for range 4 {
				s.mac(body)
			}
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			for range 4 {
				m := hmac.New(sha256.New, s.key)
				m.Write(body)
				m.Sum(nil)
			}
		}
	})
}
