package sim

import (
	"math/rand/v2"

	"github.com/strata-storage/strata/internal/des"
)

// Device is what a stream reads and writes: a disk, an array, a
// calibrated device curve.
type Device interface {
	Read(lba, size int64, done func())
	Write(lba, size int64, done func())
	// Flush calls done when everything written is on the media.
	Flush(done func())
}

// Target is one place a stream's data goes: a device behind a network
// path (the client's NIC, the switch, the server's NIC and CPU).
type Target struct {
	Dev  Device
	Path []*des.Resource
	Base int64 // where this stream's files start on the device
}

// Stream is one sequential reader or writer, the unit of every workload:
// IOzone's and IOR's process, CeMSS's user, ALICE's DAQ writer. It moves
// Files files of FileSize bytes in Record-sized requests. Each request is
// split evenly over the Targets (striping; one target is a whole file on
// one server, as CASTOR places files) and, per target, crosses the network
// as a fluid flow and the device as requests. The two stages overlap
// across requests — up to Depth requests in flight, as a server's write
// buffer or a client's read-ahead lets them — but each stage serves one
// request at a time, in order.
type Stream struct {
	ID       int32
	Write    bool
	Targets  []Target
	FileSize int64
	Files    int
	Record   int64
	// Unit, when set, places the file on the targets unit by unit,
	// round robin; 0: each request split evenly over them.
	Unit  int64
	Depth int     // requests in flight (default 1: strictly synchronous)
	Limit float64 // per-flow cap (the client's NIC or TCP window), bytes/s
	// Latency is paid by each request's network stage before its bytes
	// move: a command's round trip (clients.latency_ms).
	Latency des.Time
	// Sync flushes the devices after each file, inside the timing (IOR
	// -e, fio end_fsync): a write stream's bytes are on the media.
	Sync bool
	// Random, when set, places each request at a random record-aligned
	// offset of the current file (HPCS scenarios 13 and 14: small-block
	// random I/O) instead of the next one.
	Random *rand.Rand
	// MaxOps, when set, ends the stream after that many requests.
	MaxOps int64
	// Sink, for a reader, is the local file it writes what it reads into
	// and fsyncs at each file's end (strata get); nil: memory.
	Sink *Sink
	// Source, when set, makes the stream a copy (a tier move): each
	// request is read from the Source targets, then written to the
	// Targets (Write is true).
	Source []Target
	Done   func()

	sim      *des.Sim
	file     int
	off      int64
	inflight int
	flushing bool
	Start    des.Time
	End      des.Time
	Bytes    int64
	Ops      int64
	issued   int64
	active   bool
	dirty    int64 // bytes of the current file in the sink's page cache
	// one queue per stage and target: requests wait their turn (a
	// copy's source in stages 2 and 3)
	stages [4][]stage
}

type stage struct {
	busy  bool
	queue []func(done func())
}

const evStream uint16 = 30

// Run starts the stream now.
func (st *Stream) Run(s *des.Sim) {
	st.sim = s
	st.Start = s.Now()
	st.active = true
	if st.Record <= 0 {
		st.Record = 1 << 20
	}
	if st.Files <= 0 {
		st.Files = 1
	}
	if st.Depth <= 0 {
		st.Depth = 1
	}
	for i := range st.stages {
		n := len(st.Targets)
		if i >= 2 {
			n = len(st.Source)
		}
		st.stages[i] = make([]stage, n)
	}
	st.fill()
}

// fill issues requests while the window allows.
func (st *Stream) fill() {
	for st.active && !st.flushing && st.inflight < st.Depth {
		if st.MaxOps > 0 && st.issued >= st.MaxOps {
			if st.inflight == 0 {
				st.finish()
			}
			return
		}
		if st.off >= st.FileSize {
			if st.inflight > 0 {
				return // finish the file first
			}
			st.off = 0
			st.file++
			if st.Write && st.Sync {
				st.flush()
				return
			}
			if st.Sink != nil && st.dirty > 0 {
				st.fsyncSink()
				return
			}
			if st.file >= st.Files {
				st.finish()
				return
			}
		}
		st.request()
	}
}

func (st *Stream) flush() {
	st.flushing = true
	left := len(st.Targets)
	for _, t := range st.Targets {
		t.Dev.Flush(func() {
			if left--; left > 0 {
				return
			}
			st.flushing = false
			if st.file >= st.Files {
				st.finish()
				return
			}
			st.fill()
		})
	}
}

// fsyncSink writes the file's dirty bytes to the sink's disk, then goes
// on with the next file (or ends): the reader waits for its fsync.
func (st *Stream) fsyncSink() {
	st.flushing = true
	n := st.dirty
	st.dirty = 0
	st.sim.Fluid.Start(&des.Flow{Path: []*des.Resource{st.Sink.Disk}, Size: n, Kind: evStream, Obj: st.ID, Done: func() {
		st.flushing = false
		if st.file >= st.Files {
			st.finish()
			return
		}
		st.fill()
	}})
}

func (st *Stream) request() {
	n := min(st.Record, st.FileSize-st.off)
	off := int64(st.file)*st.FileSize + st.off
	if st.Random != nil {
		n = min(st.Record, st.FileSize)
		off = int64(st.file)*st.FileSize + st.Random.Int64N(max(1, st.FileSize/n))*n
	}
	st.off += n
	st.inflight++
	st.issued++
	ps := st.pieces(off, n)
	left := len(ps)
	// past the page cache's share, the sink's disk writes back while
	// the data arrives: this request's bytes cross it too
	var extra *des.Resource
	if sk := st.Sink; sk != nil && !st.Write {
		if sk.Dirty > 0 && st.dirty >= sk.Dirty {
			extra = sk.Disk
		} else {
			st.dirty += n
		}
	}
	finish := func() {
		st.inflight--
		st.Bytes += n
		st.Ops++
		st.fill()
	}
	done := func() {
		if left--; left > 0 {
			return
		}
		// a reader into a local file copies the request into the page
		// cache after it arrives (strata get: read, then write(2))
		if sk := st.Sink; sk != nil && sk.Copy != nil && !st.Write {
			st.sim.Fluid.Start(&des.Flow{Path: []*des.Resource{sk.Copy}, Size: n, Kind: evStream, Obj: st.ID, Done: finish})
			return
		}
		finish()
	}
	if st.Source == nil {
		st.move(st.Targets, 0, st.Write, ps, extra, done)
		return
	}
	// a copy: the request is read from the source, then written
	src := splitOver(len(st.Source), st.Unit, off, n)
	read := len(src)
	st.move(st.Source, 2, false, src, nil, func() {
		if read--; read == 0 {
			st.move(st.Targets, 0, true, ps, nil, done)
		}
	})
}

// move runs a request's pieces on targets ts (stage queues from base):
// for a write the network then the device, for a read the device then
// the network; done is called after each piece.
func (st *Stream) move(ts []Target, base int, write bool, ps []piece, extra *des.Resource, done func()) {
	for _, p := range ps {
		i, piece, lba := p.target, p.size, ts[p.target].Base+p.off
		net := func(next func()) { st.transfer(ts[i].Path, piece, extra, next) }
		dev := func(next func()) {
			if write {
				ts[i].Dev.Write(lba, piece, next)
			} else {
				ts[i].Dev.Read(lba, piece, next)
			}
		}
		first, second := net, dev
		if !write {
			first, second = dev, net
		}
		st.enqueue(base, i, first, func() { st.enqueue(base+1, i, second, done) })
	}
}

// piece is the part of a request on one target, at off bytes into the
// stream's share of that target.
type piece struct {
	target    int
	off, size int64
}

// pieces splits the n bytes at file offset off over the targets: evenly
// (the remainder on the last), or with a stripe unit, unit by unit round
// robin.
func (st *Stream) pieces(off, n int64) []piece {
	return splitOver(len(st.Targets), st.Unit, off, n)
}

// splitOver splits n bytes at offset off over k targets, evenly or unit
// by unit.
func splitOver(targets int, unit, off, n int64) []piece {
	k := int64(targets)
	if unit <= 0 || k == 1 {
		ps := make([]piece, k)
		for i := range ps {
			ps[i] = piece{i, off / k, n / k}
		}
		ps[k-1].size = n - n/k*(k-1)
		return ps
	}
	var ps []piece
	for end := off + n; off < end; {
		u := off / unit
		size := min(end, (u+1)*unit) - off
		t := int(u % k)
		at := u/k*unit + off%unit
		if j := len(ps) - 1; j >= 0 && ps[j].target == t && ps[j].off+ps[j].size == at {
			ps[j].size += size
		} else {
			ps = append(ps, piece{t, at, size})
		}
		off += size
	}
	return ps
}

// enqueue runs work on stage s of target i when that stage is free, then
// next.
func (st *Stream) enqueue(s, i int, work func(func()), next func()) {
	g := &st.stages[s][i]
	g.queue = append(g.queue, func(release func()) {
		work(func() {
			release()
			next()
		})
	})
	st.kick(g)
}

func (st *Stream) kick(g *stage) {
	if g.busy || len(g.queue) == 0 {
		return
	}
	g.busy = true
	w := g.queue[0]
	g.queue = g.queue[1:]
	w(func() {
		g.busy = false
		st.kick(g)
	})
}

// transfer moves n bytes over a target's network path (and extra, when
// set), then calls next.
func (st *Stream) transfer(path []*des.Resource, n int64, extra *des.Resource, next func()) {
	if extra != nil {
		path = append(path[:len(path):len(path)], extra)
	}
	move := func() {
		if len(path) == 0 && st.Limit <= 0 {
			next()
			return
		}
		st.sim.Fluid.Start(&des.Flow{Path: path, Limit: st.Limit, Size: n, Done: next, Kind: evStream, Obj: st.ID})
	}
	if st.Latency > 0 { // each piece of a striped request, in parallel
		st.sim.After(st.Latency, evStream, st.ID, move)
		return
	}
	move()
}

// Sink is a client host's local file system as a reader that writes
// what it reads into a file and fsyncs it meets it: the data lands in the
// page cache as it arrives (that copy is the client CPU's, cpu_ms_per_mb),
// and each file's fsync writes what is still dirty at the disk's rate,
// shared with the host's other readers. Past Dirty bytes of one file (the
// stream's share of the kernel's background-writeback threshold) the
// disk writes back while the data arrives, so those bytes cross it then
// and not at the fsync.
type Sink struct {
	Disk  *des.Resource
	Dirty int64
	// Copy is the host's copy into the page cache, shared by its
	// readers (nil: free).
	Copy *des.Resource
}

func (st *Stream) finish() {
	if !st.active {
		return
	}
	st.active = false
	st.End = st.sim.Now()
	if st.Done != nil {
		st.Done()
	}
}

// Rate is the stream's bytes over its start-to-end time, bytes/s.
func (st *Stream) Rate() float64 {
	d := (st.End - st.Start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(st.Bytes) / d
}
