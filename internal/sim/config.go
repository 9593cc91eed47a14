package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/des"
)

// Config is one study: a topology and a workload (TOML; examples/sim/).
type Config struct {
	Name     string         `toml:"name"`
	Note     string         `toml:"note"`
	Clients  ClientConfig   `toml:"clients"`
	Network  NetworkConfig  `toml:"network"`
	Servers  ServerConfig   `toml:"servers"`
	Storage  StorageConfig  `toml:"storage"`
	Workload WorkloadConfig `toml:"workload"`
	// Tape is the library recall workloads run on.
	Tape TapeConfig `toml:"tape"`
	// Site is a site study's disk tier (op = "site").
	Site SiteConfig `toml:"site"`
	// Catalog is a metadata study's server (op = "create", "stat",
	// "remove").
	Catalog CatalogConfig `toml:"catalog"`
	// Sweep maps a parameter ("storage.array.stripe_unit") to the values
	// it takes; sweep points are the cross product, in key order.
	Sweep map[string][]string `toml:"sweep"`
	// Plot names the sweep key on the x axis and the one that makes the
	// curves (optional).
	Plot PlotConfig `toml:"plot"`

	dir string // the study file's directory: relative paths start there
	// classes and parts are the study's server classes and client
	// groups as the DES builds them (groups.go)
	classes []serverClass
	parts   []part
}

// PlotConfig chooses a sweep's chart axes.
type PlotConfig struct {
	X      string `toml:"x"`
	Series string `toml:"series"`
	LogX   *bool  `toml:"log_x"`
	// Metric is "aggregate" (default), "per_stream" (each stream's
	// share: the aggregate over the streams of that kind), or for recall
	// studies "latency_mean", "latency_p95" or "mounts"; "iops" is
	// requests per second; with failed array members, "degraded" (the
	// users' MB/s from the failure to the rebuild's end) or
	// "rebuild_hours"; with tape.recopy, "recopy_hours"; with client
	// groups, "groups" (each group's MB/s).
	Metric string `toml:"metric"`
}

// ClientConfig: N clients with NICs of I bytes/s and c CPU seconds per
// byte (seed 002's N, I and c).
type ClientConfig struct {
	Count    int     `toml:"count"`
	NIC      Rate    `toml:"nic"`
	CPUPerMB float64 `toml:"cpu_ms_per_mb"` // c, in ms of CPU per MB processed
	CPUs     int     `toml:"cpus"`
	// Latency is paid once per request (a command's round trip), or with
	// TCPWindow is the path's delay, which caps each flow at
	// window/(2·latency) instead.
	Latency   float64 `toml:"latency_ms"`
	TCPWindow Size    `toml:"tcp_window"` // caps a flow at window/(2·latency)
	// SinkRate is the client's local disk, when readers write what they
	// read into local files and fsync them as `strata get` does (0: reads
	// go to memory, as to /dev/null): what the fsync at each file's end
	// and the kernel's background writeback move at. SinkDirty is the
	// host's page cache for them: dirty bytes before background writeback
	// starts (Linux: dirty_background_ratio of available memory); 0: no
	// limit, every byte is written by the fsync.
	SinkRate  Rate `toml:"sink_rate"`
	SinkDirty Size `toml:"sink_dirty"`
	// SinkCopy is the rate a reader's bytes are copied into the page
	// cache of its local file after each request (the write(2) of a
	// get), shared by the host's readers; bench/sinkcal measures it.
	// 0: free.
	SinkCopy Rate `toml:"sink_copy"`
	// Duplex caps a client's NIC in and out together (a host bus, a
	// crossbar port whose total is less than twice one direction, as
	// CeMSS's); 0: each direction has the whole NIC.
	Duplex Rate `toml:"duplex"`
	// Groups, when set, replace the one group of clients [clients] and
	// [workload] describe by several ([[clients.group]]), each with its
	// own count, NIC and workload, using one server class: a site's
	// ingest, its analysis and its tier moves in one study.
	Groups []ClientGroup `toml:"group"`
}

// ClientGroup is one group of a study's clients. Unset keys are the
// study's: [clients] for the hosts, [workload] for what they do.
type ClientGroup struct {
	Name  string `toml:"name"`
	Count int    `toml:"count"`
	NIC   Rate   `toml:"nic"`
	// Class names the server class the group's files are on ("": the
	// first); From, for op = "copy", the class they are read from.
	Class   string `toml:"class"`
	From    string `toml:"from"`
	Op      string `toml:"op"` // write, read, mixed; copy (From to Class)
	Streams int    `toml:"streams"`
	Record  Size   `toml:"record"`
	File    Size   `toml:"file_size"`
	Files   int    `toml:"files"`
	Layout  string `toml:"layout"`
	Stripe  int    `toml:"stripe"`
	Depth   int    `toml:"depth"`
}

// NetworkConfig: the switch between clients and servers.
type NetworkConfig struct {
	Switch Rate `toml:"switch"` // backplane; 0: non-blocking
	// RackSize clients share one edge switch whose RackUplink (each way)
	// joins the core: an oversubscribed tier when RackSize × NIC exceeds
	// it. 0: clients attach to the core directly.
	RackSize   int  `toml:"rack_size"`
	RackUplink Rate `toml:"rack_uplink"`
}

// ServerConfig: M I/O servers (movers, NFS servers, disk servers).
type ServerConfig struct {
	Count int  `toml:"count"`
	NIC   Rate `toml:"nic"`
	// Copy is the server's memory-copy/CPU bandwidth for data it moves; 0:
	// not a limit.
	Copy Rate `toml:"copy"`
	// Channel is the server's link to its storage (FC/SAS HBA); 0: none.
	Channel Rate `toml:"channel"`
	// Duplex caps the server's NIC in and out together; 0: none.
	Duplex Rate `toml:"duplex"`
	// Classes, when set, replace the one class of servers [servers] and
	// [storage] describe by several ([[servers.class]]): an SSD tier,
	// HDD arrays and tape drives in one study.
	Classes []ServerClass `toml:"class"`
}

// ServerClass is one class of a study's servers with the storage behind
// each. Unset keys are [servers]'s; Storage is the class's own.
type ServerClass struct {
	Name    string        `toml:"name"`
	Count   int           `toml:"count"`
	NIC     Rate          `toml:"nic"`
	Copy    Rate          `toml:"copy"`
	Channel Rate          `toml:"channel"`
	Duplex  Rate          `toml:"duplex"`
	Storage StorageConfig `toml:"storage"`
}

// StorageConfig: what each server has behind it.
type StorageConfig struct {
	Kind      string       `toml:"kind"`       // disk, raid5, raid6, declustered, curve
	PerServer int          `toml:"per_server"` // devices per server
	Link      Rate         `toml:"link"`       // each device's host port (FC, SAS); 0: none
	Disk      string       `toml:"disk"`       // preset for kind=disk and the arrays' members
	DiskOver  *DiskParams  `toml:"disk_params"`
	Array     ArrayParams  `toml:"array"`
	Curve     *CurveParams `toml:"curve"`
}

// WorkloadConfig: streams, as strata bench runs them, or recalls from
// tape.
type WorkloadConfig struct {
	Op      string `toml:"op"`      // write, read, mixed (half the streams each), recall, migrate
	Streams int    `toml:"streams"` // per client
	Record  Size   `toml:"record"`
	File    Size   `toml:"file_size"`
	Files   int    `toml:"files"` // per stream
	Layout  string `toml:"layout"`
	// Stripe is how many servers each file is striped over (layout
	// "stripe"); 0: all.
	Stripe int `toml:"stripe"`
	// StripeUnit, with layout "stripe", maps a file onto its devices
	// unit by unit, round robin (RAID-0, Strata's stripes): a request
	// smaller than the unit touches one device. 0: every request is
	// split evenly over the stripe's devices (PVFS's small units).
	StripeUnit Size `toml:"stripe_unit"`
	Depth      int  `toml:"depth"` // requests in flight per stream
	Sync       bool `toml:"sync"`
	// Streams per device: when set, every stream of the study goes to
	// the same device (seed 003's "N streams to one array").
	OneDevice bool `toml:"one_device"`
	// Pattern is "sequential" (default) or "random": each request at a
	// random record-aligned offset of the stream's file.
	Pattern string `toml:"pattern"`
	// Requests, when set, ends each stream after that many requests
	// (fio's number_ios): a random workload over a large file in seconds.
	Requests int64 `toml:"requests"`
	// Recall: Files files of File bytes drawn at random from the first
	// Spread cartridges (0: all), all at once or ArrivalRate per second
	// (Poisson); or the requests of a Trace (CSV, see ReadTrace).
	ArrivalRate float64 `toml:"arrival_rate"`
	Spread      int     `toml:"spread"`
	Trace       string  `toml:"trace"`
	// Site (op = "site", site.go): files arrive at ArrivalRate for
	// Duration, only during data taking when IngestOn and IngestOff are
	// set (runs of IngestOn, pauses of IngestOff), their sizes drawn from
	// SizeDist ("fixed", "exponential", "lognormal" with σ SizeSigma)
	// with mean File, written by Streams ingest streams; RecallPerMonth
	// of the files on tape are recalled every 30 days; users read the
	// disk tier at ReadRate.
	Duration       string  `toml:"duration"`
	IngestOn       string  `toml:"ingest_on"`
	IngestOff      string  `toml:"ingest_off"`
	SizeDist       string  `toml:"size_dist"`
	SizeSigma      float64 `toml:"size_sigma"`
	RecallPerMonth float64 `toml:"recall_per_month"`
	ReadRate       Rate    `toml:"read_rate"`
	// Arrivals replays a site's ingest instead (CSV, see ReadArrivals):
	// each file at its time with its size; Trace, in a site study,
	// replays its recalls instead of RecallPerMonth.
	Arrivals string `toml:"arrivals"`

	duration, ingestOn, ingestOff des.Time
}

// Load reads a study's configuration.
func Load(path string) (*Config, error) {
	st, err := LoadStudy(path)
	if err != nil {
		return nil, err
	}
	return st.Config, nil
}

// Parse reads a study from TOML; unknown keys are errors, so a typo is not
// silently a default.
func Parse(b []byte) (*Config, error) {
	var c Config
	if err := config.DecodeStrict(b, &c); err != nil {
		return nil, err
	}
	if err := c.fill(); err != nil {
		return nil, err
	}
	return &c, nil
}

// fill applies defaults and checks the study.
func (c *Config) fill() error {
	if c.Clients.Count <= 0 {
		c.Clients.Count = 1
	}
	if c.Clients.CPUs <= 0 {
		c.Clients.CPUs = 1
	}
	if c.Servers.Count <= 0 {
		c.Servers.Count = 1
	}
	if c.Storage.PerServer <= 0 {
		c.Storage.PerServer = 1
	}
	if n := c.Network; n.RackSize < 0 || n.RackSize > 0 && n.RackUplink <= 0 {
		return fmt.Errorf("network.rack_size = %d: want ≥ 0, and with racks a rack_uplink rate", n.RackSize)
	}
	if c.Storage.Kind == "" {
		c.Storage.Kind = "disk"
	}
	switch c.Storage.Kind {
	case "disk", "raid5", "raid6", "declustered":
		name := c.Storage.Disk
		if name == "" {
			name = "sata-7k2"
			c.Storage.Disk = name
		}
		if _, ok := DiskPresets[name]; !ok {
			return fmt.Errorf("storage.disk %q: want one of %s", name, strings.Join(presetNames(), ", "))
		}
		if err := c.Storage.fillArray(); err != nil {
			return err
		}
	case "curve":
		if c.Storage.Curve == nil || c.Storage.Curve.ReadRate <= 0 && c.Storage.Curve.WriteRate <= 0 {
			return fmt.Errorf("storage.kind = \"curve\" needs [storage.curve] with read_rate or write_rate")
		}
	default:
		return fmt.Errorf("storage.kind %q: want disk, raid5, raid6, declustered or curve", c.Storage.Kind)
	}
	w := &c.Workload
	if err := oneOf("workload.op", &w.Op, "write", "read", "mixed", "recall", "migrate", "site", "create", "stat", "remove"); err != nil {
		return err
	}
	if err := oneOf("workload.layout", &w.Layout, "distribute", "stripe"); err != nil {
		return err
	}
	if err := oneOf("workload.pattern", &w.Pattern, "sequential", "random"); err != nil {
		return err
	}
	if err := oneOf("plot.metric", &c.Plot.Metric, "aggregate", "per_stream", "latency_mean", "latency_p95", "mounts", "iops", "degraded", "rebuild_hours", "recopy_hours", "groups"); err != nil {
		return err
	}
	if w.Streams <= 0 {
		w.Streams = 1
	}
	if w.Record <= 0 {
		w.Record = 1 << 20
	}
	if w.File <= 0 {
		w.File = 1 << 30
	}
	if w.Files <= 0 {
		w.Files = 1
	}
	if w.Depth <= 0 {
		w.Depth = 2
	}
	if w.ArrivalRate < 0 {
		return fmt.Errorf("workload.arrival_rate = %g: want ≥ 0 requests/s", w.ArrivalRate)
	}
	if err := w.fillSite(); err != nil {
		return err
	}
	if err := c.Site.fill(); err != nil {
		return err
	}
	if err := c.Catalog.fill(); err != nil {
		return err
	}
	if err := c.Tape.fill(); err != nil {
		return err
	}
	return c.fillGroups()
}

// fillArray checks an array's parameters: enough members for its parity,
// no more failed members than the parity covers, a failure time.
func (sc *StorageConfig) fillArray() error {
	a := &sc.Array
	switch sc.Kind {
	case "raid5":
		a.parity = 1
	case "raid6":
		a.parity = 2
	case "declustered":
		a.parity = a.Parity
		if a.parity == 0 {
			a.parity = 2
		}
		if a.parity < 1 || a.parity > 4 {
			return fmt.Errorf("storage.array.parity = %d: want 1 to 4 parity units per stripe", a.Parity)
		}
		if a.Width == 0 {
			a.Width = min(a.Disks, 8+a.parity)
		}
		if a.Width < a.parity+2 || a.Width > a.Disks {
			return fmt.Errorf("storage.array.width = %d: want %d to disks (%d) units per stripe", a.Width, a.parity+2, a.Disks)
		}
		a.width = a.Width
	default:
		if a.Failed != 0 {
			return fmt.Errorf("storage.array.failed = %d: only arrays (raid5, raid6, declustered) have members to fail", a.Failed)
		}
		return nil
	}
	if sc.Kind != "declustered" && (a.Width != 0 || a.Parity != 0) {
		return fmt.Errorf("storage.array.width and parity are for storage.kind = \"declustered\"")
	}
	name := sc.arrayName()
	if a.Disks < a.parity+2 {
		return fmt.Errorf("storage.array.disks = %d: a %s array needs at least %d", a.Disks, name, a.parity+2)
	}
	if a.Failed < 0 || a.Failed > a.parity {
		return fmt.Errorf("storage.array.failed = %d: a %s array survives at most %d", a.Failed, name, a.parity)
	}
	if a.FailAt != "" {
		d, err := time.ParseDuration(a.FailAt)
		if err != nil || d < 0 {
			return fmt.Errorf("storage.array.fail_at %q: want a duration from the start (\"0s\", \"10m\")", a.FailAt)
		}
		a.failAt = des.Time(d)
	}
	if a.Rebuild && a.Failed == 0 {
		return fmt.Errorf("storage.array.rebuild = true with no failed member: set storage.array.failed")
	}
	return nil
}

// arrayName is "RAID-5", "RAID-6" or "declustered 8+2".
func (sc *StorageConfig) arrayName() string {
	switch {
	case sc.Kind == "declustered":
		return fmt.Sprintf("declustered %d+%d", sc.Array.width-sc.Array.parity, sc.Array.parity)
	case sc.Array.parity == 2:
		return "RAID-6"
	}
	return "RAID-5"
}

// dataFraction is the share of an array's members' bytes that is data.
func (a ArrayParams) dataFraction() float64 {
	w := a.width
	if w == 0 {
		w = a.Disks
	}
	return float64(w-a.parity) / float64(w)
}

// fillSite checks a site study's workload keys.
func (w *WorkloadConfig) fillSite() error {
	if err := oneOf("workload.size_dist", &w.SizeDist, "fixed", "exponential", "lognormal"); err != nil {
		return err
	}
	if w.SizeSigma <= 0 {
		w.SizeSigma = 1
	}
	if w.Op != "site" {
		return nil
	}
	if w.Arrivals != "" {
		if w.ArrivalRate != 0 || w.Duration != "" || w.IngestOn != "" || w.IngestOff != "" {
			return fmt.Errorf("workload.arrivals replays the files that arrive: arrival_rate, duration, ingest_on and ingest_off do not apply")
		}
		if w.Streams <= 0 {
			w.Streams = 1
		}
		return w.checkRecalls()
	}
	if w.ArrivalRate <= 0 {
		return fmt.Errorf("workload.arrival_rate = %g: a site study needs files arriving (files/s)", w.ArrivalRate)
	}
	if err := w.checkRecalls(); err != nil {
		return err
	}
	for _, x := range []struct {
		key, v string
		dst    *des.Time
		need   bool
	}{{"duration", w.Duration, &w.duration, true}, {"ingest_on", w.IngestOn, &w.ingestOn, w.IngestOff != ""}, {"ingest_off", w.IngestOff, &w.ingestOff, w.IngestOn != ""}} {
		if x.v == "" && !x.need {
			continue
		}
		d, err := time.ParseDuration(x.v)
		if err != nil || d <= 0 {
			return fmt.Errorf("workload.%s %q: want a duration (\"8760h\" for a year)", x.key, x.v)
		}
		*x.dst = des.Time(d)
	}
	return nil
}

// checkRecalls checks a site study's recalls: a fraction a month, or a
// trace.
func (w *WorkloadConfig) checkRecalls() error {
	if w.RecallPerMonth < 0 || w.RecallPerMonth > 1 {
		return fmt.Errorf("workload.recall_per_month = %g: want a fraction of the archive in [0, 1]", w.RecallPerMonth)
	}
	if w.Trace != "" && w.RecallPerMonth > 0 {
		return fmt.Errorf("workload.trace replays the recalls: recall_per_month does not apply")
	}
	return nil
}

// oneOf checks that *v is one of allowed, the first being the default
// when *v is empty.
func oneOf(key string, v *string, allowed ...string) error {
	if *v == "" {
		*v = allowed[0]
		return nil
	}
	for _, a := range allowed {
		if *v == a {
			return nil
		}
	}
	return fmt.Errorf("%s %q: want %s or %s", key, *v, strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])
}

func presetNames() []string {
	var n []string
	for k := range DiskPresets {
		n = append(n, k)
	}
	sortStrings(n)
	return n
}

// diskParams is the member/disk model: the preset with overrides.
func (c *Config) diskParams() DiskParams {
	p := DiskPresets[c.Storage.Disk]
	if o := c.Storage.DiskOver; o != nil {
		overlay(&p, o)
	}
	return p
}

// overlay copies o's set (non-zero) fields onto p.
func overlay(p, o *DiskParams) {
	set := func(dst *float64, v float64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&p.RPM, o.RPM)
	set(&p.SeekAvg, o.SeekAvg)
	set(&p.SeekTrack, o.SeekTrack)
	set(&p.Settle, o.Settle)
	set(&p.Overhead, o.Overhead)
	for _, f := range []struct{ dst, v *Size }{{&p.RateOD, &o.RateOD}, {&p.RateID, &o.RateID}, {&p.Capacity, &o.Capacity}, {&p.Cache, &o.Cache}, {&p.Interface, &o.Interface}, {&p.ReadAheadGap, &o.ReadAheadGap}, {&p.Prefetch, &o.Prefetch}} {
		if *f.v != 0 {
			*f.dst = *f.v
		}
	}
	if o.Zones != 0 {
		p.Zones = o.Zones
	}
	if o.Segments != 0 {
		p.Segments = o.Segments
	}
}
