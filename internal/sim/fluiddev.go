package sim

import (
	"sort"

	"github.com/strata-storage/strata/internal/des"
)

// CurveParams describe a device by what a benchmark sees of it: each
// request costs t0 plus its size over the rate (t(s) = t0 + s/R, the fit
// strata sim calibrate makes), and the device's total rate with n streams
// is Rate·Scale(n). This is the model for devices whose mechanism we do not
// simulate: a file system on this machine, an SSD, a calibrated array.
type CurveParams struct {
	ReadRate  Rate    `toml:"read_rate"`
	WriteRate Rate    `toml:"write_rate"`
	ReadT0    float64 `toml:"read_t0_ms"`
	WriteT0   float64 `toml:"write_t0_ms"`
	// Streams and the scales give capacity(n) = rate·scale(n) for n
	// streams, interpolated linearly between points and held flat beyond.
	Streams    []int     `toml:"streams"`
	ReadScale  []float64 `toml:"read_scale"`
	WriteScale []float64 `toml:"write_scale"`
	// Pieces, when set, replace the single (t0, rate) per request size:
	// requests up to Upto bytes use that piece's fit.
	ReadPieces  []Piece `toml:"read_pieces"`
	WritePieces []Piece `toml:"write_pieces"`
	// Granules, when set, are the least a request moves on the device:
	// a smaller request costs as much as one granule (Strata's movers
	// read and verify whole 1 MiB checksum chunks; a disk reads whole
	// sectors, an SSD whole pages).
	ReadGranule  Size `toml:"read_granule"`
	WriteGranule Size `toml:"write_granule"`
	// Shared rates, when set, are the most all of one server's curve
	// devices move together: the machine they share (CPUs, memory
	// copy, the one disk under several device directories).
	SharedReadRate  Rate `toml:"shared_read_rate"`
	SharedWriteRate Rate `toml:"shared_write_rate"`
}

// Piece is one segment of a piecewise t(s) = t0 + s/R fit.
type Piece struct {
	Upto Size    `toml:"upto"`
	T0   float64 `toml:"t0_ms"`
	Rate Rate    `toml:"rate"`
}

// CurveDevice is a fluid device: each request waits its t0, then flows
// through the device's resource, shared max-min with the other streams.
type CurveDevice struct {
	sim    *des.Sim
	p      CurveParams
	res    *des.Resource
	shared *des.Resource // the server's shared limit, or nil
	id     int32
	out    int // requests in the device (for Flush)
	wt     []func()
}

// NewCurveDevice makes a curve device; write says which rate bounds the
// shared resource (a study's streams read or write, rarely both). shared,
// if not nil, is the limit the server's devices share.
func NewCurveDevice(s *des.Sim, id int32, name string, p CurveParams, write bool, shared *des.Resource) *CurveDevice {
	d := &CurveDevice{sim: s, p: p, id: id, shared: shared}
	// With capacity(n) from scaling runs, the rate is the last piece's
	// (one stream of their requests) times scale(n). Without, each
	// request flows at most at its own piece's rate and the device moves
	// at least what its fastest piece says one stream does: a fit's
	// pieces need not rise with size (this machine's uncapped reads are
	// slower above 16 MiB than below), and a device held to the last
	// piece's rate would not give the fit's own points back.
	rate := p.deviceRate(write)
	d.res = s.Fluid.NewResource(name, rate)
	if sc := p.scale(write); sc != nil {
		d.res.CapN = func(n int) float64 { return rate * interp(p.Streams, sc, n) }
	}
	return d
}

// sharedRate is the server-wide limit for the operation (0: none).
func (p *CurveParams) sharedRate(write bool) float64 {
	if write {
		return float64(p.SharedWriteRate)
	}
	return float64(p.SharedReadRate)
}

// scale is capacity(n)/capacity(1) for the operation, nil if not given.
func (p *CurveParams) scale(write bool) []float64 {
	sc := p.ReadScale
	if write {
		sc = p.WriteScale
	}
	if len(p.Streams) == 0 || len(sc) != len(p.Streams) {
		return nil
	}
	return sc
}

func interp(xs []int, ys []float64, n int) float64 {
	if n <= xs[0] {
		return ys[0]
	}
	for i := 1; i < len(xs); i++ {
		if n <= xs[i] {
			f := float64(n-xs[i-1]) / float64(xs[i]-xs[i-1])
			return ys[i-1] + f*(ys[i]-ys[i-1])
		}
	}
	return ys[len(ys)-1]
}

// deviceRate is what the device moves at most, all its streams together,
// before capacity(n) (see NewCurveDevice).
func (p *CurveParams) deviceRate(write bool) float64 {
	rate, pieces := float64(p.ReadRate), p.ReadPieces
	if write {
		rate, pieces = float64(p.WriteRate), p.WritePieces
	}
	if p.scale(write) != nil {
		return rate
	}
	for _, pc := range pieces {
		rate = max(rate, float64(pc.Rate))
	}
	return rate
}

// cost gives (t0, rate) for a request of size n.
func (d *CurveDevice) cost(write bool, n int64) (des.Time, float64) {
	t0, rate, pieces := d.p.ReadT0, float64(d.p.ReadRate), d.p.ReadPieces
	if write {
		t0, rate, pieces = d.p.WriteT0, float64(d.p.WriteRate), d.p.WritePieces
	}
	if len(pieces) > 0 {
		i := sort.Search(len(pieces), func(i int) bool { return int64(pieces[i].Upto) >= n })
		if i == len(pieces) {
			i--
		}
		t0, rate = pieces[i].T0, float64(pieces[i].Rate)
	}
	return des.FromSeconds(t0 / 1e3), rate
}

func (d *CurveDevice) op(write bool, size int64, done func()) {
	d.out++
	t0, rate := d.cost(write, size)
	end := func() {
		d.out--
		if done != nil {
			done()
		}
		if d.out == 0 {
			w := d.wt
			d.wt = nil
			for _, f := range w {
				f()
			}
		}
	}
	g := d.p.ReadGranule
	if write {
		g = d.p.WriteGranule
	}
	moved := max(size, int64(g))
	d.sim.After(t0, evCurve, d.id, func() {
		path := []*des.Resource{d.res}
		if d.shared != nil {
			path = append(path, d.shared)
		}
		d.sim.Fluid.Start(&des.Flow{Path: path, Limit: rate, Size: moved, Done: end, Kind: evCurve, Obj: d.id})
	})
}

const evCurve uint16 = 40

// Read implements Device.
func (d *CurveDevice) Read(_, size int64, done func()) { d.op(false, size, done) }

// Write implements Device.
func (d *CurveDevice) Write(_, size int64, done func()) { d.op(true, size, done) }

// Flush implements Device: writes are durable when their request ends.
func (d *CurveDevice) Flush(done func()) {
	if d.out == 0 {
		d.sim.After(0, evCurve, d.id, done)
		return
	}
	d.wt = append(d.wt, done)
}
