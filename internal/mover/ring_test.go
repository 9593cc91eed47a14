package mover

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// ringLender lends data through ring as a stripe stream's pipe does:
// piece bytes at a time, in order, wrapping at the ring's end, waiting
// for the mover to take spans before it reuses their room.
type ringLender struct {
	mu        sync.Mutex
	freed     sync.Cond
	ring      []byte
	data      []byte
	piece     int
	next, pos int // data lent; where in the ring the next span starts
	free      int
}

func newRingLender(ring, data []byte, piece int) *ringLender {
	l := &ringLender{ring: ring, data: data, piece: piece, free: len(ring)}
	l.freed.L = &l.mu
	return l
}

func (l *ringLender) Lend(max int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == len(l.data) {
		return nil, io.EOF
	}
	n := min(max, l.piece, len(l.data)-l.next, len(l.ring)-l.pos)
	for l.free < n {
		l.freed.Wait()
	}
	b := l.ring[l.pos : l.pos+n]
	copy(b, l.data[l.next:])
	l.next += n
	l.pos = (l.pos + n) % len(l.ring)
	l.free -= n
	return b, nil
}

func (l *ringLender) Return(n int) {
	l.mu.Lock()
	l.free += n
	l.freed.Broadcast()
	l.mu.Unlock()
}

func (f *fixture) writeRing(t *testing.T, obj string, max int64, ring *moverconn.Ring, data []byte, piece int) (wire.Status, int64, error) {
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	var reported int64
	req := wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, obj, max, 5, time.Minute), Device: "d0", Object: obj}
	st, err := c.WriteRing(context.Background(), req, ring, newRingLender(ring.Bytes(), data, piece), func(n int) { reported += int64(n) })
	return st, reported, err
}

// A client on the mover's host names spans of its ring; the mover stores
// exactly the bytes lent, in order across the ring's wrap, with the
// receipt and CRC a stream gets, on uncapped and capped devices.
func TestWriteFromRing(t *testing.T) {
	data := make([]byte, 7*disk.ChunkSize+12345)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	for _, bw := range []int64{0, 1 << 30} {
		f := startWith(t, disk.Options{Capacity: 64 << 20, Bandwidth: bw})
		f.use("handle")
		ring, err := f.pool.Ring(3<<20 + 4096)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			size, piece int
		}{
			{len(data), wire.FrameSize}, {len(data), 1<<20 + 7}, {len(data), 4096}, {disk.ChunkSize + 1, 1 << 20}, {1, 1 << 20}, {0, 1 << 20},
		}
		for i, tc := range cases {
			obj := "r" + string(rune('a'+i))
			st, reported, err := f.writeRing(t, obj, int64(tc.size), ring, data[:tc.size], tc.piece)
			if err != nil {
				t.Fatalf("cap %d, %d bytes in pieces of %d: %v", bw, tc.size, tc.piece, err)
			}
			if st.Length != int64(tc.size) || reported != int64(tc.size) || !f.signer.CheckReceipt(st.Receipt, "d0", obj, st.Length, st.CRC32C) {
				t.Fatalf("cap %d, %d bytes: status %+v, progress %d", bw, tc.size, st, reported)
			}
			got, err := f.readRange(t, obj, 0, 0, true)
			if err != nil || !bytes.Equal(got, data[:tc.size]) {
				t.Fatalf("cap %d, %d bytes: read back %d: %v", bw, tc.size, len(got), err)
			}
		}
		if n := f.m.Stats().RingWrites; n != int64(len(cases)) {
			t.Errorf("cap %d: %d ring writes counted, want %d", bw, n, len(cases))
		}
		f.pool.PutRing(ring)
	}
}

// A write from a ring that cannot be done is refused with a clear error,
// leaves no object behind, and the connection stays in step.
func TestWriteFromRingRefused(t *testing.T) {
	f := start(t)
	f.use("handle")
	ring, err := f.pool.Ring(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	data := bytes.Repeat([]byte("ringing"), 500000)
	if _, _, err := f.writeRing(t, "r", int64(len(data))-1, ring, data, wire.FrameSize); !errors.Is(err, api.ErrNoSpace) {
		t.Fatalf("more than the token allows: %v", err)
	}
	tok := f.tok(token.OpWrite, "r", int64(len(data)), 5, time.Minute)
	req := wire.Request{Op: token.OpWrite, Token: tok + "x", Device: "d0", Object: "r"}
	c, err := f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteRing(context.Background(), req, ring, newRingLender(ring.Bytes(), data, wire.FrameSize), nil); !errors.Is(err, api.ErrDenied) {
		t.Fatalf("a forged token: %v", err)
	}
	// A lender whose spans are not in the ring ends the stream.
	outside := newRingLender(make([]byte, 1<<20), data, wire.FrameSize)
	req.Token = tok
	if _, err := c.WriteRing(context.Background(), req, ring, outside, nil); err == nil || !strings.Contains(err.Error(), "outside the ring") {
		t.Fatalf("a span outside the ring: %v", err)
	}
	f.pool.Put(c)
	if _, _, err := f.writeRing(t, "ok", int64(len(data)), ring, data, wire.FrameSize); err != nil {
		t.Fatalf("the write after them: %v", err)
	}
	del(t, f, "ok")

	// Spoken by hand: a span beyond the ring's end, then a good write on
	// the same connection.
	raw, err := net.Dial("unix", f.ep.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	uc := raw.(*net.UnixConn)
	shared := sourceFile(t, make([]byte, 2<<20)) // any regular file serves as a ring
	bw := bufio.NewWriter(raw)
	fw, fr := wire.NewWriter(bw), wire.NewReader(bufio.NewReader(raw))
	send := func(req wire.Request) {
		if err := fw.Msg(req); err != nil || bw.Flush() != nil {
			t.Fatal(err)
		}
		var st wire.Status
		if err := fr.ReadMsg(&st); err != nil || !st.OK {
			t.Fatalf("%+v: %v", st, err)
		}
		if err := wire.SendFile(uc, wire.RingFile, shared); err != nil {
			t.Fatal(err)
		}
	}
	send(wire.Request{Op: token.OpWrite, Token: tok, Device: "d0", Object: "r", Ring: true})
	fw.Ring(wire.RingSpan{Offset: 1 << 20, Length: 1<<20 + 1})
	fw.Ring(wire.RingSpan{Offset: 0, Length: 10}) // skipped: the write has failed
	fw.End(0)
	bw.Flush()
	var st wire.Status
	var se *wire.StatusError
	if err := fr.ReadMsg(&st); !errors.As(err, &se) || se.Status.Code != "invalid" || !strings.Contains(err.Error(), "ring ended inside the span") {
		t.Fatalf("a span past the ring's end: %+v, %v", st, err)
	}
	send(wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, "r2", 10, 5, time.Minute), Device: "d0", Object: "r2", Ring: true})
	fw.Ring(wire.RingSpan{Offset: 0, Length: 10})
	fw.End(0)
	bw.Flush()
	if err := fr.ReadMsg(&st); err != nil || !st.More || st.Length != 10 {
		t.Fatalf("ack: %+v, %v", st, err)
	}
	if err := fr.ReadMsg(&st); err != nil || st.Length != 10 {
		t.Fatalf("after a refused ring write, the next one: %+v, %v", st, err)
	}
	del(t, f, "r2")
	if _, err := f.readRange(t, "r", 0, 0, false); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("the refused object is there: %v", err)
	}
	if _, used, _ := f.m.devices["d0"].Usage(); used != 0 {
		t.Fatalf("%d bytes left on the device", used)
	}

	// Over TCP the mover cannot take a ring and says so.
	f.use("tcp")
	c, err = f.pool.Get(context.Background(), f.ep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.pool.Put(c)
	req = wire.Request{Op: token.OpWrite, Token: f.tok(token.OpWrite, "t", 10, 5, time.Minute), Device: "d0", Object: "t", Ring: true}
	if _, err := c.Do(context.Background(), req); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "Unix socket") {
		t.Fatalf("a write from a ring over TCP: %v", err)
	}
}
