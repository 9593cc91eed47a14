package pki

import (
	"context"
	"crypto/cipher"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/aesgcm"
)

// Channel is the movers' data channel. It opens with a TLS 1.3 handshake
// (crypto/tls: the certificates, their verification, client certificates
// where configured, all as for any TLS connection), then carries its
// bytes in frames of up to MaxFrame sealed with AES-128-GCM under keys
// exported from that handshake (RFC 8446 §7.5), one key and nonce
// sequence a direction. This is how DTLS-SRTP (RFC 5764) and NTS
// (RFC 8915) protect their traffic with TLS's authentication.
//
// Why not TLS records: a TLS record carries at most 16 KiB, and
// crypto/tls copies each record's plaintext into its own buffer before
// sealing it and copies every opened record out again; with the system
// calls 16 KiB records need (or the copies that gather them, as Conn
// does), a 4 GiB put or get over TLS cost about twice AES-GCM's own CPU
// beyond the same transfer over plain TCP (bench/auth.sh: 4.3 core-s
// each, against 2.0 for the cipher). A frame here is sealed straight from
// the caller's buffer into the one written to the socket, and opened
// straight into the caller's buffer when it is large enough: the same
// put then costs 1.1 times the cipher, the get 1.5 times. One stream of
// 1 MiB writes (go test -bench ChannelWrite): crypto/tls 1.2–1.4 GB/s,
// Conn 1.4–1.5, Channel 1.6–1.8 with crypto/cipher's GCM.
//
// The cipher is internal/aesgcm's: on CPUs with VAES and VPCLMULQDQ it
// seals and opens 2.2 times as fast as crypto/cipher's (whose AES-NI
// assembly was, after the copies, the largest cost a TLS put or get had
// beyond plain TCP); elsewhere it is crypto/cipher's. Both compute the
// same AES-128-GCM, so peers of either kind talk.
// A frame is authenticated before a byte of it is returned, so a stream
// cut, reordered, replayed or altered fails at the frame where it was.
//
// The wire, after the handshake:
//   - the server sends one TLS record (a byte), which the client reads
//     through crypto/tls: a refusal of the client's certificate arrives
//     as TLS's own alert there, not as a garbled frame; neither side
//     sends another TLS record, and neither reads past the last one (see
//     recordReader);
//   - then each direction is a sequence of frames: a 4-byte big-endian
//     length L, then L bytes of AES-128-GCM output (the plaintext and
//     its 16-byte tag), whose additional data is the length;
//   - frame n of a direction uses the key and IV exported with that
//     direction's label and the context n>>epochBits (8 bytes,
//     big-endian), and the nonce IV XOR n: a key seals at most 2^16
//     frames (64 GiB), within AES-GCM's limits (RFC 8446 §5.5).
//
// ALPN names the protocol (DataProtocol): a peer speaking plain TLS
// records on a data port is refused in the handshake.
type Channel struct {
	nc     net.Conn
	tc     *tls.Conn
	server bool

	hmu  sync.Mutex
	done bool
	herr error

	rmu   sync.Mutex
	in    half
	stage []byte // bytes read from the socket not yet taken: stage[spos:send]
	spos  int
	send  int
	plain []byte // an opened frame not yet all read
	fbuf  *[]byte
	rerr  error

	wmu  sync.Mutex
	out  half
	werr error
}

// DataProtocol is the data channel's ALPN name.
const DataProtocol = "strata-data/1"

// MaxFrame is the most plaintext one frame carries.
const MaxFrame = 256 << 10

const (
	tagSize   = 16
	lenSize   = 4
	epochBits = 16
	stageSize = 32 << 10
	// gatherCap is a write buffer: a frame of MaxFrame sealed, with room
	// for small frames before it (a header written with its payload).
	gatherCap = MaxFrame + 64<<10
	// flushAt is where gathered frames are sent: small ones (a frame
	// header, a message) leave with the next large one.
	flushAt = 64 << 10
)

var (
	framePool = sync.Pool{New: func() any { b := make([]byte, MaxFrame+tagSize); return &b }}
	sealPool  = sync.Pool{New: func() any { b := make([]byte, 0, gatherCap); return &b }}
	labels    = [2]string{"EXPORTER-strata-data client-write", "EXPORTER-strata-data server-write"}
)

// ErrFrame is a data channel frame that is malformed or fails
// authentication: the channel is of no further use.
var ErrFrame = errors.New("data channel: bad frame")

// DataClient starts the client side of a data channel on nc; the
// handshake runs on the first Read, Write or HandshakeContext.
func DataClient(nc net.Conn, cfg *tls.Config) *Channel {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{DataProtocol}
	return &Channel{nc: nc, tc: tls.Client(&recordReader{Conn: nc}, cfg)}
}

// DataServer starts the server side of a data channel on nc.
func DataServer(nc net.Conn, cfg *tls.Config) *Channel {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{DataProtocol}
	// A session ticket would be a TLS record sent after the handshake,
	// where the client expects frames.
	cfg.SessionTicketsDisabled = true
	return &Channel{nc: nc, tc: tls.Server(&recordReader{Conn: nc}, cfg), server: true}
}

// NewDataListener returns a listener whose connections are server
// Channels.
func NewDataListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &listener{Listener: ln, cfg: cfg, server: func(nc net.Conn, cfg *tls.Config) net.Conn { return DataServer(nc, cfg) }}
}

// HandshakeContext runs the handshake if it has not run: TLS 1.3, the
// protocol checked, the server's ready record, the keys.
func (c *Channel) HandshakeContext(ctx context.Context) error {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.done {
		return c.herr
	}
	c.done = true
	c.herr = c.handshake(ctx)
	return c.herr
}

func (c *Channel) handshake(ctx context.Context) error {
	if err := c.tc.HandshakeContext(ctx); err != nil {
		return err
	}
	cs := c.tc.ConnectionState()
	if cs.Version != tls.VersionTLS13 {
		return fmt.Errorf("data channel: TLS version %x, want 1.3", cs.Version)
	}
	if cs.NegotiatedProtocol != DataProtocol {
		return fmt.Errorf("data channel: the peer does not speak %s", DataProtocol)
	}
	var b [1]byte
	if c.server {
		if _, err := c.tc.Write([]byte{1}); err != nil {
			return err
		}
	} else if _, err := io.ReadFull(c.tc, b[:]); err != nil {
		return err
	} else if b[0] != 1 {
		return fmt.Errorf("%w: ready record %d", ErrFrame, b[0])
	}
	w, r := 0, 1
	if c.server {
		w, r = 1, 0
	}
	c.out = half{ekm: cs.ExportKeyingMaterial, label: labels[w]}
	c.in = half{ekm: cs.ExportKeyingMaterial, label: labels[r]}
	return nil
}

func (c *Channel) ready() error {
	c.hmu.Lock()
	done, err := c.done, c.herr
	c.hmu.Unlock()
	if done {
		return err
	}
	return c.HandshakeContext(context.Background())
}

// ConnectionState is the handshake's (the peer's certificates).
func (c *Channel) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// half is one direction's keys: frame seq uses the key of epoch
// seq>>epochBits.
type half struct {
	ekm   func(label string, context []byte, length int) ([]byte, error)
	label string
	aead  cipher.AEAD
	iv    [12]byte
	epoch uint64
	seq   uint64
}

// next returns the AEAD and nonce of the next frame.
func (h *half) next() (cipher.AEAD, [12]byte, error) {
	var nonce [12]byte
	if h.seq == 1<<63 {
		return nil, nonce, errors.New("data channel: frame sequence exhausted")
	}
	if e := h.seq >> epochBits; h.aead == nil || e != h.epoch {
		var ctx [8]byte
		binary.BigEndian.PutUint64(ctx[:], e)
		m, err := h.ekm(h.label, ctx[:], 16+12)
		if err != nil {
			return nil, nonce, fmt.Errorf("data channel: keys: %w", err)
		}
		if h.aead, err = aesgcm.New(m[:16]); err != nil {
			return nil, nonce, err
		}
		copy(h.iv[:], m[16:])
		h.epoch = e
	}
	nonce = h.iv
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], h.seq)
	for i := range s {
		nonce[4+i] ^= s[i]
	}
	h.seq++
	return h.aead, nonce, nil
}

// Read returns plaintext of the frames in order, a frame's bytes only
// once it is authenticated.
func (c *Channel) Read(p []byte) (int, error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.plain) > 0 {
		return c.take(p), nil
	}
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.readFrame(p)
	if err != nil {
		c.rerr = err
	}
	return n, err
}

// take hands out what is left of the opened frame.
func (c *Channel) take(p []byte) int {
	n := copy(p, c.plain)
	if c.plain = c.plain[n:]; len(c.plain) == 0 && c.fbuf != nil {
		framePool.Put(c.fbuf)
		c.fbuf = nil
	}
	return n
}

// fill reads from the socket until the stage holds at least n bytes
// (n <= stageSize), as many as one read brings.
func (c *Channel) fill(n int) error {
	if c.stage == nil {
		c.stage = make([]byte, stageSize)
	}
	if c.send-c.spos >= n {
		return nil
	}
	if c.spos+n > len(c.stage) {
		c.send = copy(c.stage, c.stage[c.spos:c.send])
		c.spos = 0
	}
	for c.send-c.spos < n {
		k, err := c.nc.Read(c.stage[c.send:])
		c.send += k
		if err != nil {
			if c.send-c.spos >= n {
				break // an error comes again with the next read
			}
			if err == io.EOF && c.send > c.spos {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (c *Channel) readFrame(p []byte) (int, error) {
	if err := c.fill(lenSize); err != nil {
		return 0, err
	}
	var hdr [lenSize]byte
	copy(hdr[:], c.stage[c.spos:])
	c.spos += lenSize
	l := int(binary.BigEndian.Uint32(hdr[:]))
	if l <= tagSize || l > MaxFrame+tagSize {
		return 0, fmt.Errorf("%w: length %d", ErrFrame, l)
	}
	var body []byte
	if l <= stageSize {
		if err := c.fill(l); err != nil {
			return 0, unexpected(err)
		}
		body = c.stage[c.spos : c.spos+l]
		c.spos += l
	} else {
		// A large frame: what the stage holds of it, then the rest
		// from the socket straight into a frame buffer.
		c.fbuf = framePool.Get().(*[]byte)
		body = (*c.fbuf)[:l]
		k := copy(body, c.stage[c.spos:c.send])
		c.spos += k
		if _, err := io.ReadFull(c.nc, body[k:]); err != nil {
			return 0, unexpected(err)
		}
	}
	aead, nonce, err := c.in.next()
	if err != nil {
		return 0, err
	}
	n := l - tagSize
	if len(p) >= n {
		_, err = aead.Open(p[:0], nonce[:], body, hdr[:])
		if c.fbuf != nil {
			framePool.Put(c.fbuf)
			c.fbuf = nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: frame %d fails authentication", ErrFrame, c.in.seq-1)
		}
		return n, nil
	}
	if c.plain, err = aead.Open(body[:0], nonce[:], body, hdr[:]); err != nil {
		c.plain = nil
		return 0, fmt.Errorf("%w: frame %d fails authentication", ErrFrame, c.in.seq-1)
	}
	return c.take(p), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Write seals p in frames and sends them.
func (c *Channel) Write(p []byte) (int, error) {
	n, err := c.WriteBuffers(p)
	return int(n), err
}

// WriteBuffers seals each of bufs in frames of its own and sends them
// together: a frame's header and payload leave in one system call.
func (c *Channel) WriteBuffers(bufs ...[]byte) (int64, error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	gp := sealPool.Get().(*[]byte)
	defer sealPool.Put(gp)
	g := (*gp)[:0]
	var n, sent int64
	for _, b := range bufs {
		for len(b) > 0 {
			k := min(len(b), MaxFrame)
			if len(g)+lenSize+k+tagSize > cap(g) {
				if err := c.writeOut(g); err != nil {
					return sent, err
				}
				sent, g = n, g[:0]
			}
			aead, nonce, err := c.out.next()
			if err != nil {
				c.werr = err
				return sent, err
			}
			var hdr [lenSize]byte
			binary.BigEndian.PutUint32(hdr[:], uint32(k+tagSize))
			g = aead.Seal(append(g, hdr[:]...), nonce[:], b[:k], hdr[:])
			b, n = b[k:], n+int64(k)
			if len(g) >= flushAt {
				// A large frame leaves at once: the peer opens it
				// while the next is sealed.
				if err := c.writeOut(g); err != nil {
					return sent, err
				}
				sent, g = n, g[:0]
			}
		}
	}
	if err := c.writeOut(g); err != nil {
		return sent, err
	}
	return n, nil
}

// writeOut writes sealed frames to the socket; after a failure the
// sequence is out of step and nothing more is sent.
func (c *Channel) writeOut(g []byte) error {
	if len(g) == 0 {
		return nil
	}
	if _, err := c.nc.Write(g); err != nil {
		c.werr = err
		return err
	}
	return nil
}

// Close closes the connection.
func (c *Channel) Close() error                       { return c.nc.Close() }
func (c *Channel) LocalAddr() net.Addr                { return c.nc.LocalAddr() }
func (c *Channel) RemoteAddr() net.Addr               { return c.nc.RemoteAddr() }
func (c *Channel) SetDeadline(t time.Time) error      { return c.nc.SetDeadline(t) }
func (c *Channel) SetReadDeadline(t time.Time) error  { return c.nc.SetReadDeadline(t) }
func (c *Channel) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }

// recordReader lets crypto/tls read TLS records one at a time and never
// past the last: the bytes after the handshake's records are frames,
// which crypto/tls would otherwise take into its own buffer (it reads
// what the socket has).
type recordReader struct {
	net.Conn
	left int // bytes of the current record not yet read
	hdr  [5]byte
	have int // bytes of the next record's header read
}

func (r *recordReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		for r.have < len(r.hdr) {
			k, err := r.Conn.Read(r.hdr[r.have:])
			r.have += k
			if err != nil && r.have < len(r.hdr) {
				if r.have > 0 && err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
		}
		r.left = len(r.hdr) + int(binary.BigEndian.Uint16(r.hdr[3:]))
	}
	if r.have > 0 {
		// The header, handed on first.
		n := copy(p, r.hdr[len(r.hdr)-r.have:])
		r.have -= n
		r.left -= n
		return n, nil
	}
	n, err := r.Conn.Read(p[:min(len(p), r.left)])
	r.left -= n
	return n, err
}
