package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/chart"
	"github.com/strata-storage/strata/internal/des"
)

// A site study (workload.op = "site") runs a site's whole load at once on
// one disk tier and one library: data arriving (a Poisson stream of files
// of a size distribution, in data-taking periods) written to the disk
// tier by ingest streams; migration's policy passes reading it back to
// tape; recalls of migrated files (a fraction of the archive per month)
// through Strata's scheduler, written to the disk tier; users reading
// from the disk tier. The disk tier is one fluid resource
// (tape.buffer_rate) all of them share, max-min; the drives and the robot
// are shared as strata serve shares them: a migration writer takes a drive
// the recaller has left free (core's takeDrive, which polls every 100 ms:
// the recaller, woken when a drive frees, decides first), recalls take
// the drives no writer holds, up to recall_drives. The migration and
// recall models are the ones the migrate and recall studies run.

// Arrival is one file of an arrivals trace (workload.arrivals): Size
// bytes arriving at Time seconds.
type Arrival struct {
	Time float64
	Size int64
}

// ReadArrivals reads an arrivals trace: CSV rows of time_s, size (a
// header row is allowed), in order of time.
func ReadArrivals(r io.Reader) ([]Arrival, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 2
	var out []Arrival
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("arrivals: %w", err)
		}
		if line == 1 && rec[0] == "time_s" {
			continue
		}
		t, e1 := strconv.ParseFloat(rec[0], 64)
		size, e2 := strconv.ParseInt(rec[1], 10, 64)
		if err := errors.Join(e1, e2); err != nil || t < 0 || math.IsNaN(t) || t > maxTraceSeconds || size < 1 || len(out) > 0 && t < out[len(out)-1].Time {
			return nil, fmt.Errorf("arrivals: row %d: want time_s ≥ 0 (not before the row above), size ≥ 1: %q", line, strings.Join(rec, ","))
		}
		out = append(out, Arrival{Time: t, Size: size})
	}
	if len(out) == 0 {
		return nil, errors.New("arrivals: no files")
	}
	return out, nil
}

// maxTraceSeconds bounds a trace's times: a century, far inside what the
// DES's clock holds.
const maxTraceSeconds = 100 * 365 * 24 * 3600

// WriteArrivals writes arrivals in ReadArrivals' format.
func WriteArrivals(w io.Writer, arr []Arrival) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"time_s", "size"})
	for _, a := range arr {
		cw.Write([]string{strconv.FormatFloat(a.Time, 'f', -1, 64), strconv.FormatInt(a.Size, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// readArrivals reads the arrivals trace workload.arrivals names.
func (c *Config) readArrivals() ([]Arrival, error) {
	f, err := c.studyFile("workload.arrivals", c.Workload.Arrivals)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadArrivals(f)
}

// SiteConfig is a site study's disk tier ([site]): Arrays arrays, each
// streaming ArrayRate (an array study's answer: raid-rebuild.toml's
// healthy rate), instead of tape.buffer_rate; from RebuildAt one of them
// rebuilds a member for RebuildFor, giving the site RebuildShare of its
// rate meanwhile (raid-rebuild.toml's degraded over healthy).
type SiteConfig struct {
	Arrays       int     `toml:"arrays"`
	ArrayRate    Rate    `toml:"array_rate"`
	RebuildAt    string  `toml:"rebuild_at"`
	RebuildFor   string  `toml:"rebuild_for"`
	RebuildShare float64 `toml:"rebuild_share"`

	rebuildAt, rebuildFor des.Time
}

func (sc *SiteConfig) fill() error {
	if sc.Arrays < 0 || sc.Arrays > 0 && sc.ArrayRate <= 0 {
		return fmt.Errorf("site.arrays = %d: want arrays ≥ 1 with site.array_rate", sc.Arrays)
	}
	if sc.RebuildAt == "" {
		return nil
	}
	if sc.Arrays == 0 {
		return fmt.Errorf("site.rebuild_at needs site.arrays and site.array_rate")
	}
	for _, x := range []struct {
		key, v string
		dst    *des.Time
	}{{"rebuild_at", sc.RebuildAt, &sc.rebuildAt}, {"rebuild_for", sc.RebuildFor, &sc.rebuildFor}} {
		d, err := time.ParseDuration(x.v)
		if err != nil || d < 0 {
			return fmt.Errorf("site.%s %q: want a duration (\"2000h\")", x.key, x.v)
		}
		*x.dst = des.Time(d)
	}
	if sc.RebuildShare < 0 || sc.RebuildShare > 1 {
		return fmt.Errorf("site.rebuild_share = %g: want the fraction of the array's rate left to the site, in [0, 1]", sc.RebuildShare)
	}
	return nil
}

// diskRate is the disk tier's bandwidth.
func (c *Config) diskRate() float64 {
	if sc := c.Site; sc.Arrays > 0 {
		return float64(sc.Arrays) * float64(sc.ArrayRate)
	}
	return float64(c.Tape.BufferRate)
}

// SiteResult is what a site study reports.
type SiteResult struct {
	// Seconds is the run: the first arrival to the last file on tape, or
	// to the last recall when later.
	Seconds float64 `json:"seconds"`
	// Ingest: files and bytes that arrived, the offered rate over the
	// arrival period, and each file's wait from arrival to on disk.
	Files       int     `json:"files"`
	Bytes       int64   `json:"bytes"`
	OfferedMBps float64 `json:"offered_mb_per_s"`
	IngestMean  float64 `json:"ingest_wait_mean_s"`
	IngestP95   float64 `json:"ingest_wait_p95_s"`
	IngestMax   float64 `json:"ingest_wait_max_s"`
	// RebuildMean is the mean ingest wait of the files that arrived
	// while an array rebuilt (site.rebuild_at), and RebuildBacklog the
	// most data waiting for tape then.
	RebuildMean    float64 `json:"rebuild_ingest_wait_mean_s,omitempty"`
	RebuildBacklog int64   `json:"rebuild_backlog_peak_bytes,omitempty"`
	// BacklogPeak is the most data on disk not yet on tape: the disk
	// space migration needs.
	BacklogPeak int64 `json:"backlog_peak_bytes"`
	// DiskBusy is the disk tier's utilisation over the run; UserBytes what
	// the users read from it.
	DiskBusy  float64 `json:"disk_busy"`
	UserBytes int64   `json:"user_bytes"`
	// Drive time, as fractions of drives × Seconds, held by migration
	// writers and by recall batches.
	Migrating float64 `json:"drives_migrating"`
	Recalling float64 `json:"drives_recalling"`
	// Migration and recall as their own studies report them.
	Migrate *MigrateResult `json:"migrate"`
	Recall  *RecallResult  `json:"recall,omitempty"`
}

type siteModel struct {
	sim    *des.Sim
	c      *Config
	disk   *des.Resource
	mig    *migModel
	rec    *recallModel
	drives []*tdrive

	end      des.Time // arrivals stop
	on, off  des.Time // data-taking period and pause (off 0: always on)
	sizes    *rand.Rand
	arrivals []des.Time // by file, in arrival order
	sizesOf  []int64
	queue    []int // files waiting for an ingest stream
	idle     int   // ingest streams free
	written  int
	arrived  int
	waits    []float64
	rbWaits  []float64 // of the files arriving during the rebuild
	rbPeak   int64

	onTape    []int // files migrated, for recalls to pick from
	backlog   int64
	peak      int64
	userBytes int64
	waiting   []waiter // migration writers waiting for a drive
	wake      *des.Event
	held      [2]des.Time // drive time held: migration, recall
}

func runSite(c *Config, seed uint64) (*Result, error) {
	s := des.NewSim(seed)
	t, w := c.Tape, c.Workload
	m := &siteModel{sim: s, c: c, end: w.duration, on: w.ingestOn, off: w.ingestOff, sizes: s.Rand(0, 5), idle: w.Streams}
	if r := c.diskRate(); r > 0 {
		m.disk = s.Fluid.NewResource("disk tier", r)
		if sc := c.Site; sc.RebuildAt != "" {
			lost := float64(sc.ArrayRate) * (1 - sc.RebuildShare)
			s.Schedule(sc.rebuildAt, 0, evSiteRebuild, 0, func() { s.Fluid.SetCap(m.disk, r-lost) })
			s.Schedule(sc.rebuildAt+sc.rebuildFor, 0, evSiteRebuild, 0, func() { s.Fluid.SetCap(m.disk, r) })
		}
	}
	m.drives = newDrives(s, t)
	m.mig = newMigModel(s, c)
	m.mig.site, m.mig.drives, m.mig.buf = m, m.drives, m.disk
	m.rec = newRecallModel(s, c, nil, m.drives, m.mig.robot)
	m.rec.buf, m.rec.site = m.disk, m
	if w.Arrivals != "" {
		arr, err := c.readArrivals()
		if err != nil {
			return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
		}
		m.end = des.FromSeconds(arr[len(arr)-1].Time) + 1
		m.reserve(float64(len(arr)))
		chain(s, len(arr), func(i int) float64 { return arr[i].Time }, evSiteArrive, func(i int) { m.arrive(arr[i].Size) })
	} else {
		on := 1.0
		if w.ingestOn > 0 {
			on = float64(w.ingestOn) / float64(w.ingestOn+w.ingestOff)
		}
		m.reserve(w.ArrivalRate * w.duration.Seconds() * on)
		gap := s.Rand(0, 2)
		var arrive func()
		arrive = func() {
			m.arrive(m.size())
			next := m.dataTaking(s.Now() + des.FromSeconds(gap.ExpFloat64()/w.ArrivalRate))
			if next < m.end {
				s.Schedule(next, 0, evSiteArrive, 0, arrive)
			}
		}
		s.Schedule(0, 0, evSiteArrive, 0, arrive)
	}
	switch {
	case w.Trace != "":
		reqs, err := c.readTrace()
		if err != nil {
			return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
		}
		slices.SortStableFunc(reqs, func(a, b RecallRequest) int { return compareFloat(a.Time, b.Time) })
		chain(s, len(reqs), func(i int) float64 { return reqs[i].Time }, evSiteRecall, func(i int) { m.rec.add(reqs[i]) })
	case w.RecallPerMonth > 0:
		m.recalls(s.Rand(0, 6), s.Rand(0, 7))
	}
	if w.ReadRate > 0 {
		m.users()
	}
	m.mig.startTicks()
	s.LimitEvents(2e9)
	if _, err := s.Run(des.Forever); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	if m.mig.stuck {
		return nil, fmt.Errorf("sim: %s: %d of %d files never reached tape: no cartridge had room for the next tape file (tape.cartridges, tape.capacity)", c.Name, m.arrived-m.mig.migrated, m.arrived)
	}
	if m.mig.migrated != m.arrived || m.rec.done != len(m.rec.reqs) {
		return nil, fmt.Errorf("sim: %s: %d of %d files reached tape, %d of %d recalls completed", c.Name, m.mig.migrated, m.arrived, m.rec.done, len(m.rec.reqs))
	}
	return m.result(seed), nil
}

const (
	evSiteArrive uint16 = 90 + iota
	evSiteWrite
	evSiteRecall
	evSiteUsers
	evSiteWake
	evSiteRebuild
)

// dataTaking is the first instant at or after t in a data-taking period.
func (m *siteModel) dataTaking(t des.Time) des.Time {
	if m.off <= 0 {
		return t
	}
	cycle := m.on + m.off
	if t%cycle >= m.on {
		t += cycle - t%cycle
	}
	return t
}

// size draws a file size: workload.file_size is the mean.
func (m *siteModel) size() int64 {
	w := m.c.Workload
	mean := float64(w.File)
	var v float64
	switch w.SizeDist {
	case "exponential":
		v = m.sizes.ExpFloat64() * mean
	case "lognormal":
		sg := w.SizeSigma
		v = math.Exp(math.Log(mean) - sg*sg/2 + sg*m.sizes.NormFloat64())
	default:
		v = mean
	}
	return max(1, int64(v))
}

// chain runs fn(i) at at(i) seconds for i = 0 … n−1, in order, keeping
// one event pending however long the list.
func chain(s *des.Sim, n int, at func(int) float64, kind uint16, fn func(int)) {
	var next func(i int)
	next = func(i int) {
		fn(i)
		if i+1 < n {
			s.Schedule(des.FromSeconds(at(i+1)), 0, kind, int32(i+1), func() { next(i + 1) })
		}
	}
	s.Schedule(des.FromSeconds(at(0)), 0, kind, 0, func() { next(0) })
}

// reserve makes room for about n files in the per-file records, so that
// a year of millions of files does not copy them over and over as they
// grow (a sixteenth more for the Poisson count's spread; at most 64 M
// ahead of time).
func (m *siteModel) reserve(n float64) {
	k := int(min(n*17/16, 1<<26))
	if k <= 0 {
		return
	}
	m.arrivals = make([]des.Time, 0, k)
	m.sizesOf = make([]int64, 0, k)
	m.waits = make([]float64, 0, k)
	m.onTape = make([]int, 0, k)
	m.mig.files = make([]migFile, 0, k)
}

// arrive queues a new file of size bytes for the ingest streams.
func (m *siteModel) arrive(size int64) {
	i := m.arrived
	m.arrived++
	m.arrivals = append(m.arrivals, m.sim.Now())
	m.sizesOf = append(m.sizesOf, size)
	m.queue = append(m.queue, i)
	m.ingest()
}

// ingest starts free streams on queued files: each file is a flow into
// the disk tier; on disk, it waits for migration.
func (m *siteModel) ingest() {
	for m.idle > 0 && len(m.queue) > 0 {
		i := m.queue[0]
		m.queue = m.queue[1:]
		m.idle--
		f := &des.Flow{Size: m.sizesOf[i], Kind: evSiteWrite, Obj: int32(i)}
		if m.disk != nil {
			f.Path = []*des.Resource{m.disk}
		}
		f.Done = func() {
			m.idle++
			m.written++
			wait := (m.sim.Now() - m.arrivals[i]).Seconds()
			m.waits = append(m.waits, wait)
			if m.rebuilding(m.arrivals[i]) {
				m.rbWaits = append(m.rbWaits, wait)
			}
			// a migration candidate from now on; its time to tape counts
			// from its arrival
			m.mig.files = append(m.mig.files, migFile{created: m.arrivals[i], onDisk: m.sim.Now(), size: m.sizesOf[i]})
			m.backlog += m.sizesOf[i]
			m.peak = max(m.peak, m.backlog)
			if m.rebuilding(m.sim.Now()) {
				m.rbPeak = max(m.rbPeak, m.backlog)
			}
			m.ingest()
		}
		if m.disk == nil {
			m.sim.After(0, evSiteWrite, int32(i), f.Done)
			continue
		}
		m.sim.Fluid.Start(f)
	}
}

// rebuilding says whether an array was rebuilding at t.
func (m *siteModel) rebuilding(t des.Time) bool {
	sc := m.c.Site
	return sc.RebuildAt != "" && t >= sc.rebuildAt && t < sc.rebuildAt+sc.rebuildFor
}

// ingestOver says whether every file that will arrive is on disk.
func (m *siteModel) ingestOver() bool {
	return m.sim.Now() >= m.end && m.written == m.arrived
}

// migrated is called for each file at the flush that put it on tape.
func (m *siteModel) migrated(i int) {
	m.backlog -= m.mig.files[i].size
	m.onTape = append(m.onTape, i)
}

// recalls generates recall requests for files on tape: recall_per_month
// of them every 30 days, a Poisson stream whose rate follows the
// archive's size, until arrivals stop.
func (m *siteModel) recalls(gap, pick *rand.Rand) {
	const month = 30 * 24 * 3600.0
	var next func()
	next = func() {
		if n := len(m.onTape); n > 0 && m.sim.Now() > 0 {
			f := m.mig.files[m.onTape[pick.IntN(n)]]
			if f.parts == nil {
				m.rec.add(RecallRequest{Time: m.sim.Now().Seconds(), Volume: f.vol, Offset: f.off, Size: f.size})
			}
			for _, p := range f.parts { // striped on tape: a request a part, as strata serve queues
				m.rec.add(RecallRequest{Time: m.sim.Now().Seconds(), Volume: p.vol, Offset: p.off, Size: p.size})
			}
		}
		rate := m.c.Workload.RecallPerMonth * float64(len(m.onTape)) / month
		dt := des.Duration(time.Hour) // nothing on tape yet: look again later
		if rate > 0 {
			dt = des.FromSeconds(gap.ExpFloat64() / rate)
		}
		if at := m.sim.Now() + dt; at < m.end {
			m.sim.Schedule(at, 0, evSiteRecall, 0, next)
		}
	}
	m.sim.Schedule(0, 0, evSiteRecall, 0, next)
}

// users read from the disk tier at read_rate until arrivals stop, in
// flows of 64 GiB.
func (m *siteModel) users() {
	if m.sim.Now() >= m.end {
		return
	}
	f := &des.Flow{Size: 64 << 30, Limit: float64(m.c.Workload.ReadRate), Kind: evSiteUsers}
	if m.disk != nil {
		f.Path = []*des.Resource{m.disk}
	}
	f.Done = func() {
		m.userBytes += f.Size
		m.users()
	}
	m.sim.Fluid.Start(f)
}

// takeDrive gives a migration writer a drive the recalls have left free,
// now or when one frees: one holding a cartridge a tape file of need
// bytes fits on if there is one, as core's takeDrive prefers.
func (m *siteModel) takeDrive(need int64, use func(*tdrive)) {
	if d := m.freeDrive(need); d != nil {
		m.hold(d)
		use(d)
		return
	}
	m.waiting = append(m.waiting, waiter{need, use})
}

// waiter is a migration writer waiting for a drive.
type waiter struct {
	need int64
	use  func(*tdrive)
}

// freeDrive is the drive takeDrive would take, or nil.
func (m *siteModel) freeDrive(need int64) *tdrive {
	var pick *tdrive
	for _, d := range m.drives {
		if d.busy || d.out || d.failing {
			continue
		}
		if m.mig.fits(d, need) {
			return d
		}
		if pick == nil {
			pick = d
		}
	}
	return pick
}

func (m *siteModel) hold(d *tdrive) {
	d.busy, d.migrating, d.since = true, true, m.sim.Now()
}

// releaseDrive ends a writer's hold on d.
func (m *siteModel) releaseDrive(d *tdrive) {
	m.held[0] += m.sim.Now() - d.since
	d.busy, d.migrating = false, false
	d.idle = m.rec.now()
	m.rec.poke()
	m.freed()
}

// freed wakes the waiting writers half a tape.drive_poll after a drive
// frees — on average, core's writers look again every drive_poll — once
// the recaller, woken at once, has decided.
func (m *siteModel) freed() {
	if len(m.waiting) == 0 || m.wake.Pending() {
		return
	}
	m.wake = m.sim.After(des.Duration(m.c.Tape.drivePoll/2), evSiteWake, 0, func() {
		for len(m.waiting) > 0 {
			w := m.waiting[0]
			d := m.freeDrive(w.need)
			if d == nil {
				return
			}
			m.waiting = m.waiting[1:]
			m.hold(d)
			w.use(d)
		}
	})
}

func (m *siteModel) result(seed uint64) *Result {
	s := m.sim
	mr := m.mig.result(seed)
	r := &Result{Name: m.c.Name, Seed: seed, Op: "site", Events: s.Events(), Fingerprint: fmt.Sprintf("%016x", s.Fingerprint()), Bound: Bound(m.c)}
	x := &SiteResult{Files: m.arrived, Seconds: mr.Seconds, BacklogPeak: m.peak, UserBytes: m.userBytes, Migrate: mr.Migrate}
	for _, n := range m.sizesOf {
		x.Bytes += n
	}
	if d := min(m.end, m.arrivals[len(m.arrivals)-1]).Seconds(); d > 0 {
		x.OfferedMBps = round3(float64(x.Bytes) / d / 1e6)
	}
	slices.Sort(m.waits)
	var sum float64
	for _, v := range m.waits {
		sum += v
	}
	x.IngestMean = round3(sum / float64(len(m.waits)))
	x.IngestP95 = round3(m.waits[min(len(m.waits)-1, int(math.Ceil(0.95*float64(len(m.waits))))-1)])
	x.IngestMax = round3(m.waits[len(m.waits)-1])
	if n := len(m.rbWaits); n > 0 {
		var sum float64
		for _, v := range m.rbWaits {
			sum += v
		}
		x.RebuildMean = round3(sum / float64(n))
	}
	x.RebuildBacklog = m.rbPeak
	if m.disk != nil && x.Seconds > 0 {
		x.DiskBusy = round3(math.Min(1, m.disk.Bytes/(m.disk.Cap*x.Seconds)))
	}
	if len(m.rec.reqs) > 0 {
		x.Recall = m.rec.result(m.c, seed).Recall
		// traced recalls may end after the last file reached tape
		x.Seconds = max(x.Seconds, round3(slices.Max(m.rec.doneAt).Seconds()))
	}
	if total := float64(len(m.drives)) * x.Seconds * 1e9; total > 0 {
		x.Migrating = round3(float64(m.held[0]) / total)
		x.Recalling = round3(float64(m.held[1]) / total)
	}
	r.Site, r.Bytes, r.Seconds = x, x.Bytes, x.Seconds
	if x.Seconds > 0 {
		r.MBps = round3(float64(x.Bytes) / x.Seconds / 1e6)
	}
	return r
}

// siteBound is the analytic side of a site study: what the site sustains
// over the long run — every byte written to the disk tier once and read
// back once by migration, and streamed by the migration drives — against
// what is offered.
func (c *Config) siteBound(add func(name, what string, bps float64)) {
	t, w := c.Tape, c.Workload
	d := min(t.migrateDrives, t.Drives)
	add("D·T", fmt.Sprintf("%d %s drives migrating × %s", d, t.gen.Name, mbps(t.gen.Rate)), float64(d)*t.gen.Rate)
	add("disk/2", fmt.Sprintf("disk tier %s, each byte written and read back", mbps(c.diskRate())), c.diskRate()/2)
	if w.Arrivals != "" {
		// a replayed ingest offers its bytes over its span
		if arr, err := c.readArrivals(); err == nil && arr[len(arr)-1].Time > 0 {
			var b int64
			for _, a := range arr {
				b += a.Size
			}
			span := arr[len(arr)-1].Time
			add("λ·s", fmt.Sprintf("%d files replayed, %s over %.0f s", len(arr), chart.SizeStr(b), span), float64(b)/span)
		}
		return
	}
	duty := 1.0
	if w.ingestOff > 0 {
		duty = float64(w.ingestOn) / float64(w.ingestOn+w.ingestOff)
	}
	add("λ·s", fmt.Sprintf("%.3g files/s × %s, %.0f%% of the time", w.ArrivalRate, mbps(float64(w.File)), 100*duty), w.ArrivalRate*float64(w.File)*duty)
}
