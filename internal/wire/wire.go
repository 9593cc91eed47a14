// Package wire owns Strata's data-plane framing: the byte format spoken
// between clients, movers and the core over raw TCP.
//
// Bulk data never rides HTTP: one frame format carries control messages,
// data and errors, each data frame with its own CRC32C so corruption on the
// wire is caught at the frame that carried it. A frame is
//
//	type u8 | reserved [3]u8 | length u32 | crc32c u32 | payload [length]byte
//
// all big-endian. For TypeData the CRC covers the payload; for TypeEnd the
// payload is empty and the CRC is that of the whole stream it closes, so a
// receiver checks both each piece and the total. For TypeRing (a write
// whose bytes wait in memory shared with the mover, see Request.Ring) the
// payload is a RingSpan's 8 bytes and the CRC covers them.
//
// Control messages are JSON, encoded with github.com/goccy/go-json, the
// control API's codec: a read's request and status cost a quarter of
// what encoding/json takes (BenchmarkMessages: 1.9–2.2 against 8.1–9.8
// µs), and a small object's transfer is little else. A Request, sent
// mostly from new goroutines, is encoded by hand (request_json.go says
// why).
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	json "github.com/goccy/go-json"
	"golang.org/x/sys/unix"
)

// Frame types.
// FrameSize is the data frame size senders use: large enough to amortise
// per-frame costs, small enough that a CRC failure costs little to resend.
const FrameSize = 1 << 20

const (
	TypeData  byte = 1 // payload is data; CRC over the payload
	TypeEnd   byte = 2 // end of a data stream; CRC of the whole stream
	TypeError byte = 3 // payload is a JSON Status with the error
	TypeMsg   byte = 4 // payload is a JSON control message
	TypeRing  byte = 5 // payload is a RingSpan: data in the shared ring
)

// HeaderSize is the fixed size of a frame header.
const HeaderSize = 12

// MaxData bounds a data frame; MaxMsg bounds a control or error frame. A
// peer announcing more is broken or hostile, and the connection is dropped
// before anything is allocated.
const (
	MaxData = 16 << 20
	MaxMsg  = 1 << 20
)

// Castagnoli is the CRC32C table used everywhere in Strata.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrFrame reports a malformed frame: the connection must not be reused.
var ErrFrame = errors.New("wire: malformed frame")

// Header is a decoded frame header.
type Header struct {
	Type   byte
	Length uint32
	CRC    uint32
}

// PutHeader encodes h into b, which must be at least HeaderSize long.
func PutHeader(b []byte, h Header) {
	b[0] = h.Type
	b[1], b[2], b[3] = 0, 0, 0
	binary.BigEndian.PutUint32(b[4:8], h.Length)
	binary.BigEndian.PutUint32(b[8:12], h.CRC)
}

// ParseHeader decodes and validates a frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: short header (%d bytes)", ErrFrame, len(b))
	}
	h := Header{Type: b[0], Length: binary.BigEndian.Uint32(b[4:8]), CRC: binary.BigEndian.Uint32(b[8:12])}
	if b[1]|b[2]|b[3] != 0 {
		return h, fmt.Errorf("%w: reserved bytes set", ErrFrame)
	}
	switch h.Type {
	case TypeData:
		if h.Length > MaxData {
			return h, fmt.Errorf("%w: data frame of %d bytes exceeds %d", ErrFrame, h.Length, MaxData)
		}
	case TypeEnd:
		if h.Length != 0 {
			return h, fmt.Errorf("%w: end frame with payload", ErrFrame)
		}
	case TypeRing:
		if h.Length != RingSpanSize {
			return h, fmt.Errorf("%w: ring frame of %d bytes, want %d", ErrFrame, h.Length, RingSpanSize)
		}
	case TypeError, TypeMsg:
		if h.Length > MaxMsg {
			return h, fmt.Errorf("%w: message of %d bytes exceeds %d", ErrFrame, h.Length, MaxMsg)
		}
	default:
		return h, fmt.Errorf("%w: unknown type %d", ErrFrame, h.Type)
	}
	return h, nil
}

// Status is the JSON payload of TypeError frames and of the final reply to a
// request. Code is one of the api error codes so the client can map it back
// to a sentinel error.
type Status struct {
	OK      bool   `json:"ok"`
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
	Length  int64  `json:"length,omitempty"`
	CRC32C  uint32 `json:"crc32c,omitempty"`
	Receipt string `json:"receipt,omitempty"`
	// More marks a progress report during a write from a client's file
	// (Request.Source: Length bytes are stored so far) or from its ring
	// (Request.Ring: Length bytes are taken so far), and another Status
	// follows.
	More bool `json:"more,omitempty"`
}

// Writer writes frames to an underlying (buffered) writer.
type Writer struct {
	w   io.Writer
	raw io.Writer // the connection under w, for large payloads; may be nil
	hdr [HeaderSize]byte
}

// NewWriter returns a frame writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewConnWriter returns a frame writer on bw, a buffer over the connection
// c. Large data frames bypass the buffer: header and payload go out in one
// writev, so the payload is never copied into the buffer.
func NewConnWriter(bw *bufio.Writer, c net.Conn) *Writer { return &Writer{w: bw, raw: c} }

// directMin is the payload size from which data frames bypass the buffer.
const directMin = 64 << 10

// header writes a frame header; n payload bytes must follow.
func (fw *Writer) header(t byte, n uint32, crc uint32) error {
	PutHeader(fw.hdr[:], Header{Type: t, Length: n, CRC: crc})
	_, err := fw.w.Write(fw.hdr[:])
	return err
}

func (fw *Writer) frame(t byte, payload []byte, crc uint32) error {
	if err := fw.header(t, uint32(len(payload)), crc); err != nil {
		return err
	}
	if len(payload) > 0 {
		if _, err := fw.w.Write(payload); err != nil {
			return err
		}
	}
	return nil
}

// Data writes one data frame and returns the payload's CRC32C.
func (fw *Writer) Data(p []byte) (uint32, error) {
	c := crc32.Checksum(p, Castagnoli)
	return c, fw.DataCRC(p, c)
}

// DataCRC writes one data frame whose payload's CRC32C is already known
// (a chunk verified at rest): the data is not scanned again.
func (fw *Writer) DataCRC(p []byte, crc uint32) error {
	if len(p) > MaxData {
		return fmt.Errorf("wire: data frame of %d bytes exceeds %d", len(p), MaxData)
	}
	if fw.raw == nil || len(p) < directMin {
		return fw.frame(TypeData, p, crc)
	}
	if err := fw.Flush(); err != nil {
		return err
	}
	PutHeader(fw.hdr[:], Header{Type: TypeData, Length: uint32(len(p)), CRC: crc})
	if bw, ok := fw.raw.(buffersWriter); ok {
		_, err := bw.WriteBuffers(fw.hdr[:], p)
		return err
	}
	bufs := net.Buffers{fw.hdr[:], p}
	_, err := bufs.WriteTo(fw.raw)
	return err
}

// buffersWriter is a connection that writes several buffers at once
// itself (pki.Conn: a TLS connection gathering its records), where
// net.Buffers would write them one by one.
type buffersWriter interface {
	WriteBuffers(bufs ...[]byte) (int64, error)
}

// DataFile writes one data frame whose payload is n bytes of f at off and
// whose CRC32C is crc. On a connection writer the payload goes from the page
// cache to the socket by sendfile, never through user memory.
func (fw *Writer) DataFile(f *os.File, off, n int64, crc uint32) error {
	if n > MaxData {
		return fmt.Errorf("wire: data frame of %d bytes exceeds %d", n, MaxData)
	}
	if err := fw.header(TypeData, uint32(n), crc); err != nil {
		return err
	}
	if sc, ok := fw.raw.(syscall.Conn); ok {
		if err := fw.Flush(); err != nil {
			return err
		}
		return sendfile(sc, f, off, n)
	}
	if fw.raw != nil {
		// A connection the kernel cannot sendfile to (TLS: the bytes go
		// through the cipher): read the frame into one buffer and hand it
		// to the connection whole, rather than through the 32 KiB
		// buffered writer a piece at a time.
		if err := fw.Flush(); err != nil {
			return err
		}
		bp := framePool.Get().(*[]byte)
		defer framePool.Put(bp)
		w, err := io.CopyBuffer(fw.raw, io.NewSectionReader(f, off, n), *bp)
		if err == nil && w < n {
			err = fmt.Errorf("wire: %s: %d of %d bytes: %w", f.Name(), w, n, io.ErrUnexpectedEOF)
		}
		return err
	}
	w, err := io.Copy(fw.w, io.NewSectionReader(f, off, n))
	if err == nil && w < n {
		err = fmt.Errorf("wire: %s: %d of %d bytes: %w", f.Name(), w, n, io.ErrUnexpectedEOF)
	}
	return err
}

// sendfile copies n bytes of f at off to the socket dst inside the kernel.
// (net.TCPConn.ReadFrom does this for TCP only, and only from the file's
// current offset; Unix sockets need it too.)
func sendfile(dst syscall.Conn, f *os.File, off, n int64) error {
	rc, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	src := int(f.Fd())
	var sent int64
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for sent < n {
			k, e := unix.Sendfile(int(fd), src, &off, int(min(n-sent, 1<<30)))
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false // wait until the socket takes more
			case e != nil:
				serr = fmt.Errorf("wire: sendfile %s: %w", f.Name(), e)
				return true
			case k == 0:
				serr = fmt.Errorf("wire: sendfile %s: %d of %d bytes: %w", f.Name(), sent, n, io.ErrUnexpectedEOF)
				return true
			}
			sent += int64(k)
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

// RingSpanSize is the size of a TypeRing frame's payload.
const RingSpanSize = 8

// RingSpan is the payload of a TypeRing frame: the next Length bytes of a
// write lie at Offset in the shared ring (Request.Ring).
type RingSpan struct {
	Offset, Length uint32
}

// Ring writes one TypeRing frame naming sp.
func (fw *Writer) Ring(sp RingSpan) error {
	var b [RingSpanSize]byte
	binary.BigEndian.PutUint32(b[0:4], sp.Offset)
	binary.BigEndian.PutUint32(b[4:8], sp.Length)
	return fw.frame(TypeRing, b[:], crc32.Checksum(b[:], Castagnoli))
}

// ParseRingSpan decodes a TypeRing frame's payload (read with Payload,
// which checked its CRC) and refuses a span longer than a data frame may
// be.
func ParseRingSpan(p []byte) (RingSpan, error) {
	if len(p) != RingSpanSize {
		return RingSpan{}, fmt.Errorf("%w: ring span of %d bytes", ErrFrame, len(p))
	}
	sp := RingSpan{Offset: binary.BigEndian.Uint32(p[0:4]), Length: binary.BigEndian.Uint32(p[4:8])}
	if sp.Length == 0 || sp.Length > MaxData {
		return sp, fmt.Errorf("%w: ring span of %d bytes (1 to %d)", ErrFrame, sp.Length, MaxData)
	}
	return sp, nil
}

// End closes a data stream whose total CRC32C is crc.
func (fw *Writer) End(crc uint32) error { return fw.frame(TypeEnd, nil, crc) }

// Msg writes v as a JSON control message.
func (fw *Writer) Msg(v any) error { return fw.json(TypeMsg, v) }

// Error writes an error frame carrying st.
func (fw *Writer) Error(st Status) error { st.OK = false; return fw.json(TypeError, st) }

// WriteRequest writes the whole of a write of at most one frame: request
// r, a data frame of p (none if p is empty) and the End frame carrying p's
// CRC32C, which it returns; the caller flushes. On a connection writer
// with nothing buffered and p large enough to bypass the buffer, the three
// go out in one writev: written apart (the request flushed before the
// payload's writev, the End frame after) they cost two more system calls
// and wake the mover up to three times for one small object.
func (fw *Writer) WriteRequest(r Request, p []byte) (uint32, error) {
	crc := crc32.Checksum(p, Castagnoli)
	b, buffered := fw.w.(interface{ Buffered() int })
	if fw.raw == nil || len(p) < directMin || len(p) > MaxData || !buffered || b.Buffered() != 0 {
		if err := fw.Msg(r); err != nil {
			return 0, err
		}
		if len(p) > 0 {
			if err := fw.DataCRC(p, crc); err != nil {
				return 0, err
			}
		}
		return crc, fw.End(crc)
	}
	bp := msgBufs.Get().(*[]byte)
	defer msgBufs.Put(bp)
	m := append((*bp)[:0], make([]byte, HeaderSize)...)
	m = r.appendJSON(m)
	*bp = m
	n := len(m) - HeaderSize
	if n > MaxMsg {
		return 0, fmt.Errorf("wire: message of %d bytes exceeds %d", n, MaxMsg)
	}
	PutHeader(m[:HeaderSize], Header{Type: TypeMsg, Length: uint32(n), CRC: crc32.Checksum(m[HeaderSize:], Castagnoli)})
	var data, end [HeaderSize]byte
	PutHeader(data[:], Header{Type: TypeData, Length: uint32(len(p)), CRC: crc})
	PutHeader(end[:], Header{Type: TypeEnd, CRC: crc})
	head := append(m, data[:]...)
	*bp = head
	if bw, ok := fw.raw.(buffersWriter); ok {
		_, err := bw.WriteBuffers(head, p, end[:])
		return crc, err
	}
	bufs := net.Buffers{head, p, end[:]}
	_, err := bufs.WriteTo(fw.raw)
	return crc, err
}

// msgBufs holds the buffers hand-encoded messages are built in.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (fw *Writer) json(t byte, v any) error {
	var b []byte
	if r, ok := v.(Request); ok {
		bp := msgBufs.Get().(*[]byte)
		defer msgBufs.Put(bp)
		b = r.appendJSON((*bp)[:0])
		*bp = b
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Errorf("wire: encode message: %w", err)
		}
	}
	if len(b) > MaxMsg {
		return fmt.Errorf("wire: message of %d bytes exceeds %d", len(b), MaxMsg)
	}
	return fw.frame(t, b, crc32.Checksum(b, Castagnoli))
}

// Reader reads frames from an underlying (buffered) reader.
type Reader struct {
	r   io.Reader
	hdr [HeaderSize]byte
}

// NewReader returns a frame reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next reads the next frame header. For TypeData the caller must then read
// exactly h.Length payload bytes with Payload; for TypeMsg and TypeError use
// Decode.
func (fr *Reader) Next() (Header, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(fr.hdr[:])
}

// Payload reads h's payload into buf (len(buf) >= h.Length) and checks its
// CRC. It returns the payload slice.
func (fr *Reader) Payload(h Header, buf []byte) ([]byte, error) {
	if int(h.Length) > len(buf) {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds buffer %d", ErrFrame, h.Length, len(buf))
	}
	p := buf[:h.Length]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		return nil, err
	}
	if c := crc32.Checksum(p, Castagnoli); c != h.CRC {
		return nil, &ChecksumError{Want: h.CRC, Got: c}
	}
	return p, nil
}

// Decode reads a TypeMsg or TypeError payload as JSON into v.
func (fr *Reader) Decode(h Header, v any) error {
	if h.Type != TypeMsg && h.Type != TypeError {
		return fmt.Errorf("%w: expected message, got type %d", ErrFrame, h.Type)
	}
	b := make([]byte, h.Length)
	p, err := fr.Payload(h, b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: bad message: %v", ErrFrame, err)
	}
	return nil
}

// ReadMsg reads the next frame, which must be a message or an error. An
// error frame is returned as *StatusError.
func (fr *Reader) ReadMsg(v any) error {
	h, err := fr.Next()
	if err != nil {
		return err
	}
	switch h.Type {
	case TypeMsg:
		return fr.Decode(h, v)
	case TypeError:
		var st Status
		if err := fr.Decode(h, &st); err != nil {
			return err
		}
		return &StatusError{Status: st}
	default:
		return fmt.Errorf("%w: expected message, got type %d", ErrFrame, h.Type)
	}
}

// ChecksumError reports a CRC mismatch on a frame or stream.
type ChecksumError struct{ Want, Got uint32 }

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("wire: checksum mismatch: want crc32c %08x, got %08x", e.Want, e.Got)
}

// StatusError is an error reported by the peer in an error frame.
type StatusError struct{ Status Status }

func (e *StatusError) Error() string { return e.Status.Error }

// OpVerify asks a mover to read a whole object and check it against its
// stored CRC32Cs, sending no data: the Status says the object is whole
// (with its length and CRC32C) or names the damage. A read token grants it.
// The core verifies a copy a reader reports damaged, and scrubs, this way,
// so checking data at rest moves no data off the mover's host.
const OpVerify = "verify"

// Request opens a transfer on a mover connection. A connection carries any
// number of requests, one after the other.
type Request struct {
	Op     string `json:"op"` // token.OpWrite, OpRead, OpDelete; OpVerify
	Token  string `json:"token"`
	Device string `json:"device"`
	Object string `json:"object"`
	Offset int64  `json:"offset,omitempty"` // read: first byte
	Length int64  `json:"length,omitempty"` // read: bytes wanted, 0 = to the end
	// Verify asks a read to check every chunk against its stored CRC32C
	// before sending it, so damage at rest is reported by the mover as
	// corruption of the object rather than seen by the reader as a
	// damaged frame. Readers ask for it after a frame failed its check.
	Verify bool `json:"verify,omitempty"`
	// Handle asks a read for the object's open file instead of a stream.
	// Only a client on a Unix socket, so on the mover's host, asks; the
	// mover answers with one marker byte before its Status, HandleFile
	// with the file attached (SCM_RIGHTS) or HandleStream, and then
	// streams as for any read.
	Handle bool `json:"handle,omitempty"`
	// Source asks a write to read the client's own file instead of a
	// stream. Only a client on a Unix socket asks; the mover, once it has
	// accepted the write, answers with a Status (OK), the client passes
	// its open file (one byte, SourceFile, with SCM_RIGHTS), and the mover
	// reads, checksums and stores the part Source names, reporting
	// progress (Status.More) until its final Status.
	Source *Source `json:"source,omitempty"`
	// Ring asks a write to take its bytes from memory the client shares
	// (a memfd) instead of data frames. Only a client on a Unix socket
	// asks; the mover, once it has accepted the write, answers with a
	// Status (OK), the client passes the ring's file (one byte, RingFile,
	// with SCM_RIGHTS), and then sends TypeRing frames, each naming where
	// in the ring its next bytes are, and End. The mover copies each
	// span out, checksums and stores it, and acknowledges it with a
	// Status (More, Length: bytes taken so far) so the client may reuse
	// the space; its final Status follows End. The End frame's CRC is not
	// checked: nothing crossed a wire, and the mover checksums what it
	// copied.
	Ring bool `json:"ring,omitempty"`
}

// Source names the part of a client's file a write stores: stripe Stripe
// of Width, the file's first Size bytes dealt out in units of Unit bytes
// (units Stripe, Stripe+Width, Stripe+2·Width, …).
type Source struct {
	Size   int64 `json:"size"`
	Unit   int64 `json:"unit"`
	Width  int   `json:"width"`
	Stripe int   `json:"stripe"`
}

// Check reports a Source that names no part of a file.
func (s Source) Check() error {
	if s.Size < 0 || s.Unit <= 0 || s.Width < 1 || s.Stripe < 0 || s.Stripe >= s.Width {
		return fmt.Errorf("wire: bad source: size %d, unit %d, stripe %d of %d", s.Size, s.Unit, s.Stripe, s.Width)
	}
	return nil
}

// Len is the number of bytes of the file in the stripe.
func (s Source) Len() int64 {
	full := s.Size / s.Unit // complete units
	n := full / int64(s.Width) * s.Unit
	if r := full % int64(s.Width); int64(s.Stripe) < r {
		n += s.Unit
	} else if int64(s.Stripe) == r {
		n += s.Size % s.Unit
	}
	return n
}

// SourceFile is the byte a client sends with its file for a write with
// Request.Source.
const SourceFile byte = 'F'

// RingFile is the byte a client sends with its ring for a write with
// Request.Ring.
const RingFile byte = 'R'

// Markers a mover sends before its reply to a read with Request.Handle.
const (
	HandleFile   byte = 'H' // the object's file is attached; the Status ends the reply
	HandleStream byte = 'S' // no file (a capped device, an error): the read goes on as a stream
)

// Flush flushes the underlying writer if it buffers.
func (fw *Writer) Flush() error {
	if f, ok := fw.w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// framePool holds buffers of a usual data frame (1 MiB), for DataFile on
// connections without sendfile.
var framePool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}
