package sim

import (
	"fmt"
	"math"
)

// Term is one resource class on the data path and the most it can carry
// in aggregate.
type Term struct {
	Name    string  `json:"name"` // seed 002's notation: N/c, N·I, M·I, P·R …
	What    string  `json:"what"` // in words, with the numbers
	MBps    float64 `json:"mb_per_s"`
	Binding bool    `json:"binding,omitempty"`
}

// BoundResult is the analytic answer: S = min over the terms.
type BoundResult struct {
	Op string `json:"op"`
	// Unit is "ops/s" for metadata studies, whose terms and S are
	// operations per second in the MBps fields; "" for MB/s.
	Unit    string  `json:"unit,omitempty"`
	MBps    float64 `json:"mb_per_s"`
	Binding string  `json:"binding_term"`
	Terms   []Term  `json:"terms"`
}

// Bound generalises seed 002's S = min(N/c, N·I, M·I, P·R) to the whole
// path a study's data crosses: client CPUs and NICs, the switch, server
// NICs, memory copy and storage channels, and the devices (disks, arrays
// of P−1 data disks, calibrated curves). Only the parts the workload can
// use count: files laid out whole on one server use at most one device per
// stream, as CASTOR does. The binding term is the one that sets S.
func Bound(c *Config) BoundResult {
	if c.grouped() {
		return c.groupsBound()
	}
	w := c.Workload
	N, M := c.Clients.Count, c.Servers.Count
	streams := N * w.Streams
	b := BoundResult{Op: w.Op}
	add := func(name, what string, bps float64) {
		if bps > 0 && !math.IsInf(bps, 1) {
			b.Terms = append(b.Terms, Term{Name: name, What: what, MBps: round3(bps / 1e6)})
		}
	}
	switch w.Op {
	case "recall", "migrate":
		c.recallBound(add)
		return b.bind()
	case "site":
		c.siteBound(add)
		return b.bind()
	case "create", "stat", "remove":
		b.Unit = "ops/s"
		c.metaBound(add)
		return b.bind()
	}
	// what the layout can reach
	devs := M * c.Storage.PerServer
	servers := M
	switch {
	case w.OneDevice:
		devs, servers = 1, 1
	case w.Layout == "stripe":
		k := w.Stripe
		if k <= 0 || k > devs {
			k = devs
		}
		devs = min(devs, streams*k)
		servers = min(M, devs)
	default:
		servers = min(M, streams)
		devs = min(devs, streams)
	}
	if c.Clients.CPUPerMB > 0 {
		per := float64(c.Clients.CPUs) * 1e9 / c.Clients.CPUPerMB
		add("N/c", fmt.Sprintf("%d clients × %d CPUs at %.3g ms/MB", N, c.Clients.CPUs, c.Clients.CPUPerMB), float64(N)*per)
	}
	if c.Clients.SinkRate > 0 && w.Op != "write" {
		// readers writing local files: each file's bytes reach its
		// client's disk, at the fsync or in writeback (the fsync's wait,
		// serial with the read, is the DES's)
		add("N·D", fmt.Sprintf("%d clients' local disks at %s", N, mbps(float64(c.Clients.SinkRate))), float64(N)*float64(c.Clients.SinkRate))
	}
	if c.Clients.TCPWindow > 0 && c.Clients.Latency > 0 {
		per := float64(c.Clients.TCPWindow) / (2 * c.Clients.Latency / 1e3)
		add("streams·γ/2L", fmt.Sprintf("%d streams × %s window / (2 × %.3g ms)", streams, mbps(per), c.Clients.Latency), float64(streams)*per)
	}
	// a NIC, an uplink is full duplex: half the streams of a mixed
	// workload read, half write, so those links carry it both ways
	ways, dir := 1.0, ""
	if w.Op == "mixed" {
		ways, dir = 2, ", both ways"
	}
	add("N·I", fmt.Sprintf("%d clients × %s%s", N, mbps(float64(c.Clients.NIC)), dir), ways*float64(N)*float64(c.Clients.NIC))
	add("N·duplex", fmt.Sprintf("%d clients × %s in and out together", N, mbps(float64(c.Clients.Duplex))), float64(N)*float64(c.Clients.Duplex))
	if k := c.Network.RackSize; k > 0 {
		racks := (N + k - 1) / k
		add("racks·U", fmt.Sprintf("%d racks of %d clients × %s uplink%s", racks, k, mbps(float64(c.Network.RackUplink)), dir), ways*float64(racks)*float64(c.Network.RackUplink))
	}
	add("switch", "switch backplane "+mbps(float64(c.Network.Switch)), float64(c.Network.Switch))
	add("M·I", fmt.Sprintf("%d servers × %s%s", servers, mbps(float64(c.Servers.NIC)), dir), ways*float64(servers)*float64(c.Servers.NIC))
	add("M·duplex", fmt.Sprintf("%d servers × %s in and out together", servers, mbps(float64(c.Servers.Duplex))), float64(servers)*float64(c.Servers.Duplex))
	add("M·copy", fmt.Sprintf("%d servers × %s memory copy", servers, mbps(float64(c.Servers.Copy))), float64(servers)*float64(c.Servers.Copy))
	add("M·channel", fmt.Sprintf("%d servers × %s storage channel", servers, mbps(float64(c.Servers.Channel))), float64(servers)*float64(c.Servers.Channel))
	add("P·L", fmt.Sprintf("%d device ports × %s", devs, mbps(float64(c.Storage.Link))), float64(devs)*float64(c.Storage.Link))
	dev, what := c.deviceRate()
	add("P·R", fmt.Sprintf("%d × %s", devs, what), float64(devs)*dev)
	if cp := c.Storage.Curve; c.Storage.Kind == "curve" {
		r := cp.sharedRate(w.Op != "read")
		add("M·shared", fmt.Sprintf("%d servers × %s shared by their devices", servers, mbps(r)), float64(servers)*r)
	}
	if t := c.randomService(); t > 0 {
		// a closed loop: no more than streams × depth requests in
		// flight, none faster than one device's service time
		q := streams * w.Depth
		add("Q/t", fmt.Sprintf("%d requests in flight / %.3g ms each", q, t*1e3), float64(q)*float64(w.Record)/t)
	}
	return b.bind()
}

// bind sets S to the least term and marks it.
func (b BoundResult) bind() BoundResult {
	b.MBps = math.Inf(1)
	bi := -1
	for i, t := range b.Terms {
		if t.MBps < b.MBps {
			b.MBps, bi = t.MBps, i
		}
	}
	if bi >= 0 {
		b.Terms[bi].Binding = true
		b.Binding = b.Terms[bi].Name
	} else {
		b.MBps = 0
	}
	return b
}

// deviceRate is one device's streaming rate for the study's operation.
func (c *Config) deviceRate() (float64, string) {
	op := c.Workload.Op
	switch c.Storage.Kind {
	case "disk", "raid5", "raid6", "declustered":
		p := c.diskParams()
		r := float64(p.RateOD) // files start at the outer edge
		if t := c.randomService(); t > 0 {
			r = float64(c.Workload.Record) / t
			if c.Storage.Kind == "disk" {
				return r, fmt.Sprintf("disk at %.0f random requests/s", 1/t)
			}
			// random reads use every member; a small write reads and
			// writes data and parity: four member I/Os on RAID-5, six
			// on RAID-6
			a := c.Storage.Array
			n := float64(a.Disks)
			if op != "read" {
				n /= float64(2 + 2*a.parity)
			}
			return n * r, fmt.Sprintf("%s of %d disks at %.0f random requests/s each", c.Storage.arrayName(), a.Disks, 1/t)
		}
		if c.Storage.Kind == "disk" {
			return r, "disk at " + mbps(r)
		}
		a := c.Storage.Array
		if c.Storage.Kind == "declustered" {
			return float64(a.Disks) * a.dataFraction() * r, fmt.Sprintf("%s over %d disks at %s", c.Storage.arrayName(), a.Disks, mbps(r))
		}
		n := a.Disks - a.parity
		return float64(n) * r, fmt.Sprintf("%s (%d+%d) of disks at %s", c.Storage.arrayName(), n, a.parity, mbps(r))
	default:
		cp := c.Storage.Curve
		r := cp.deviceRate(true)
		switch op {
		case "read":
			r = cp.deviceRate(false)
		case "mixed":
			r = (cp.deviceRate(false) + cp.deviceRate(true)) / 2
		}
		per := c.Clients.Count * c.Workload.Streams / max(1, c.Servers.Count*c.Storage.PerServer)
		if sc := cp.scale(op != "read"); sc != nil {
			r *= interp(cp.Streams, sc, max(1, per))
		}
		return r, "device at " + mbps(r)
	}
}

// randomService is one disk's time for a random request of the study's
// record size (the mean seek over the span the streams use, half a
// revolution, command overhead, transfer), in seconds; 0 unless the
// workload is random on disks.
func (c *Config) randomService() float64 {
	if c.Workload.Pattern != "random" || c.Storage.Kind == "curve" {
		return 0
	}
	p := c.diskParams()
	w := c.Workload
	// seeks stay within the span the device's streams use: the mean
	// seek over a fraction f of the stroke is track + (avg − track)·√f
	// (the disk model's √d curve)
	devs := c.Servers.Count * c.Storage.PerServer
	if w.OneDevice {
		devs = 1
	}
	perDev := (c.Clients.Count*w.Streams + devs - 1) / devs
	cap := float64(p.Capacity)
	if a := c.Storage.Array; a.parity > 0 {
		cap *= float64(a.Disks) * a.dataFraction()
	}
	f := math.Min(1, float64(perDev)*float64(w.File)*float64(w.Files)/cap)
	seek := p.SeekTrack + (p.SeekAvg-p.SeekTrack)*math.Sqrt(f)
	return (seek+30e3/p.RPM+p.Overhead)/1e3 + float64(w.Record)/float64(p.RateOD)
}

func mbps(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.4g GB/s", bps/1e9)
	default:
		return fmt.Sprintf("%.4g MB/s", bps/1e6)
	}
}
