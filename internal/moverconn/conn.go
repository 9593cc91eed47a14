// Package moverconn is the client side of the data plane: the pool of
// connections to movers (TCP, TLS, or a mover's Unix socket on its host),
// and the transfers on them — a stripe written from a stream, from bytes
// or from a file handed to the mover; a segment read into a writer or a
// frame sink, or from the object's file the mover hands over, verified
// against its stored CRCs either way. Clients, the core (migration and
// recall move data between movers and the tape tier) and every front end
// reach movers through it; the mover server is internal/mover, which
// this package does not link. It reads the at-rest object format
// (internal/disk) for the files movers hand over. It also sets how every
// data and control connection of Strata is made and kept (Dialer,
// ListenConfig): a peer whose host dies is noticed in seconds.
package moverconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/wire"
)

// FrameSize is the data frame size senders use (wire.FrameSize).
const FrameSize = wire.FrameSize

// bufPool holds chunk-sized buffers aligned for direct I/O, for reading
// ahead of a send.
var bufPool = disk.Buffers

// Pool keeps idle data-plane connections per mover address, so small
// transfers skip the TCP handshake.
type Pool struct {
	mu      sync.Mutex
	idle    map[string][]*Conn
	closed  bool
	MaxIdle int // per address; default 64
	Dialer  net.Dialer
	tcpOnly bool
	stream  bool    // no handles: read through the socket even on the mover's host
	rings   []*Ring // idle, for reuse (Ring, PutRing)
	// TLS is used for movers whose endpoint says they speak it: the CA
	// to verify them by (and a client certificate, with mutual TLS).
	TLS *tls.Config
}

// SetTCPOnly makes the pool dial movers over TCP even on their own host.
// Idle connections are dropped, so the next transfer takes the new path.
func (p *Pool) SetTCPOnly(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tcpOnly = on
	p.dropIdleLocked()
}

// SetHandles says whether reads on a mover's host may take the object's
// file from the mover and read it directly (the default) or must stream
// it through the socket like any remote read.
func (p *Pool) SetHandles(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stream = !on
}

func (p *Pool) dropIdleLocked() {
	for _, l := range p.idle {
		for _, c := range l {
			c.c.Close()
		}
	}
	p.idle = map[string][]*Conn{}
}

// Endpoint is where a mover takes connections: its TCP address and, for
// clients on the same host, its Unix socket. A Unix socket moves data at
// about 1.7 times the rate of loopback TCP on the same CPU (measured in
// docs/PERFORMANCE.md), which on one node is the difference between the
// network stack and the disk being the limit. HPSS movers offer co-located
// clients a shared-memory path for the same reason.
type Endpoint struct {
	Addr   string // host:port
	Socket string // Unix socket path, valid on Host
	Host   string // boot id of the mover's host (see HostID)
	TLS    bool   // the TCP port speaks TLS (never the socket: it stays on the host)
}

// HostID identifies this boot of this machine: a Unix socket path named by
// a mover is only meaningful to clients with the same HostID.
func HostID() string { return hostID() }

var hostID = sync.OnceValue(func() string {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "" // unknown: never use sockets
})

// HandsOver reports whether a new connection to ep would pass files to
// the mover (see Conn.HandsOver): a put decides before it starts how it
// will hash what it sends.
func (p *Pool) HandsOver(ep Endpoint) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.localLocked(ep) && !p.stream
}

// localLocked reports whether ep can be reached through its Unix socket.
func (p *Pool) localLocked(ep Endpoint) bool {
	return !p.tcpOnly && ep.Socket != "" && ep.Host != "" && ep.Host == HostID()
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{idle: map[string][]*Conn{}, MaxIdle: 64, Dialer: Dialer()}
}

// Dialer is how data and control connections are made: DialTimeout,
// KeepAlive and UserTimeout.
func Dialer() net.Dialer {
	return net.Dialer{Timeout: DialTimeout, KeepAliveConfig: KeepAlive, Control: userTimeout}
}

// ListenConfig is how servers listen for them: KeepAlive and UserTimeout on
// every connection accepted (set on the listening socket, which accepted
// sockets inherit).
func ListenConfig() net.ListenConfig {
	return net.ListenConfig{KeepAliveConfig: KeepAlive, Control: userTimeout}
}

// UserTimeout is how long sent data may go unacknowledged before the
// connection fails (TCP_USER_TIMEOUT, on Linux).
const UserTimeout = 15 * time.Second

// DialTimeout bounds connecting to a mover (or the core): a host that
// does not answer within it is taken as unreachable, and a reader turns to
// another copy.
const DialTimeout = 5 * time.Second

// KeepAlive is the TCP keepalive of data and control connections, both
// ends. A peer whose host died or whose link went down mid-transfer stops
// answering probes and the connection fails after Idle + Count × Interval
// (15 s) instead of the kernel's default two hours; a peer that is merely
// slow still answers them.
var KeepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 5}

// IsDialError reports whether err is a failure to connect to a mover (as
// opposed to a connection that broke, or an answer).
func IsDialError(err error) bool {
	var de *dialError
	return errors.As(err, &de)
}

type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// Conn is one data-plane connection.
type Conn struct {
	c       net.Conn
	bw      *bufio.Writer
	br      *bufio.Reader
	fr      *wire.Reader
	fw      *wire.Writer
	addr    string
	broken  bool
	reused  bool
	handles bool // reads ask for the object's file (a Unix socket, handles allowed)
}

// Reused reports whether the connection came from the idle pool (a failure
// on it before any reply may just mean the mover restarted).
func (c *Conn) Reused() bool { return c.reused }

// Broken reports whether the connection is out of step (a transfer failed
// or was cancelled): Put closes it instead of keeping it.
func (c *Conn) Broken() bool { return c.broken }

// Get returns an idle or new connection to ep.
func (p *Pool) Get(ctx context.Context, ep Endpoint) (*Conn, error) {
	addr := ep.Addr
	p.mu.Lock()
	if l := p.idle[addr]; len(l) > 0 {
		c := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		c.reused = true
		_, isUnix := c.c.(*net.UnixConn)
		c.handles = isUnix && !p.stream
		p.mu.Unlock()
		return c, nil
	}
	local, stream := p.localLocked(ep), p.stream
	p.mu.Unlock()
	var nc net.Conn
	var err error
	if local {
		// A socket that cannot be reached (a mover restarting, a
		// container without the path) is not an error: TCP still works.
		nc, err = p.Dialer.DialContext(ctx, "unix", ep.Socket)
	}
	if nc == nil {
		if nc, err = p.Dialer.DialContext(ctx, "tcp", addr); err != nil {
			return nil, fmt.Errorf("mover %s: %w", addr, &dialError{err})
		}
		nc.(*net.TCPConn).SetNoDelay(true)
		if ep.TLS {
			nc, err = p.handshake(ctx, nc, addr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("mover %s: %w", addr, err)
	}
	_, isUnix := nc.(*net.UnixConn)
	bw, br := bufio.NewWriterSize(nc, 32<<10), wire.NewConnReader(nc, 32<<10)
	return &Conn{c: nc, bw: bw, br: br, fr: wire.NewReader(br), fw: wire.NewConnWriter(bw, nc), addr: addr, handles: isUnix && !stream}, nil
}

// handshake starts TLS on a new connection to a mover, verifying its
// certificate for the host in addr.
func (p *Pool) handshake(ctx context.Context, nc net.Conn, addr string) (net.Conn, error) {
	if p.TLS == nil {
		nc.Close()
		return nil, errors.New("the mover speaks TLS and no CA is configured to verify it (--ca, STRATA_CA)")
	}
	cfg := p.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := pki.DataClient(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return tc, nil
}

// Put returns c to the pool, or closes it if it is broken.
func (p *Pool) Put(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.broken && c.reused {
		// A pooled connection that failed: its mover most likely
		// restarted, and the others pooled for it died with it. Drop
		// them, so that a retry dials instead of failing on each.
		for _, o := range p.idle[c.addr] {
			o.c.Close()
		}
		delete(p.idle, c.addr)
	}
	if c.broken || p.closed || len(p.idle[c.addr]) >= p.MaxIdle {
		c.c.Close()
		return
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
}

// Close closes all idle connections.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.dropIdleLocked()
	for _, r := range p.rings {
		r.Close()
	}
	p.rings = nil
}

// watch breaks the connection when ctx ends, unblocking any I/O. If ctx
// ends just as the transfer finishes, stop finds the deadline (being) set
// and marks the connection broken: pooled, it would fail its next user
// with a timeout out of nowhere.
func (c *Conn) watch(ctx context.Context) (stop func()) {
	stopf := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	return func() {
		if !stopf() {
			c.broken = true
		}
	}
}

func (c *Conn) fail(ctx context.Context, err error) error {
	c.broken = true
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// peerError converts an error frame into an api.Error so errors.Is works.
func peerError(err error) error {
	var se *wire.StatusError
	if errors.As(err, &se) {
		return &api.Error{Code: se.Status.Code, Msg: se.Status.Error}
	}
	return err
}

// Write streams everything src yields to the mover as the object of req and
// returns the mover's status with its receipt. progress, if set, is called
// after each frame is sent.
func (c *Conn) Write(ctx context.Context, req wire.Request, src io.Reader, buf []byte, progress func(int)) (wire.Status, error) {
	defer c.watch(ctx)()
	if err := c.fw.Msg(req); err != nil {
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: send request: %w", c.addr, err))
	}
	// The mover answers once, either early (refusal) or after End.
	type reply struct {
		st  wire.Status
		err error
	}
	replies := make(chan reply, 1)
	go func() {
		var st wire.Status
		err := c.fr.ReadMsg(&st)
		replies <- reply{st, err}
	}()
	// Read the source one buffer ahead of the network, so reading (a copy
	// out of the page cache) overlaps sending; a source that lends its
	// own buffer is sent from it.
	var chunks <-chan Chunk
	if ls, ok := src.(Lender); ok {
		chunks = lend(ctx, ls)
	} else {
		chunks = ReadAhead(ctx, src, buf)
	}
	defer func() {
		for ch := range chunks {
			ch.Release()
		}
	}()
	var crc uint32
	var early *reply
	var sendErr error
	for early == nil {
		ch, ok := <-chunks
		if !ok {
			break
		}
		n, rerr := len(ch.P), ch.Err
		if n > 0 {
			frameCRC, err := c.fw.Data(ch.P)
			// The frame is in the socket (or the write buffer): the
			// source buffer can be refilled.
			ch.Release()
			if err != nil {
				sendErr = err
				break
			}
			crc = wire.CombineCRC(crc, frameCRC, int64(n))
			if progress != nil {
				progress(n)
			}
		} else {
			ch.Release()
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			// The source failed: end the stream with a CRC the mover will
			// reject, so nothing half-written is ever acknowledged.
			c.fw.End(^crc)
			if c.bw.Flush() != nil {
				c.broken = true
			}
			<-replies // the mover's refusal keeps the stream in step
			return wire.Status{}, fmt.Errorf("read source: %w", rerr)
		}
		select {
		case r := <-replies:
			early = &r
		default:
		}
	}
	if sendErr == nil {
		sendErr = c.fw.End(crc)
	}
	if sendErr == nil {
		sendErr = c.bw.Flush()
	}
	var r reply
	if early != nil {
		r = *early
	} else {
		r = <-replies
	}
	return c.writeResult(ctx, r.st, r.err, sendErr, crc)
}

// WriteBytes stores p, one frame at most (FrameSize), as the object of req,
// like Write but in the caller's goroutine: a small object's request, data
// and end go out in one flush and the reply is read right after. A mover
// that refuses early still reads up to End, so the send cannot block on
// it.
func (c *Conn) WriteBytes(ctx context.Context, req wire.Request, p []byte) (wire.Status, error) {
	if len(p) > FrameSize {
		return wire.Status{}, fmt.Errorf("mover %s: WriteBytes of %d bytes, more than a frame", c.addr, len(p))
	}
	defer c.watch(ctx)()
	crc, sendErr := c.fw.WriteRequest(req, p)
	if sendErr == nil {
		sendErr = c.bw.Flush()
	}
	if sendErr != nil {
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: send: %w", c.addr, sendErr))
	}
	var st wire.Status
	err := c.fr.ReadMsg(&st)
	return c.writeResult(ctx, st, err, nil, crc)
}

// writeResult turns the mover's reply to a write (st, or the error reading
// it) into the write's outcome, given how sending went and the CRC32C of
// what was sent.
func (c *Conn) writeResult(ctx context.Context, st wire.Status, rerr, sendErr error, crc uint32) (wire.Status, error) {
	if rerr != nil {
		// On a refusal the mover skips frames up to End and then waits for
		// the next request, so the connection stays usable.
		var se *wire.StatusError
		if errors.As(rerr, &se) && sendErr == nil {
			return wire.Status{}, peerError(rerr)
		}
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, rerr))
	}
	if sendErr != nil {
		return wire.Status{}, c.fail(ctx, fmt.Errorf("mover %s: send: %w", c.addr, sendErr))
	}
	if st.CRC32C != crc {
		c.broken = true
		return st, api.Errorf(api.ErrCorrupt, "mover %s: stored crc32c %08x, sent %08x", c.addr, st.CRC32C, crc)
	}
	return st, nil
}

// Chunk is a piece of a source read ahead: P holds it (until Release),
// Err is the error that ended the source after it, if any.
type Chunk struct {
	P       []byte
	Err     error
	Release func()
}

// ReadAhead reads src into two alternating buffers (buf and one from the
// pool) one buffer ahead of the consumer, so reading (a copy out of the
// page cache) overlaps the consumer's work. The consumer must Release
// every chunk it receives and drain the channel. The channel closes after
// the chunk that carries an error or io.EOF (a short last read is io.EOF),
// or when ctx ends.
func ReadAhead(ctx context.Context, src io.Reader, buf []byte) <-chan Chunk {
	out := make(chan Chunk, 1)
	go func() {
		spare := bufPool.Get()
		bufs := [2][]byte{buf, (*spare)[:len(buf)]}
		// free holds a token per buffer not in use; mine counts tokens this
		// goroutine holds itself.
		free := make(chan int, 2)
		free <- 0
		free <- 1
		mine := 0
		defer func() {
			// The channel closes first, so a consumer draining it gives
			// back what it holds; the spare goes back to the pool once
			// both tokens are (the consumer releases every chunk it
			// receives, after ctx ended too). The pool's memory is not
			// the garbage collector's to reclaim.
			close(out)
			for ; mine < 2; mine++ {
				<-free
			}
			bufPool.Put(spare)
		}()
		for {
			var i int
			select {
			case i = <-free:
				mine++
			case <-ctx.Done():
				return
			}
			n, err := io.ReadFull(src, bufs[i])
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case out <- Chunk{P: bufs[i][:n], Err: err, Release: func() { free <- i }}:
				mine--
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// Lender is a Write source that holds its bytes in a buffer of its own
// and lends them out to be sent from where they lie, instead of having
// them copied into a read-ahead buffer first (an upload's stripe pipe).
type Lender interface {
	// Lend returns up to max of the next bytes, waiting for a full max
	// unless the source's end or its buffer's end comes first; after the
	// last, io.EOF or the error the source ended with. What it lends
	// stays valid until returned.
	Lend(max int) ([]byte, error)
	// Return gives back the oldest n bytes lent, in the order lent.
	Return(n int)
}

// lend turns a Lender into chunks as ReadAhead does, one chunk ahead of
// the consumer.
func lend(ctx context.Context, ls Lender) <-chan Chunk {
	out := make(chan Chunk, 1)
	go func() {
		defer close(out)
		for {
			p, err := ls.Lend(FrameSize)
			select {
			case out <- Chunk{P: p, Err: err, Release: func() { ls.Return(len(p)) }}:
			case <-ctx.Done():
				ls.Return(len(p))
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// CRCWriter is implemented by Read destinations that consume frames in
// place and want each frame's verified CRC32C with it.
type CRCWriter interface {
	WriteCRC(p []byte, crc uint32) error
}

// FrameSink is implemented by Read destinations that take ownership of
// each frame: Read fills a buffer the sink provides and hands it over with
// the frame's verified CRC32C, so the data is neither copied nor scanned
// again.
type FrameSink interface {
	Buffer(n int) []byte
	Deliver(p []byte, crc uint32) error
}

// DamagedError reports data that failed its CRC32C check at the reader: a
// frame on arrival, or a chunk of a file the mover handed over. Movers send
// unverified chunks (see Mover.sendCached), so the damage may be in transit
// or at rest: a reader asks again with Request.Verify, and the mover then
// reads and checks the object itself, logs the damage and names the object
// and offset. It is corruption either way (errors.Is(err, api.ErrCorrupt)).
type DamagedError struct {
	Msg      string
	Verified bool // the request had asked the mover to verify
}

func (e *DamagedError) Error() string {
	if e.Verified {
		return e.Msg + " (in transit: the mover had verified it)"
	}
	return e.Msg
}
func (e *DamagedError) Unwrap() error { return api.ErrCorrupt }

// Read fetches req's range and writes it to dst, verifying each frame and
// the stream's CRC. It returns the mover's status (Length of the range and
// CRC32C of the whole stored object).
//
// On the mover's host the mover may hand over the object's file instead
// (see Pool.SetHandles); Read then reads and verifies it here, and reports
// a damaged chunk as a *DamagedError like a damaged frame. A read with
// Verify always streams: the mover checks the object and logs what it finds.
func (c *Conn) Read(ctx context.Context, req wire.Request, dst io.Writer, buf []byte) (wire.Status, error) {
	defer c.watch(ctx)()
	req.Handle = c.handles && !req.Verify
	if err := c.send(ctx, req); err != nil {
		return wire.Status{}, err
	}
	var f *os.File
	if req.Handle {
		var err error
		if f, err = c.receiveFile(ctx); err != nil {
			return wire.Status{}, err
		}
	}
	st, err := c.status(ctx)
	if f != nil {
		if err != nil {
			f.Close()
			return st, err
		}
		return readFile(ctx, f, req, dst, buf)
	}
	if err != nil {
		return st, err
	}
	var crc uint32
	var got int64
	for {
		h, err := c.fr.Next()
		if err != nil {
			return st, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, err))
		}
		switch h.Type {
		case wire.TypeData:
			sink, owned := dst.(FrameSink)
			into := buf
			if owned {
				into = sink.Buffer(int(h.Length))
			}
			p, err := c.fr.Payload(h, into)
			if err != nil {
				var ce *wire.ChecksumError
				if errors.As(err, &ce) {
					c.broken = true
					return st, &DamagedError{Msg: fmt.Sprintf("mover %s: %s/%s: frame at offset %d failed its checksum", c.addr, req.Device, req.Object, req.Offset+got), Verified: req.Verify}
				}
				return st, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, err))
			}
			crc = wire.CombineCRC(crc, h.CRC, int64(len(p)))
			got += int64(len(p))
			if owned {
				err = sink.Deliver(p, h.CRC)
			} else {
				err = deliver(dst, p, h.CRC)
			}
			if err != nil {
				c.broken = true // the rest of the stream is unread
				return st, err
			}
		case wire.TypeEnd:
			if h.CRC != crc || got != st.Length {
				c.broken = true
				return st, api.Errorf(api.ErrCorrupt, "mover %s: %s/%s: stream of %d bytes crc32c %08x, mover says %d bytes %08x", c.addr, req.Device, req.Object, got, crc, st.Length, h.CRC)
			}
			return st, nil
		case wire.TypeError:
			var es wire.Status
			if err := c.fr.Decode(h, &es); err != nil {
				return st, c.fail(ctx, err)
			}
			return st, &api.Error{Code: es.Code, Msg: es.Error}
		default:
			return st, c.fail(ctx, fmt.Errorf("%w: unexpected frame type %d", wire.ErrFrame, h.Type))
		}
	}
}

// Do sends a request that has no data (delete) and returns the status.
func (c *Conn) Do(ctx context.Context, req wire.Request) (wire.Status, error) {
	defer c.watch(ctx)()
	return c.request(ctx, req)
}

// deliver hands p, whose CRC32C is crc, to a destination that does not own
// its buffers.
func deliver(dst io.Writer, p []byte, crc uint32) error {
	switch d := dst.(type) {
	case FrameSink:
		b := d.Buffer(len(p))
		copy(b, p)
		return d.Deliver(b, crc)
	case CRCWriter:
		return d.WriteCRC(p, crc)
	}
	_, err := dst.Write(p)
	return err
}

// receiveFile reads the marker that answers a read with Request.Handle and
// returns the file it carries, or nil when a stream follows.
func (c *Conn) receiveFile(ctx context.Context) (*os.File, error) {
	uc := c.c.(*net.UnixConn) // handles are asked for on Unix sockets only
	if c.br.Buffered() != 0 {
		return nil, c.fail(ctx, fmt.Errorf("mover %s: %w: %d bytes before a read's reply", c.addr, wire.ErrFrame, c.br.Buffered()))
	}
	marker, f, err := wire.ReceiveFile(uc, "object")
	if err != nil {
		return nil, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, err))
	}
	switch {
	case marker == wire.HandleFile && f != nil:
		return f, nil
	case marker == wire.HandleStream && f == nil:
		return nil, nil
	}
	if f != nil {
		f.Close()
	}
	return nil, c.fail(ctx, fmt.Errorf("mover %s: %w: marker %q in reply to a read (a mover too old to hand over files?)", c.addr, wire.ErrFrame, marker))
}

// readFile reads req's range from f, the object's file a mover handed over,
// verifying every chunk against the CRC32C stored with it, and writes it to
// dst as Read would from a stream.
func readFile(ctx context.Context, f *os.File, req wire.Request, dst io.Writer, buf []byte) (wire.Status, error) {
	r, err := disk.OpenFile(ctx, f, req.Device, req.Object)
	var ce *disk.CorruptError
	if errors.As(err, &ce) { // the mover hands over without reading the trailer
		return wire.Status{}, &DamagedError{Msg: ce.Error()}
	}
	if err != nil {
		return wire.Status{}, err
	}
	defer r.Close()
	st := wire.Status{OK: true, CRC32C: r.CRC()}
	off, n := req.Offset, req.Length
	if off < 0 || off > r.Len() || n < 0 {
		return st, api.Errorf(api.ErrInvalid, "read %s/%s: range %d+%d outside %d bytes", req.Device, req.Object, off, n, r.Len())
	}
	if n == 0 || off+n > r.Len() {
		n = r.Len() - off
	}
	st.Length = n
	r.Sequential()
	sink, owned := dst.(FrameSink)
	for pos, end := off, off+n; pos < end; {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		idx := pos / disk.ChunkSize
		size := min(disk.ChunkSize, r.Len()-idx*disk.ChunkSize)
		lo := pos % disk.ChunkSize
		hi := min(size, lo+end-pos)
		whole := lo == 0 && hi == size
		into := buf
		if owned && whole {
			into = sink.Buffer(int(size)) // read in place, handed over as is
		}
		chunk, err := r.Chunk(idx, into)
		if errors.As(err, &ce) {
			return st, &DamagedError{Msg: ce.Error()}
		}
		if err != nil {
			return st, err
		}
		p := chunk[lo:hi]
		switch {
		case owned && whole:
			err = sink.Deliver(p, r.ChunkCRC(idx))
		case whole:
			err = deliver(dst, p, r.ChunkCRC(idx))
		default:
			err = deliver(dst, p, crc32.Checksum(p, wire.Castagnoli))
		}
		if err != nil {
			return st, err
		}
		pos += int64(len(p))
	}
	return st, nil
}

// request sends req and reads the mover's status reply.
func (c *Conn) request(ctx context.Context, req wire.Request) (wire.Status, error) {
	if err := c.send(ctx, req); err != nil {
		return wire.Status{}, err
	}
	return c.status(ctx)
}

func (c *Conn) send(ctx context.Context, req wire.Request) error {
	err := c.fw.Msg(req)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return c.fail(ctx, fmt.Errorf("mover %s: send request: %w", c.addr, err))
	}
	return nil
}

// status reads the mover's status reply.
func (c *Conn) status(ctx context.Context) (wire.Status, error) {
	var st wire.Status
	if err := c.fr.ReadMsg(&st); err != nil {
		var se *wire.StatusError
		if errors.As(err, &se) {
			return st, peerError(err)
		}
		return st, c.fail(ctx, fmt.Errorf("mover %s: %w", c.addr, err))
	}
	return st, nil
}

// CountingWriter counts what reached W: how far a read got before it was
// cut off, so that the next try reads on from there.
type CountingWriter struct {
	W io.Writer
	N int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
