// Package mover owns the data plane: a TCP server that moves bytes between
// clients and the devices it holds, on the core's authority.
//
// A mover never consults the catalog. Each request carries a capability
// token the core signed; the mover checks it, then streams frames straight
// to or from the device (HPSS's third-party transfer: the core hands out
// layouts, data flows client ↔ mover directly, all stripes in parallel).
//
// The protocol on one connection, for each request:
//
//	write:  C→M Msg(Request), Data…, End(crc)     M→C Msg(Status{receipt}) | Error
//	read:   C→M Msg(Request)                      M→C Msg(Status{length}), Data…, End(crc) | Error
//	delete: C→M Msg(Request)                      M→C Msg(Status) | Error
//
// A read with Request.Handle on a Unix socket (a client on the mover's host)
// is answered first by one marker byte: wire.HandleFile carries the object's
// open file (SCM_RIGHTS) and is followed by Msg(Status) alone; the client
// reads and verifies the file itself. wire.HandleStream (a capped device, a
// refusal) is followed by the read's usual reply.
//
// A write is streamed without waiting for a go-ahead, so small files cost one
// round trip. When the mover refuses or fails a write it sends the Error at
// once and then discards frames up to End; the client, reading concurrently,
// stops sending early. Either way the connection stays in step and reusable.
package mover

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// Mover serves the devices it holds.
type Mover struct {
	id      string
	devices map[string]*disk.Device
	signer  *token.Signer
	epoch   atomic.Int64
	handed  atomic.Int64 // files handed over to readers on this host
	sourced atomic.Int64 // writes that read a client's file on this host
	ringed  atomic.Int64 // writes that took their bytes from a client's ring
	log     *slog.Logger
	now     func() time.Time

	mu     sync.Mutex
	lns    []net.Listener
	conns  map[net.Conn]struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a mover for devs, checking tokens with signer.
func New(id string, devs []*disk.Device, signer *token.Signer, log *slog.Logger) *Mover {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mover{id: id, devices: map[string]*disk.Device{}, signer: signer, log: log, now: time.Now,
		conns: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel}
	for _, d := range devs {
		m.devices[d.ID()] = d
	}
	return m
}

// Stats counts the transfers with clients on the mover's host that passed
// files instead of streaming through the socket.
type Stats struct {
	FilesHanded int64 // reads answered with the object's file
	FilesRead   int64 // writes that read the client's own file
	RingWrites  int64 // writes that took their bytes from the client's ring
}

// Stats returns the mover's counts so far.
func (m *Mover) Stats() Stats {
	return Stats{FilesHanded: m.handed.Load(), FilesRead: m.sourced.Load(), RingWrites: m.ringed.Load()}
}

// ID returns the mover's name.
func (m *Mover) ID() string { return m.id }

// SetEpoch raises the epoch below which tokens are refused.
func (m *Mover) SetEpoch(e int64) {
	for {
		cur := m.epoch.Load()
		if e <= cur || m.epoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// Epoch returns the current epoch.
func (m *Mover) Epoch() int64 { return m.epoch.Load() }

// Devices describes the mover's devices, sorted by ID.
func (m *Mover) Devices(pool func(id string) string, addr string) []api.DeviceInfo {
	var out []api.DeviceInfo
	for id, d := range m.devices {
		c, u, f := d.Usage()
		fs := d.FS()
		out = append(out, api.DeviceInfo{ID: id, Pool: pool(id), Mover: addr, Online: true, Capacity: c, Used: u, Free: f, Bandwidth: d.Bandwidth(),
			FS: fs.Name, FSSize: fs.Size, FSFree: fs.Avail})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Device returns a device by ID.
func (m *Mover) Device(id string) (*disk.Device, bool) {
	d, ok := m.devices[id]
	return d, ok
}

// Serve accepts connections on ln until Close.
func (m *Mover) Serve(ln net.Listener) error {
	m.mu.Lock()
	m.lns = append(m.lns, ln)
	m.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if m.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("mover %s: accept: %w", m.id, err)
		}
		m.mu.Lock()
		m.conns[c] = struct{}{}
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.serveConn(c)
			m.mu.Lock()
			delete(m.conns, c)
			m.mu.Unlock()
		}()
	}
}

// Close stops accepting, breaks open connections and waits for handlers.
func (m *Mover) Close() error {
	m.cancel()
	m.mu.Lock()
	for _, ln := range m.lns {
		ln.Close()
	}
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// bufPool's buffers are aligned for direct I/O, so frames read into them
// can go to an O_DIRECT object as they are.
var bufPool = disk.Buffers

func (m *Mover) serveConn(c net.Conn) {
	defer c.Close()
	defer func() {
		// A bug triggered by one request must not take the server down:
		// drop this connection, log, keep serving everyone else.
		if v := recover(); v != nil {
			m.log.Error("mover: panic serving connection", "remote", c.RemoteAddr(), "panic", v, "stack", string(debug.Stack()))
		}
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	// Small buffers: control messages go through them, while large
	// payloads are read into place and written with writev.
	br := wire.NewConnReader(c, 32<<10)
	bw := bufio.NewWriterSize(c, 32<<10)
	fr, fw := wire.NewReader(br), wire.NewConnWriter(bw, c)
	for {
		var req wire.Request
		if err := fr.ReadMsg(&req); err != nil {
			if !errors.Is(err, io.EOF) && m.ctx.Err() == nil {
				m.log.Debug("mover: connection ends", "remote", c.RemoteAddr(), "err", err)
			}
			return
		}
		var err error
		switch req.Op {
		case token.OpWrite:
			switch {
			case req.Source != nil:
				err = m.writeFrom(req, c, br, fw)
			case req.Ring:
				err = m.writeRing(req, c, br, fr, fw)
			default:
				err = m.write(req, fr, fw)
			}
		case token.OpRead:
			err = m.read(req, c, fw)
		case token.OpDelete:
			err = m.delete(req, fw)
		case wire.OpVerify:
			err = m.verify(req, fw)
		default:
			err = fw.Error(status(api.Errorf(api.ErrInvalid, "mover: unknown op %q", req.Op)))
		}
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			// Transport failure or a stream out of step: drop the connection.
			m.log.Debug("mover: request failed", "op", req.Op, "object", req.Object, "err", err)
			return
		}
	}
}

func status(err error) wire.Status {
	code, _ := api.CodeOf(err)
	var se *wire.StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return wire.Status{Code: code, Error: err.Error()}
}

func (m *Mover) authorize(req wire.Request, op string) (*disk.Device, token.Claims, error) {
	c, err := m.signer.Check(req.Token, op, req.Device, req.Object, m.now())
	if err != nil {
		return nil, c, api.Errorf(api.ErrDenied, "mover %s: %s %s/%s: %v", m.id, op, req.Device, req.Object, err)
	}
	if cur := m.epoch.Load(); c.Epoch < cur {
		return nil, c, api.Errorf(api.ErrRestarted, "mover %s: token from core epoch %d, current is %d", m.id, c.Epoch, cur)
	}
	m.SetEpoch(c.Epoch)
	d, ok := m.devices[req.Device]
	if !ok {
		return nil, c, api.Errorf(api.ErrNotFound, "mover %s: no device %q", m.id, req.Device)
	}
	// Whom the core issued the capability to: the transfer is theirs.
	m.log.Debug("mover: transfer", "op", op, "device", req.Device, "object", req.Object, "user", c.User, "uid", c.UID)
	return d, c, nil
}

// write receives one object. Returned errors are transport errors only;
// request failures are reported to the client in an Error frame.
//
// Receiving and storing overlap: this goroutine reads and verifies frames
// while a device goroutine writes the previous ones, with a few frames in
// flight between them. Each frame's CRC is checked once, on arrival; the
// object's chunk and whole CRCs are derived from it.
func (m *Mover) write(req wire.Request, fr *wire.Reader, fw *wire.Writer) error {
	var w *disk.Writer
	d, claims, err := m.authorize(req, token.OpWrite)
	if err == nil {
		w, err = d.Create(m.ctx, req.Object, claims.MaxLen)
	}
	var sent bool // an Error frame went out: skip to End
	refuse := func(err error) error {
		sent = true
		if err := fw.Error(status(err)); err != nil {
			return err
		}
		return fw.Flush()
	}
	if err != nil {
		if err := refuse(err); err != nil {
			return err
		}
	}
	var st *storer
	if w != nil {
		st = newStorer(w, claims.MaxLen)
	}
	for {
		h, err := fr.Next()
		if err != nil {
			if st != nil {
				st.abort()
			}
			return err
		}
		switch h.Type {
		case wire.TypeData:
			bp := bufPool.Get()
			buf := *bp
			if int(h.Length) > len(buf) {
				buf = make([]byte, h.Length)
			}
			p, err := fr.Payload(h, buf)
			var ce *wire.ChecksumError
			if errors.As(err, &ce) && !sent {
				st.abort()
				st = nil
				err = refuse(api.Errorf(api.ErrCorrupt, "mover %s: %s/%s: frame damaged in transit (%v)", m.id, req.Device, req.Object, ce))
			} else if errors.As(err, &ce) {
				err = nil
			}
			if err != nil {
				bufPool.Put(bp)
				if st != nil {
					st.abort()
				}
				return err
			}
			if sent {
				bufPool.Put(bp)
				continue
			}
			if ferr := st.failed(); ferr != nil {
				bufPool.Put(bp)
				st.abort()
				st = nil
				if err := refuse(ferr); err != nil {
					return err
				}
				continue
			}
			if err := w.Pace(len(p)); err != nil {
				bufPool.Put(bp)
				st.abort()
				return err
			}
			st.put(frame{bp: bp, p: p, crc: h.CRC})
		case wire.TypeEnd:
			if sent {
				return nil // the error was already sent
			}
			if err := st.finish(); err != nil {
				return fw.Error(status(err))
			}
			if crc := w.CRC(); h.CRC != crc {
				w.Abort()
				return fw.Error(status(api.Errorf(api.ErrCorrupt, "mover %s: %s/%s: stream crc32c %08x, sender says %08x", m.id, req.Device, req.Object, crc, h.CRC)))
			}
			if err := w.Close(); err != nil {
				return fw.Error(status(err))
			}
			return fw.Msg(wire.Status{OK: true, Length: w.Len(), CRC32C: w.CRC(), Receipt: m.signer.Receipt(req.Device, req.Object, w.Len(), w.CRC())})
		default:
			if st != nil {
				st.abort()
			}
			return fmt.Errorf("%w: unexpected frame type %d in write", wire.ErrFrame, h.Type)
		}
	}
}

type readChunk struct {
	bp  *[]byte
	p   []byte
	idx int64
	err error
}

type frame struct {
	bp  *[]byte
	p   []byte
	crc uint32
}

// storer writes received frames to a device in its own goroutine, so
// receiving the next frame overlaps storing this one. An object of one
// frame has nothing to overlap: its storer writes in the receiving
// goroutine (inline), sparing a small object two goroutine hand-offs.
type storer struct {
	w      *disk.Writer
	inline bool
	in     chan frame
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// inFlight frames may wait between receiving and storing.
const inFlight = 4

func newStorer(w *disk.Writer, maxLen int64) *storer {
	st := &storer{w: w, inline: maxLen <= wire.FrameSize}
	if st.inline {
		return st
	}
	st.in, st.done = make(chan frame, inFlight), make(chan struct{})
	go func() {
		defer close(st.done)
		for f := range st.in {
			st.store(f)
		}
		st.wait()
	}()
	return st
}

func (st *storer) store(f frame) {
	if st.failed() != nil {
		bufPool.Put(f.bp)
		return
	}
	// The device may still be writing the frame when WriteOwned
	// returns (direct writes in flight); it gives the buffer back.
	bp := f.bp
	if err := st.w.WriteOwned(f.p, f.crc, func() { bufPool.Put(bp) }); err != nil {
		st.setErr(err)
	}
}

func (st *storer) wait() {
	if err := st.w.Wait(); err != nil && st.failed() == nil {
		st.setErr(err)
	}
}

func (st *storer) setErr(err error) {
	st.mu.Lock()
	st.err = err
	st.mu.Unlock()
}

func (st *storer) put(f frame) {
	if st.inline {
		st.store(f)
		return
	}
	st.in <- f
}

func (st *storer) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// stop waits for every frame to be written.
func (st *storer) stop() {
	if st.inline {
		st.wait()
		return
	}
	close(st.in)
	<-st.done
}

// finish waits for every frame to be written.
func (st *storer) finish() error {
	st.stop()
	if err := st.failed(); err != nil {
		st.w.Abort()
		return err
	}
	return nil
}

func (st *storer) abort() {
	if st == nil {
		return
	}
	st.stop()
	st.w.Abort()
}

func (m *Mover) read(req wire.Request, c net.Conn, fw *wire.Writer) error {
	d, _, err := m.authorize(req, token.OpRead)
	if uc, ok := c.(*net.UnixConn); ok && req.Handle {
		// Hand the file of an uncapped device to the client, which then
		// reads and verifies it itself (disk.OpenFile checks the trailer
		// and every chunk): one copy from the page cache instead of three
		// through a socket, and the mover reads nothing of the object. A
		// capped device streams, so its cap holds.
		if err == nil && d.Bandwidth() == 0 {
			var f fsio.File
			if f, err = d.OpenObjectFile(req.Object); err == nil {
				defer f.Close()
				if err := handOver(uc, fw, f.OS()); err != nil {
					return sendError{err}
				}
				m.handed.Add(1)
				return fw.Msg(wire.Status{OK: true})
			}
		}
		if err := handOver(uc, fw, nil); err != nil {
			return sendError{err}
		}
	}
	var r *disk.Reader
	if err == nil {
		r, err = d.OpenObject(m.ctx, req.Object)
	}
	if err != nil {
		return fw.Error(status(err))
	}
	defer r.Close()
	off, n := req.Offset, req.Length
	if off < 0 || off > r.Len() || n < 0 {
		return fw.Error(status(api.Errorf(api.ErrInvalid, "mover %s: read %s/%s: range %d+%d outside %d bytes", m.id, req.Device, req.Object, off, n, r.Len())))
	}
	if n == 0 || off+n > r.Len() {
		n = r.Len() - off
	}
	if err := fw.Msg(wire.Status{OK: true, Length: n, CRC32C: r.CRC()}); err != nil {
		return err
	}
	send := m.sendCached
	if req.Verify {
		send = m.sendVerified
	}
	crc, err := send(r, off, off+n, fw)
	if err != nil {
		var se sendError
		if errors.As(err, &se) {
			return err // the connection failed
		}
		m.log.Warn("mover: read failed", "device", req.Device, "object", req.Object, "err", err)
		return fw.Error(status(err))
	}
	return fw.End(crc)
}

// handOver sends the marker that answers a read with Request.Handle: f
// attached, or no file (f nil) and a stream to follow.
func handOver(c *net.UnixConn, fw *wire.Writer, f *os.File) error {
	if err := fw.Flush(); err != nil {
		return err
	}
	marker := wire.HandleFile
	if f == nil {
		marker = wire.HandleStream
	}
	return wire.SendFile(c, marker, f)
}

// sendError marks a failure to send, after which the connection is lost
// (as opposed to a failure to read, which is reported to the client).
type sendError struct{ error }

func (e sendError) Unwrap() error { return e.error }

// sendCached sends [off, end) of r and returns its CRC32C. Whole chunks go
// from the page cache to the socket by sendfile, unread and unverified by
// the mover: the frame carries the CRC32C stored with the chunk, and the
// reader's check of every frame against it catches damage at rest as well
// as in transit (the reader then asks again with Verify, see
// wire.Request). This spares the mover a copy and a CRC pass per byte, on
// a path that has no other work to do. Partial chunks at either end of the
// range are read and verified.
func (m *Mover) sendCached(r *disk.Reader, off, end int64, fw *wire.Writer) (uint32, error) {
	r.Sequential()
	var crc uint32
	for pos := off; pos < end; {
		idx := pos / disk.ChunkSize
		var c uint32
		var n int64
		if pos%disk.ChunkSize == 0 && end >= min((idx+1)*disk.ChunkSize, r.Len()) {
			rg, err := r.Region(idx)
			if err != nil {
				return 0, err
			}
			if err := fw.DataFile(rg.File, rg.Off, rg.Len, rg.CRC); err != nil {
				return 0, sendError{err}
			}
			c, n = rg.CRC, rg.Len
		} else {
			bp := bufPool.Get()
			chunk, err := r.Chunk(idx, *bp)
			if err != nil {
				bufPool.Put(bp)
				return 0, err
			}
			p := chunk[pos%disk.ChunkSize : min(int64(len(chunk)), pos%disk.ChunkSize+end-pos)]
			c, err = fw.Data(p)
			n = int64(len(p))
			bufPool.Put(bp)
			if err != nil {
				return 0, sendError{err}
			}
		}
		crc = wire.CombineCRC(crc, c, n)
		pos += n
	}
	return crc, nil
}

// sendVerified sends [off, end) of r, every chunk read and checked against
// its stored CRC32C first, and returns the range's CRC32C. A reader
// goroutine fetches and verifies chunks ahead of the sender, so disk reads
// overlap network sends.
func (m *Mover) sendVerified(r *disk.Reader, off, end int64, fw *wire.Writer) (uint32, error) {
	chunks := make(chan readChunk, 2)
	stop, done := make(chan struct{}), make(chan struct{})
	defer func() {
		close(stop)
		<-done // before r.Close: the reader is finished with r
		// Chunks read ahead and not sent go back to the pool, whose
		// memory the garbage collector does not reclaim.
		for rc := range chunks {
			bufPool.Put(rc.bp)
		}
	}()
	go func() {
		defer close(done)
		defer close(chunks)
		for pos := off; pos < end; {
			bp := bufPool.Get()
			idx := pos / disk.ChunkSize
			chunk, err := r.Chunk(idx, *bp)
			rc := readChunk{bp: bp, p: chunk, idx: idx, err: err}
			select {
			case chunks <- rc:
			case <-stop:
				bufPool.Put(bp)
				return
			}
			if err != nil {
				return
			}
			pos = (idx + 1) * disk.ChunkSize
		}
	}()
	var crc uint32
	for pos := off; pos < end; {
		rc := <-chunks
		if rc.err != nil {
			bufPool.Put(rc.bp)
			return 0, rc.err
		}
		chunk := rc.p
		lo := pos % disk.ChunkSize
		hi := min(int64(len(chunk)), lo+end-pos)
		p := chunk[lo:hi]
		var c uint32
		var err error
		if lo == 0 && hi == int64(len(chunk)) {
			// A whole chunk: its CRC was just verified, no need to scan again.
			c = r.ChunkCRC(rc.idx)
			err = fw.DataCRC(p, c)
		} else {
			c, err = fw.Data(p)
		}
		bufPool.Put(rc.bp)
		if err != nil {
			return 0, sendError{err}
		}
		crc = wire.CombineCRC(crc, c, int64(len(p)))
		pos += int64(len(p))
	}
	return crc, nil
}

// verify reads a whole object and checks it (disk.Reader.Verify),
// answering with its length and CRC32C or with the damage found, which it
// also logs.
func (m *Mover) verify(req wire.Request, fw *wire.Writer) error {
	d, _, err := m.authorize(req, token.OpRead)
	var r *disk.Reader
	if err == nil {
		r, err = d.OpenObject(m.ctx, req.Object)
	}
	if err == nil {
		defer r.Close()
		bp := bufPool.Get()
		err = r.Verify(*bp)
		bufPool.Put(bp)
	}
	if err != nil {
		if errors.Is(err, api.ErrCorrupt) {
			m.log.Warn("mover: verify found damage", "device", req.Device, "object", req.Object, "err", err)
		}
		return fw.Error(status(err))
	}
	return fw.Msg(wire.Status{OK: true, Length: r.Len(), CRC32C: r.CRC()})
}

func (m *Mover) delete(req wire.Request, fw *wire.Writer) error {
	d, _, err := m.authorize(req, token.OpDelete)
	if err == nil {
		err = d.Remove(req.Object)
	}
	if err != nil {
		return fw.Error(status(err))
	}
	return fw.Msg(wire.Status{OK: true})
}
