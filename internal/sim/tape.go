package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/chart"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/des"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
)

// The tape library in virtual time. Drives and the robot follow package
// tape's timing model — the same functions the emulated library sleeps on
// (mount = robot exchange + load; dismount = rewind + unload + exchange;
// locate by wrap and longitudinal distance; streaming at the native rate)
// — and the recall queue is package sched's Scheduler, the code strata
// serve's recaller runs, asked for decisions at virtual times. A study
// therefore predicts what Strata itself will do with a library of that
// shape and a recall load, and a change to the scheduler changes the
// prediction with no second copy to keep in step.

// TapeConfig is the library and the recall rules ([tape]). The rule keys
// and their defaults are strata serve's ([hsm] recall_*).
type TapeConfig struct {
	Generation string `toml:"generation"` // LTO-1 … LTO-9
	Drives     int    `toml:"drives"`
	// Cartridges hold the files a synthetic workload recalls, written
	// front to back as migration appends them.
	Cartridges int `toml:"cartridges"`
	// Capacity per cartridge; smaller than the generation's spreads the
	// data over the whole tape, as the emulator does.
	Capacity Size    `toml:"capacity"`
	Fill     float64 `toml:"fill"` // fraction of each cartridge written (default 0.9)
	// Buffer is the disk space free for recalled files (0: unlimited);
	// BufferRate the disk pool's write bandwidth all drives share.
	Buffer     Size `toml:"buffer"`
	BufferRate Rate `toml:"buffer_rate"`
	// OverheadMS is the server's own time per recalled file (catalog,
	// placement, commit), between one file's last byte and the next
	// locate; calibrated from a measured run.
	OverheadMS     float64 `toml:"overhead_ms"`
	RecallMinFiles *int    `toml:"recall_min_files"`
	RecallMinBytes *Size   `toml:"recall_min_bytes"`
	RecallMaxAge   string  `toml:"recall_max_age"`
	RecallLinger   string  `toml:"recall_linger"`
	RecallDrives   int     `toml:"recall_drives"`
	RecallGaps     string  `toml:"recall_gaps"` // "read" (default) or "locate", as strata serve's
	// Poll is the recaller's own period: it decides when woken by a
	// request or a drive, and also every Poll, which is when an age
	// threshold is noticed (on average Poll/2 after it passes). Strata's
	// recaller polls every 200 ms of wall time: 20 s of library time at a
	// time scale of x100. Empty: noticed at once.
	Poll string `toml:"poll"`
	// DrivePoll is how often a migration writer that found no drive free
	// looks again (strata serve's: 100 ms of wall time, so 10 s of
	// library time at x100); site studies.
	DrivePoll string `toml:"drive_poll"`
	// Written names cartridges that hold data before the study begins,
	// with how much: migration appends to them (or leaves them, when
	// full) as to any other, and a trace recalls from them. The study's
	// other cartridges are empty.
	Written map[string]Size `toml:"written"`
	// Migration (workload.op = "migrate"), with strata serve's [hsm]
	// keys and defaults: streams, tape file size, the policy's period
	// and age; flush_bytes is the data between synchronising file marks.
	MigrateDrives *int   `toml:"migrate_drives"`
	Aggregate     Size   `toml:"aggregate"`
	FlushBytes    Size   `toml:"flush_bytes"`
	MigrateEvery  string `toml:"migrate_every"`
	MigrateAfter  string `toml:"migrate_after"`
	// StripeMin is strata serve's tape_stripe_min: a file this large
	// whose disk copy has several stripes (workload.stripe) is written to
	// several cartridges at once (see migrate.go).
	StripeMin Size `toml:"stripe_min"`
	// Drive overrides the generation's figures ([tape.drive]): a drive
	// no preset has (an enterprise drive, a half-height one, a site's own
	// measurements), or one figure swept.
	Drive DriveParams `toml:"drive"`
	// Failures in recall studies (tapefail.go): every file has Copies
	// tape copies (copy k > 0 on cartridges "C<k>-" + the first copy's
	// name, at the same offsets, as copies written side by side are);
	// the first BadCartridges of the first copy are unreadable (found
	// at mount, as strata serve finds them); FailedDrives drives fail at
	// DriveFailAt. Recopy writes a new copy of each bad cartridge from
	// another copy: its files recalled through the scheduler and written
	// to a new cartridge by one drive, trailing the reads.
	Copies        int    `toml:"copies"`
	BadCartridges int    `toml:"bad_cartridges"`
	FailedDrives  int    `toml:"failed_drives"`
	DriveFailAt   string `toml:"drive_fail_at"`
	Recopy        bool   `toml:"recopy"`
	// MountFailures is the chance that the robot fails a mount (a
	// transient fault: a gripper, a door, an inventory); the cartridge is
	// tried again after MountRetry, doubling each round, as strata
	// serve's [hsm] mount_retry and sched.RetryMount do.
	MountFailures float64 `toml:"mount_failures"`
	MountRetry    string  `toml:"mount_retry"`

	gen           tape.Generation
	driveFailAt   des.Time
	mountRetry    time.Duration
	poll          time.Duration
	drivePoll     time.Duration
	migrateDrives int
	migrateEvery  time.Duration
	migrateAfter  time.Duration
	stripeMin     int64
	rules         sched.Rules
}

// fill checks the library and resolves the generation and rules.
func (t *TapeConfig) fill() error {
	if t.Generation == "" {
		t.Generation = "LTO-9"
	}
	g, err := tape.LookupGeneration(t.Generation)
	if err != nil {
		return fmt.Errorf("tape.generation: %w", err)
	}
	if err := t.Drive.apply(&g); err != nil {
		return err
	}
	t.gen = g
	if t.Drives <= 0 {
		t.Drives = 1
	}
	if t.Cartridges <= 0 {
		t.Cartridges = 10
	}
	if t.Capacity <= 0 {
		t.Capacity = Size(g.Capacity)
	}
	if t.Fill <= 0 || t.Fill > 1 {
		if t.Fill != 0 {
			return fmt.Errorf("tape.fill = %g: want a fraction in (0, 1]", t.Fill)
		}
		t.Fill = 0.9
	}
	def := config.Default().HSM
	t.rules = sched.Rules{MinFiles: def.RecallMinFiles, MinBytes: int64(def.RecallMinBytes), Drives: t.RecallDrives}
	if t.RecallMinFiles != nil {
		t.rules.MinFiles = *t.RecallMinFiles
	}
	if t.RecallMinBytes != nil {
		t.rules.MinBytes = int64(*t.RecallMinBytes)
	}
	age := def.RecallMaxAge
	if t.RecallMaxAge != "" {
		age = t.RecallMaxAge
	}
	if t.rules.MaxAge, err = time.ParseDuration(age); err != nil || t.rules.MaxAge < 0 {
		return fmt.Errorf("tape.recall_max_age %q: want a duration like 2m", age)
	}
	linger := def.RecallLinger
	if t.RecallLinger != "" {
		linger = t.RecallLinger
	}
	if t.rules.Linger, err = time.ParseDuration(linger); err != nil || t.rules.Linger < 0 {
		return fmt.Errorf("tape.recall_linger %q: want a duration like 10s", linger)
	}
	if t.rules.LocateEveryFile, err = sched.ParseGaps(t.RecallGaps); err != nil {
		return fmt.Errorf("tape.%w", err)
	}
	t.migrateDrives = def.MigrateDrives
	if t.MigrateDrives != nil {
		t.migrateDrives = *t.MigrateDrives
	}
	if t.migrateDrives < 1 {
		return fmt.Errorf("tape.migrate_drives = %d: want at least 1", t.migrateDrives)
	}
	if t.Aggregate <= 0 {
		t.Aggregate = def.Aggregate
	}
	if t.FlushBytes <= 0 {
		t.FlushBytes = sched.DefaultFlushBytes
	}
	if t.stripeMin = int64(t.StripeMin); t.stripeMin <= 0 {
		t.stripeMin = int64(def.StripeMin)
	}
	for _, x := range []struct {
		key, v, def string
		dst         *time.Duration
	}{{"migrate_every", t.MigrateEvery, def.MigrateEvery, &t.migrateEvery}, {"migrate_after", t.MigrateAfter, def.MigrateAfter, &t.migrateAfter}} {
		v := x.v
		if v == "" {
			v = x.def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || x.key == "migrate_every" && d == 0 {
			return fmt.Errorf("tape.%s %q: want a duration like %s", x.key, v, x.def)
		}
		*x.dst = d
	}
	t.drivePoll = 100 * time.Millisecond
	if t.DrivePoll != "" {
		if t.drivePoll, err = time.ParseDuration(t.DrivePoll); err != nil || t.drivePoll < 0 {
			return fmt.Errorf("tape.drive_poll %q: want a duration like 10s", t.DrivePoll)
		}
	}
	for v, n := range t.Written {
		if v == "" || n < 0 || t.Capacity > 0 && n > t.Capacity {
			return fmt.Errorf("tape.written.%s = %d: want a cartridge's label and the bytes on it, up to tape.capacity", v, n)
		}
	}
	if len(t.Written) > t.Cartridges {
		return fmt.Errorf("tape.written names %d cartridges, tape.cartridges = %d", len(t.Written), t.Cartridges)
	}
	if t.Poll != "" {
		if t.poll, err = time.ParseDuration(t.Poll); err != nil || t.poll < 0 {
			return fmt.Errorf("tape.poll %q: want a duration like 20s", t.Poll)
		}
	}
	return t.fillFailures()
}

// drives is how many drives recalls may hold at once.
func (t *TapeConfig) recallDrives() int {
	if t.rules.Drives > 0 && t.rules.Drives < t.Drives {
		return t.rules.Drives
	}
	return t.Drives
}

// RecallResult is what a recall run reports: throughput, how long users
// waited, and where the drives' time went.
type RecallResult struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Seconds is first request to last file on disk.
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"`
	// Latency is request to file on disk, seconds.
	Mean float64 `json:"latency_mean_s"`
	P50  float64 `json:"latency_p50_s"`
	P95  float64 `json:"latency_p95_s"`
	P99  float64 `json:"latency_p99_s"`
	Max  float64 `json:"latency_max_s"`
	// Mounts, locates and gaps read through instead, over all drives.
	Mounts       int `json:"mounts"`
	Locates      int `json:"locates"`
	ReadThroughs int `json:"read_throughs"`
	// Drive time, as fractions of drives × Seconds.
	Mounting    float64 `json:"mounting"`
	Positioning float64 `json:"positioning"`
	Transfer    float64 `json:"transfer"`
	Overhead    float64 `json:"overhead"`
	Idle        float64 `json:"idle"`
	// Failures: recalls that had no readable copy left, mounts of
	// unreadable cartridges, recalls served from another copy, drives
	// that failed, and when the copies on bad cartridges were whole again
	// (seconds from the first bad mount; Recopy).
	Lost      int `json:"lost,omitempty"`
	BadMounts int `json:"bad_mounts,omitempty"`
	// MountFailures are mounts the robot failed (tape.mount_failures);
	// GaveUp, cartridges whose recalls went elsewhere after
	// sched.MaxMountFailures rounds.
	MountFailures int     `json:"mount_failures,omitempty"`
	GaveUp        int     `json:"mounts_given_up,omitempty"`
	FromCopy      int     `json:"from_other_copy,omitempty"`
	DrivesFailed  int     `json:"drives_failed,omitempty"`
	RecopyBytes   int64   `json:"recopy_bytes,omitempty"`
	RecopySeconds float64 `json:"recopy_s,omitempty"`
}

// RecallRequest is one recall of a trace: at Time seconds, Size bytes at
// byte Offset of cartridge Volume.
type RecallRequest struct {
	Time   float64
	Volume string
	Offset int64
	Size   int64
}

// ReadTrace reads a recall trace: CSV rows of time_s, volume, offset,
// size (a header row is allowed), as bench/hsmbench --parts recall writes
// them.
func ReadTrace(r io.Reader) ([]RecallRequest, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 4
	var out []RecallRequest
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		if line == 1 && rec[0] == "time_s" {
			continue
		}
		t, e1 := strconv.ParseFloat(rec[0], 64)
		off, e2 := strconv.ParseInt(rec[2], 10, 64)
		size, e3 := strconv.ParseInt(rec[3], 10, 64)
		// A volume is a cartridge's label: printable, never empty (and a
		// control character would not survive CSV's line-end rules).
		badVol := rec[1] == "" || strings.IndexFunc(rec[1], func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
		if err := errors.Join(e1, e2, e3); err != nil || t < 0 || math.IsNaN(t) || math.IsInf(t, 0) || off < 0 || size < 0 || badVol {
			return nil, fmt.Errorf("trace: row %d: want time_s ≥ 0, volume, offset ≥ 0, size ≥ 0: %q", line, strings.Join(rec, ","))
		}
		out = append(out, RecallRequest{Time: t, Volume: rec[1], Offset: off, Size: size})
	}
	if len(out) == 0 {
		return nil, errors.New("trace: no requests")
	}
	return out, nil
}

// WriteTrace writes reqs in ReadTrace's format.
func WriteTrace(w io.Writer, reqs []RecallRequest) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"time_s", "volume", "offset", "size"})
	for _, q := range reqs {
		cw.Write([]string{strconv.FormatFloat(q.Time, 'f', -1, 64), q.Volume, strconv.FormatInt(q.Offset, 10), strconv.FormatInt(q.Size, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// studyFile opens a file a study names: a relative path starts at the
// study file's directory.
func (c *Config) studyFile(key, p string) (*os.File, error) {
	if !filepath.IsAbs(p) && c.dir != "" {
		p = filepath.Join(c.dir, p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return f, nil
}

// readTrace reads the recall trace workload.trace names.
func (c *Config) readTrace() ([]RecallRequest, error) {
	f, err := c.studyFile("workload.trace", c.Workload.Trace)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTrace(f)
}

// recallRequests is the study's workload: its trace, or files drawn at
// random (without repeats) from the cartridges' contents, arriving all at
// once or as a Poisson stream.
func (c *Config) recallRequests(s *des.Sim) ([]RecallRequest, error) {
	w, t := c.Workload, c.Tape
	if w.Trace != "" {
		return c.readTrace()
	}
	perCart := int64(t.Fill * float64(t.Capacity) / float64(w.File))
	if perCart < 1 {
		return nil, fmt.Errorf("workload.file_size %s does not fit on a %s cartridge", chart.SizeStr(int64(w.File)), chart.SizeStr(int64(t.Capacity)))
	}
	spread := t.Cartridges
	if w.Spread > 0 && w.Spread < spread {
		spread = w.Spread
	}
	if int64(w.Files) > int64(spread)*perCart {
		return nil, fmt.Errorf("workload.files = %d: the %d cartridges hold only %d files of %s", w.Files, spread, int64(spread)*perCart, chart.SizeStr(int64(w.File)))
	}
	pick := s.Rand(0, 1)
	gap := s.Rand(0, 2)
	seen := make(map[int64]bool, w.Files) // membership only, never iterated
	out := make([]RecallRequest, 0, w.Files)
	now := 0.0
	for len(out) < w.Files {
		cart, slot := pick.IntN(spread), pick.Int64N(perCart)
		k := int64(cart)*perCart + slot
		if seen[k] {
			continue
		}
		seen[k] = true
		if w.ArrivalRate > 0 && len(out) > 0 {
			now += gap.ExpFloat64() / w.ArrivalRate
		}
		out = append(out, RecallRequest{Time: now, Volume: fmt.Sprintf("V%05d", cart), Offset: slot * int64(w.File), Size: int64(w.File)})
	}
	return out, nil
}

// event kinds for the fingerprint
const (
	evTapeArrive uint16 = 50 + iota
	evTapeDecide
	evTapeRobot
	evTapeLoad
	evTapeUnload
	evTapeLocate
	evTapeXfer
	evTapeCommit
	evTapeAge
	evTapeFail
)

type tdrive struct {
	id    string
	idx   int32
	vol   string
	off   int64
	busy  bool
	idle  time.Time // when its last batch ended (Drive.Idle)
	head  *des.Resource
	stats tape.Stats
	over  des.Time
	// failing drives fail at their next operation; out ones have
	failing, out bool
	// backhitched is when a drive stopped by a synchronising flush can
	// write on from where it stopped (tape.Generation.Backhitch)
	backhitched des.Time
	// site studies: held by a migration writer, since when held
	migrating bool
	since     des.Time
}

type recallModel struct {
	sim     *des.Sim
	g       tape.Generation
	cap     int64
	rules   sched.Rules
	sch     *sched.Scheduler
	drives  []*tdrive
	byID    map[string]*tdrive // lookup only
	robot   *robot
	buf     *des.Resource
	free    int64
	over    des.Time
	reqs    []RecallRequest
	queued  []des.Time // by request ID
	doneAt  []des.Time
	decide  *des.Event
	ageWake *des.Event
	done    int
	poll    time.Duration
	fill    float64 // of each cartridge, written
	fail    *tapeFailures
	// recopyWait: a recopy's reads are on disk and wait for a drive
	recopyWait bool
	site       *siteModel // set in a site study
}

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (m *recallModel) now() time.Time { return epoch.Add(time.Duration(m.sim.Now())) }

func (m *recallModel) pos(off int64) tape.Position { return m.g.PositionIn(off, m.cap) }

// runRecall simulates the study's recalls through Strata's scheduler.
func runRecall(c *Config, seed uint64) (*Result, error) {
	s := des.NewSim(seed)
	t := c.Tape
	reqs, err := c.recallRequests(s)
	if err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	slices.SortStableFunc(reqs, func(a, b RecallRequest) int { return compareFloat(a.Time, b.Time) })
	m := newRecallModel(s, c, reqs, newDrives(s, t), &robot{})
	if t.BufferRate > 0 {
		m.buf = s.Fluid.NewResource("recall buffer", float64(t.BufferRate))
	}
	// arrivals chain: one pending event, however long the trace
	var arrive func(i int)
	arrive = func(i int) {
		m.queued[i] = s.Now()
		m.queue(i)
		m.poke()
		if i+1 < len(reqs) {
			s.Schedule(des.FromSeconds(reqs[i+1].Time), 0, evTapeArrive, int32(i+1), func() { arrive(i + 1) })
		}
	}
	s.Schedule(des.FromSeconds(reqs[0].Time), 0, evTapeArrive, 0, func() { arrive(0) })
	s.LimitEvents(2e9)
	if _, err := s.Run(des.Forever); err != nil {
		return nil, fmt.Errorf("sim: %s: %w", c.Name, err)
	}
	if m.done != len(reqs) {
		return nil, fmt.Errorf("sim: %s: %d of %d recalls never completed (the rules never let their cartridge be mounted?)", c.Name, len(reqs)-m.done, len(reqs))
	}
	return m.result(c, seed), nil
}

// newRecallModel is the recaller of the study's library, with its
// scheduler, over drives and robot (shared with migration in a site
// study), for reqs.
func newRecallModel(s *des.Sim, c *Config, reqs []RecallRequest, drives []*tdrive, rb *robot) *recallModel {
	t := c.Tape
	sch := sched.New(t.rules)
	sch.Tape = &sched.Geometry{Gen: t.gen, Capacity: int64(t.Capacity)}
	m := &recallModel{sim: s, g: t.gen, cap: int64(t.Capacity), rules: t.rules, sch: sch,
		byID: map[string]*tdrive{}, reqs: reqs, queued: make([]des.Time, len(reqs)), doneAt: make([]des.Time, len(reqs)),
		free: math.MaxInt64 / 2, over: des.FromSeconds(t.OverheadMS / 1e3), poll: t.poll, fill: t.Fill, drives: drives, robot: rb}
	m.initFailures(c)
	if t.Buffer > 0 {
		m.free = int64(t.Buffer)
	}
	for _, d := range drives {
		m.byID[d.id] = d
	}
	return m
}

// free1 ends a recall batch's hold on d (in a site study, waking the
// migration writers waiting for a drive) and asks for a decision.
func (m *recallModel) free1(d *tdrive) {
	d.busy, d.idle = false, m.now()
	if m.site != nil {
		m.site.held[1] += m.sim.Now() - d.since
		m.site.freed()
	}
	m.poke()
}

// add queues a recall arriving now (site studies).
func (m *recallModel) add(q RecallRequest) {
	i := len(m.reqs)
	m.reqs = append(m.reqs, q)
	m.queued = append(m.queued, m.sim.Now())
	m.doneAt = append(m.doneAt, 0)
	m.fail.copyOf = append(m.fail.copyOf, 0)
	m.queue(i)
	m.poke()
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// poke asks for a scheduling decision once the events of this instant are
// done (priority 1 runs after them), as the recaller's loop does when
// woken: requests arriving together are decided on together.
func (m *recallModel) poke() {
	if m.decide.Pending() {
		return
	}
	m.decide = m.sim.Schedule(m.sim.Now(), 1, evTapeDecide, 0, m.decideNow)
}

func (m *recallModel) decideNow() {
	if m.recopyWait {
		m.recopyWrite() // before the recalls take the drive it waits for
	}
	ds := make([]sched.Drive, len(m.drives))
	for i, d := range m.drives {
		vol := d.vol
		if m.site != nil && d.migrating {
			// the cartridge a writer is mounting is its drive's to the
			// scheduler, as core reports it (Engine.reserved)
			if c := m.site.mig.cartOn(d); c != nil {
				vol = c.name
			}
		}
		ds[i] = sched.Drive{ID: d.id, Volume: vol, Busy: d.busy, Idle: d.idle, Failed: d.out || d.failing}
	}
	for _, dec := range m.sch.Next(m.now(), ds, m.free) {
		d := m.byID[dec.Drive]
		d.busy, d.since = true, m.sim.Now()
		for _, q := range dec.Requests {
			m.free -= q.Size
		}
		m.serve(d, dec)
	}
	m.wakeForAge()
}

// wakeForAge schedules a decision for when the oldest waiting request
// reaches the rules' age, the one threshold that time alone crosses.
func (m *recallModel) wakeForAge() {
	if m.sch.Len() == 0 {
		return
	}
	var at des.Time = des.Forever
	// a cartridge being served is served again when its drive is done,
	// without a threshold: only the others' ages wake the recaller
	if due, ok := m.sch.AgeDue(m.now()); ok {
		at = des.Time(due.Sub(epoch))
	}
	// A drive keeping its cartridge (Rules.Linger) is free for others
	// when that ends.
	for _, d := range m.drives {
		if t := des.Time(d.idle.Sub(epoch) + m.rules.Linger); !d.busy && d.vol != "" && !d.idle.IsZero() && t > m.sim.Now() && t < at {
			at = t
		}
	}
	if at == des.Forever || at <= m.sim.Now() {
		return
	}
	at += des.Duration(m.poll / 2)
	if m.ageWake.Pending() {
		if m.ageWake.At() <= at {
			return
		}
		m.sim.Cancel(m.ageWake)
	}
	m.ageWake = m.sim.Schedule(at, 1, evTapeAge, 0, m.poke)
}

// after runs fn once d has spent dt, charged to counter.
func (m *recallModel) after(d *tdrive, dt des.Time, counter *time.Duration, kind uint16, fn func()) {
	*counter += time.Duration(dt)
	m.sim.After(dt, kind, d.idx, fn)
}

// robotMove takes the one robot for an exchange (first come, first served,
// as the emulator's robot token is), waiting if it is busy.
func (m *recallModel) robotMove(d *tdrive, fn func()) { m.robot.move(m.sim, d, m.g, evTapeRobot, fn) }

// serve runs a decision as the recaller's serve does: dismount what the
// drive holds if another cartridge is wanted, mount, then each request in
// the scheduler's order: locate, stream into the disk buffer, commit.
func (m *recallModel) serve(d *tdrive, dec sched.Decision) {
	reqs := dec.Requests
	var next func(i int)
	next = func(i int) {
		if i > 0 && !d.failing {
			// recalls that arrived for this cartridge meanwhile, on the
			// drive's way (sched.Merge, as the recaller's serve does)
			if rest, added := m.sch.Merge(dec.Volume, reqs[i-1], reqs[i:], m.free); len(added) > 0 {
				reqs = append(reqs[:i:i], rest...)
				for _, q := range added {
					m.free -= q.Size
				}
			}
		}
		if d.failing {
			rest := reqs[i:]
			m.driveOut(d, func() { m.sch.Done(dec.Volume, rest) })
			return
		}
		if i == len(reqs) {
			m.sch.Done(dec.Volume, nil)
			m.free1(d)
			return
		}
		q := reqs[i]
		read := func() {
			d.off = q.Offset
			f := &des.Flow{Path: []*des.Resource{d.head}, Size: q.Size, Kind: evTapeXfer, Obj: d.idx}
			if m.buf != nil {
				f.Path = append(f.Path, m.buf)
			}
			start := m.sim.Now()
			f.Done = func() {
				d.stats.Transfer += time.Duration(m.sim.Now() - start)
				d.stats.BytesRead += q.Size
				d.off += q.Size
				m.sim.After(m.over, evTapeCommit, d.idx, func() {
					d.over += m.over
					if q.ID >= int64(len(m.reqs)) {
						m.recopyRead(q.Size)
					} else {
						m.doneAt[q.ID] = m.sim.Now()
						m.done++
					}
					next(i + 1)
				})
			}
			m.sim.Fluid.Start(f)
		}
		if d.off == q.Offset {
			read()
			return
		}
		if q.ReadThrough && d.off >= 0 && d.off < q.Offset {
			d.stats.ReadThroughs++
			m.after(d, des.Duration(m.g.ReadThroughTime(d.off, q.Offset, m.cap)), &d.stats.Positioning, evTapeLocate, read)
			return
		}
		// A cartridge just loaded sits before its label (off −1): the
		// first read always locates, even to the first tape file.
		dt := m.g.LocateTime(m.pos(d.off), m.pos(q.Offset))
		if dt == 0 {
			dt = m.g.LocateStart
		}
		d.stats.Locates++
		m.after(d, des.Duration(dt), &d.stats.Positioning, evTapeLocate, read)
	}
	mount := func() {
		if !dec.Mount {
			next(0)
			return
		}
		m.robotMove(d, func() {
			if m.mountFailed() {
				m.failedMount(d, dec.Volume, reqs)
				return
			}
			m.after(d, des.Duration(m.g.Load), &d.stats.Mounting, evTapeLoad, func() {
				d.vol, d.off = dec.Volume, -1
				d.stats.Mounts++
				delete(m.fail.mountFails, dec.Volume) // a round that mounts ends the failures
				if m.fail.bad[dec.Volume] {
					m.badMount(d, dec.Volume, reqs)
					return
				}
				next(0)
			})
		})
	}
	if !dec.Mount || d.vol == "" {
		mount()
		return
	}
	m.after(d, des.Duration(m.g.RewindTime(m.pos(d.off))), &d.stats.Positioning, evTapeUnload, func() {
		d.off = 0
		m.after(d, des.Duration(m.g.Unload), &d.stats.Mounting, evTapeUnload, func() {
			m.robotMove(d, func() {
				d.vol = ""
				d.stats.Dismounts++
				mount()
			})
		})
	})
}

func (m *recallModel) result(c *Config, seed uint64) *Result {
	s := m.sim
	rr := &RecallResult{Files: len(m.reqs)}
	var first, last des.Time = des.Forever, 0
	lat := make([]float64, 0, len(m.reqs))
	sum := 0.0
	for i, q := range m.reqs {
		first = min(first, m.queued[i])
		if m.fail.copyOf[i] >= m.fail.copies {
			continue // lost: no copy was readable
		}
		rr.Bytes += q.Size
		last = max(last, m.doneAt[i])
		lat = append(lat, (m.doneAt[i] - m.queued[i]).Seconds())
		sum += lat[len(lat)-1]
	}
	if len(lat) == 0 {
		lat = append(lat, 0)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return round3(lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)]) }
	rr.Mean = round3(sum / float64(len(lat)))
	rr.P50, rr.P95, rr.P99, rr.Max = pct(0.50), pct(0.95), pct(0.99), round3(lat[len(lat)-1])
	span := last - first
	rr.Seconds = round3(span.Seconds())
	if span > 0 {
		rr.MBps = round3(float64(rr.Bytes) / span.Seconds() / 1e6)
	}
	var st tape.Stats
	var over des.Time
	for _, d := range m.drives {
		st.Add(d.stats)
		over += d.over
	}
	rr.Mounts, rr.Locates, rr.ReadThroughs = int(st.Mounts), int(st.Locates), int(st.ReadThroughs)
	m.failureResult(rr)
	if total := float64(span) * float64(len(m.drives)); total > 0 {
		rr.Mounting = round3(float64(st.Mounting) / total)
		rr.Positioning = round3(float64(st.Positioning) / total)
		rr.Transfer = round3(float64(st.Transfer) / total)
		rr.Overhead = round3(float64(over) / total)
		rr.Idle = round3(math.Max(0, 1-rr.Mounting-rr.Positioning-rr.Transfer-rr.Overhead))
	}
	return &Result{Name: c.Name, Seed: seed, Op: "recall", Bytes: rr.Bytes, Seconds: rr.Seconds, MBps: rr.MBps,
		Events: s.Events(), Fingerprint: fmt.Sprintf("%016x", s.Fingerprint()), Recall: rr, Bound: Bound(c)}
}

// recallBound is the analytic side of a recall study: drives streaming at
// the native rate, and the disk buffer they land in. Mounts and locates
// only lower what the drives reach; the DES says by how much.
func (c *Config) recallBound(add func(name, what string, bps float64)) {
	t := c.Tape
	d := t.recallDrives()
	if c.Workload.Op == "migrate" {
		d = min(t.migrateDrives, t.Drives, t.Cartridges)
		add("D·T", fmt.Sprintf("%d %s drives migrating × %s", d, t.gen.Name, mbps(t.gen.Rate)), float64(d)*t.gen.Rate)
		add("disk", "disk reads "+mbps(float64(t.BufferRate)), float64(t.BufferRate))
		return
	}
	add("D·T", fmt.Sprintf("%d %s drives × %s", d, t.gen.Name, mbps(t.gen.Rate)), float64(d)*t.gen.Rate)
	add("buffer", "recall buffer writes "+mbps(float64(t.BufferRate)), float64(t.BufferRate))
	// Positioning has no bound of its own: how close a batch's files
	// lie depends on how many the rules let queue (the DES's answer).
	w := c.Workload
	if w.Trace != "" {
		return
	}
	size := float64(w.File)
	if w.ArrivalRate > 0 {
		add("λ·s", fmt.Sprintf("%.3g requests/s × %s offered", w.ArrivalRate, chart.SizeStr(int64(size))), w.ArrivalRate*size)
	}
}

// DriveParams are a tape drive's figures, each overriding the
// generation's when set: every number of tape.Generation.
type DriveParams struct {
	Rate        Rate    `toml:"rate"`     // native streaming rate
	Capacity    Size    `toml:"capacity"` // native cartridge capacity
	Length      float64 `toml:"length_m"` // tape length, metres
	Wraps       int     `toml:"wraps"`    // end-to-end passes
	Load        string  `toml:"load"`     // load and thread to ready
	Unload      string  `toml:"unload"`   // after the rewind
	AvgLocate   string  `toml:"avg_locate"`
	LocateStart string  `toml:"locate_start"` // the fixed part of every locate
	WrapChange  string  `toml:"wrap_change"`
	Backhitch   string  `toml:"backhitch"` // stop and reposition after a synchronising file mark
	Exchange    string  `toml:"exchange"`  // the robot, each way
}

// apply overrides g's figures with those set, and checks the result.
func (d DriveParams) apply(g *tape.Generation) error {
	if d.Rate > 0 {
		g.Rate = float64(d.Rate)
	}
	if d.Capacity > 0 {
		g.Capacity = int64(d.Capacity)
	}
	if d.Length > 0 {
		g.Length = d.Length
	}
	if d.Wraps > 0 {
		g.Wraps = d.Wraps
	}
	for _, x := range []struct {
		key, v string
		dst    *time.Duration
	}{{"load", d.Load, &g.Load}, {"unload", d.Unload, &g.Unload}, {"avg_locate", d.AvgLocate, &g.AvgLocate},
		{"locate_start", d.LocateStart, &g.LocateStart}, {"wrap_change", d.WrapChange, &g.WrapChange},
		{"backhitch", d.Backhitch, &g.Backhitch}, {"exchange", d.Exchange, &g.Exchange}} {
		if x.v == "" {
			continue
		}
		v, err := time.ParseDuration(x.v)
		if err != nil || v < 0 {
			return fmt.Errorf("tape.drive.%s %q: want a duration like 15s", x.key, x.v)
		}
		*x.dst = v
	}
	if g.AvgLocate <= g.LocateStart+g.WrapChange {
		return fmt.Errorf("tape.drive: avg_locate %v must exceed locate_start + wrap_change (%v): the rest is the distance at locate speed", g.AvgLocate, g.LocateStart+g.WrapChange)
	}
	return nil
}
