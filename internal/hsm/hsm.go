// Package hsm owns the tape tier: the engine that moves files between
// disk and the tape library — migration (copy to tape, aggregating small
// files into large tape files and striping large ones over drives), purge
// (drop disk copies by watermark), recall (bring them back, batched per
// cartridge by package sched), repack, the tape side of scrubbing and of
// self-healing copies, drives and cartridges in and out of service — and
// Rebuild, which recreates a catalog from the cartridges alone.
//
// The engine never touches file data: tape transfers are jobs
// (tapeserver.Jobs) that movers and tape servers run. What it needs of the
// namespace core — paths, classes of service, capabilities for disk
// objects, a place to recall into, the record of damage — it asks through
// Core, which package core implements; so the core is the namespace API
// and this package the tape tier, each testable on its own.
package hsm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// Config configures the tape tier. With no Library there is none:
// classes of service that ask for tape copies keep their files on disk.
type Config struct {
	Library tape.Library
	// Jobs runs the library's transfers; nil runs them in this process
	// (tapeserver.Exec), which a library with remote drives does not.
	Jobs tapeserver.Jobs
	// Clock is the library's clock: scheduling ages and estimates use it.
	Clock     clock.Clock
	TimeScale string // as configured, for display
	// MigrateAfter is the policy age: files unmodified this long are
	// copied to tape. MigrateEvery is how often the policy runs.
	MigrateAfter, MigrateEvery time.Duration
	// MigrateDrives is how many drives migration may use at once.
	MigrateDrives int
	// Aggregate is the size tape files are filled to: small files share
	// one, so they stream at drive speed and cost one file mark.
	Aggregate int64
	// StripeMin is the size from which a file striped on disk is striped
	// on tape too, over MigrateDrives drives (0: never).
	StripeMin int64
	// FlushBytes is how much a migration stream writes between
	// synchronising flushes; its copies count only after the flush.
	FlushBytes int64
	// HighWater and LowWater are fractions of a disk pool's capacity:
	// above the high mark, purge evicts files (least recently used first,
	// only those with a tape copy) until use is below the low mark.
	HighWater, LowWater float64
	PurgeEvery          time.Duration
	// Rules decide when a recall is worth a mount.
	Rules sched.Rules
	// MountRetry is how long a cartridge the robot failed to mount waits
	// before the next try, doubling at each failed round
	// (sched.RetryMount).
	MountRetry time.Duration
}

// Core is what the engine needs of the namespace core (package core
// implements it). Paths are resolved as an admin: the engine acts for
// policy or for a caller the core has already checked.
type Core interface {
	// Now is the core's wall clock (file times are wall-clock, whatever
	// the library's clock).
	Now() time.Time
	// Stat resolves path.
	Stat(ctx context.Context, path string) (catalog.Inode, error)
	// Classes lists the classes of service; PoolOf is the disk pool a
	// class writes to (the default pool for an unknown one).
	Classes() []catalog.COS
	PoolOf(cos string) string
	// Source is disk object s with its mover and a capability for op,
	// living the core's token lifetime plus extra.
	Source(ctx context.Context, s catalog.Segment, op string, maxLen int64, extra time.Duration) (tapeserver.Source, error)
	// RecallTarget places a new disk object of length bytes in pool for
	// stripe of b, records it as b's recall object (so that an attempt
	// cut short leaves garbage, not a leak), and returns it with a write
	// capability; done ends the placement once the write is over.
	RecallTarget(ctx context.Context, b catalog.Bitfile, stripe int, pool string, length int64) (dest tapeserver.Source, done func(), err error)
	// CheckReceipt checks a mover's receipt for an object it wrote.
	CheckReceipt(receipt, device, object string, length int64, crc uint32) bool
	// DeleteObject deletes a disk object no file uses.
	DeleteObject(ctx context.Context, device, object string)
	// PoolFree is the free space of the named disk pools, less what
	// recalls in flight hold.
	PoolFree(ctx context.Context, pools map[string]bool) int64
	// PoolFS sums the file systems under each pool's devices (the pools
	// of devs), each counted once.
	PoolFS(devs []catalog.Device) map[string]FS
	// DiskChanged says what is on disk changed (quota usage is stale).
	DiskChanged()
	// Lost says why a file is lost ("" if it is not known to be);
	// MarkLost records one with no good copy left.
	Lost(bitfile int64) string
	MarkLost(b catalog.Bitfile, path, why string)
	// TapeDamaged and Repaired count a damaged tape copy and a copy made
	// again, for the core's integrity report.
	TapeDamaged()
	Repaired()
	// VerifyDiskCopy verifies the disk copy of a file migration could not
	// read whole and acts on damage; it returns what was done ("" for
	// damage in transit only).
	VerifyDiskCopy(ctx context.Context, cd catalog.Candidate, path string) string
}

// FS is the size and free space of the file systems under a pool.
type FS struct{ Size, Free int64 }

func (h *Config) defaults() {
	if h.Clock == nil {
		h.Clock = clock.Wall{}
	}
	if h.MigrateEvery == 0 {
		h.MigrateEvery = 10 * time.Second
	}
	if h.MigrateDrives <= 0 {
		h.MigrateDrives = 1
	}
	if h.Aggregate <= 0 {
		h.Aggregate = 1 << 30
	}
	if h.FlushBytes <= 0 {
		h.FlushBytes = sched.DefaultFlushBytes
	}
	if h.HighWater <= 0 {
		h.HighWater = 0.9
	}
	if h.LowWater <= 0 || h.LowWater >= h.HighWater {
		h.LowWater = h.HighWater * 0.8
	}
	if h.PurgeEvery == 0 {
		h.PurgeEvery = 30 * time.Second
	}
	if h.MountRetry <= 0 {
		h.MountRetry = 10 * time.Second
	}
}

// Engine is the engine that moves files between disk and tape: migration
// (copy to tape), purge (drop disk copies), and recall (bring them back),
// sharing the library's drives. Migration and purge state is the catalog
// itself (files short of tape copies, pools over their mark), so they
// resume after a crash by looking again; recalls are user requests, kept
// in the catalog and reloaded at start.
type Engine struct {
	c     Core
	store catalog.Store
	log   *slog.Logger
	cfg   Config
	lib   tape.Library
	jobs  tapeserver.Jobs
	clk   clock.Clock

	mu    sync.Mutex
	sched *sched.Scheduler
	busy  map[string]string    // drive → "recall" or "migrate"
	idle  map[string]time.Time // drive → when it finished its last recall batch
	// reserved are cartridges a migration stream chose for its drive,
	// before the mount makes that visible in the library.
	reserved map[string]string // volume → drive
	draining map[string]bool   // cartridges being repacked: not written
	// drivesOut and volsOut are the drives and cartridges out of
	// service, each with why: taken out by an admin, or (drives) failed
	// under a transfer. One rule (driveUsableLocked, volumeUsableLocked)
	// decides for recall, migration, repack and scrub alike.
	drivesOut map[string]string
	volsOut   map[string]string
	// readOnly are cartridges a damaged tape file was read from: read,
	// not written, until an admin puts them back in service.
	readOnly   map[string]readOnly
	mountFails map[string]int       // cartridge → mount rounds failed in a row
	mountRetry map[string]time.Time // cartridge → when its mount is tried again (library clock)
	emptied    map[string]time.Time // drive out of service → when its cartridge was last asked out
	recalls    map[int64]*recall    // queued or running, by bitfile
	// failedRecalls keeps why recent recalls failed, for status queries.
	failedRecalls map[int64]error
	nextID        int64
	wake          chan struct{}
	remakes       chan string // paths whose damaged tape copies are to be made again

	migrateMu sync.Mutex // one migration pass at a time
}

// recall is one file's recall as users see it.
type recall struct {
	bitfile int64
	path    string
	pool    string                  // disk pool to recall into
	volume  string                  // the cartridge it is queued on (its first stripe's)
	copy    int                     // the tape copy being read
	stripes int                     // how many stripes that copy has
	keys    []string                // its requests in the scheduler
	segs    map[int]catalog.Segment // stripes on disk so far
	tried   map[string]bool         // cartridges that failed it
	active  bool
	repair  bool // it re-makes a disk copy dropped as damaged
	remake  bool // it found a damaged tape copy, dropped: make it again
	done    chan struct{}
	err     error
}

// New returns the engine of cfg's library, or nil when there is none.
// cfg.Jobs runs its transfers (package core sets tapeserver.Exec, which
// runs them in its own process, unless the drives are on tape servers).
func New(cfg Config, c Core, store catalog.Store, log *slog.Logger) *Engine {
	if cfg.Library == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.defaults()
	sch := sched.New(cfg.Rules)
	sch.Tape = geometry(cfg.Library)
	jobs := cfg.Jobs
	h := &Engine{c: c, store: store, log: log, cfg: cfg, lib: cfg.Library, jobs: jobs, clk: cfg.Clock, sched: sch,
		busy: map[string]string{}, idle: map[string]time.Time{}, reserved: map[string]string{}, draining: map[string]bool{}, drivesOut: map[string]string{}, volsOut: map[string]string{}, readOnly: map[string]readOnly{}, mountFails: map[string]int{}, mountRetry: map[string]time.Time{}, emptied: map[string]time.Time{}, recalls: map[int64]*recall{}, failedRecalls: map[int64]error{}, wake: make(chan struct{}, 1),
		remakes: make(chan string, 1024)}
	h.loadService()
	return h
}

// Staging reports whether bitfile's recall is queued or running.
func (h *Engine) Staging(bitfile int64) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recalls[bitfile] != nil
}

func (h *Engine) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// tapeCOSByCopies groups the classes of service with tape copies by how
// many they want: the policy asks the catalog for each group's files with
// fewer copies than that, so that a file with all its class's copies is
// never a candidate because another class wants more.
func (h *Engine) tapeCOSByCopies() map[int][]string {
	out := map[int][]string{}
	for _, k := range h.c.Classes() {
		if k.TapeCopies > 0 {
			out[k.TapeCopies] = append(out[k.TapeCopies], k.Name)
		}
	}
	return out
}

// Run is the engine's background work until ctx ends: the migration and
// purge policies, recalls, and tape copies made again.
func (h *Engine) Run(ctx context.Context) {
	if err := h.loadRecalls(ctx); err != nil {
		h.log.Warn("hsm: cannot reload queued recalls", "err", err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); h.recaller(ctx) }()
	go func() { defer wg.Done(); h.remaker(ctx) }()
	go func() {
		defer wg.Done()
		mt := time.NewTicker(h.cfg.MigrateEvery)
		pt := time.NewTicker(h.cfg.PurgeEvery)
		defer mt.Stop()
		defer pt.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-mt.C:
				if _, err := h.migrate(ctx, nil, h.cfg.MigrateAfter); err != nil && ctx.Err() == nil {
					h.log.Warn("hsm: migration", "err", err)
				}
			case <-pt.C:
				if _, err := h.PurgePolicy(ctx); err != nil && ctx.Err() == nil {
					h.log.Warn("hsm: purge", "err", err)
				}
			}
		}
	}()
	wg.Wait()
}

// Library reports the tape library's state.
func (h *Engine) Library() api.Library {
	out := api.Library{Generation: h.lib.Generation().Name, TimeScale: h.cfg.TimeScale}
	carts := h.lib.Cartridges()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ci := range carts {
		out.Cartridges = append(out.Cartridges, api.Cartridge{Volume: ci.Volume, Capacity: ci.Capacity, Used: ci.Used, TapeFiles: ci.Files, Drive: ci.Drive, Unreadable: ci.Unreadable,
			OutOfService: cmp.Or(h.volsOut[ci.Volume], h.readOnly[ci.Volume].why)})
	}
	for _, di := range h.lib.Drives() {
		state := "idle"
		if b := h.busy[di.ID]; b != "" {
			state = b
		}
		why := h.driveOutLocked(di)
		switch {
		case why == "":
		case why == outByAdmin:
			state = "offline"
		case di.Lost:
			state = "lost"
		default:
			state = "failed"
		}
		out.Drives = append(out.Drives, api.Drive{ID: di.ID, Volume: di.Volume, State: state, OutOfService: why, Mounts: di.Stats.Mounts, Locates: di.Stats.Locates, ReadThroughs: di.Stats.ReadThroughs,
			Positioning: di.Stats.Positioning.Seconds(), BytesRead: di.Stats.BytesRead, BytesWrite: di.Stats.BytesWritten})
	}
	for _, v := range h.sched.Summary(h.clk.Now()) {
		out.Queue = append(out.Queue, api.QueueEntry{Volume: v.Volume, Files: v.Files, Bytes: v.Bytes, Oldest: v.Oldest, Priority: v.Priority, Drive: v.Drive})
	}
	return out
}

// takeDrive claims an idle drive for owner, preferring one holding a
// cartridge accepted by prefer (called without h.mu held).
func (h *Engine) takeDrive(owner string, prefer func(drive, volume string) bool) (string, string, bool) {
	for {
		var pick, vol string
		good := false
		for _, d := range h.lib.Drives() {
			h.mu.Lock()
			free := h.busy[d.ID] == "" && h.driveOutLocked(d) == ""
			h.mu.Unlock()
			if !free {
				continue
			}
			p := d.Volume != "" && prefer(d.ID, d.Volume)
			if pick == "" || (p && !good) {
				pick, vol, good = d.ID, d.Volume, p
			}
		}
		if pick == "" {
			return "", "", false
		}
		h.mu.Lock()
		if h.busy[pick] == "" { // still free: claim it
			h.busy[pick] = owner
			h.mu.Unlock()
			return pick, vol, true
		}
		h.mu.Unlock()
	}
}

func (h *Engine) releaseDrive(id string) {
	h.mu.Lock()
	delete(h.busy, id)
	for v, d := range h.reserved {
		if d == id {
			delete(h.reserved, v)
		}
	}
	h.mu.Unlock()
	h.poke()
}

// driveFailed takes a drive out of service until the server restarts and
// has its cartridge pulled out, so other drives can serve it.
func (h *Engine) driveFailed(ctx context.Context, id string, err error) {
	h.mu.Lock()
	_, already := h.drivesOut[id]
	if !already {
		h.drivesOut[id] = "failed: " + err.Error()
	}
	h.mu.Unlock()
	if already {
		return
	}
	h.log.Warn("hsm: drive out of service", "drive", id, "err", err)
	for _, d := range h.lib.Drives() {
		if d.ID == id && d.Volume != "" {
			if err := h.lib.Dismount(ctx, id); err != nil {
				h.log.Warn("hsm: cannot empty failed drive", "drive", id, "volume", d.Volume, "err", err)
			}
		}
	}
	h.poke()
}

// mountOn makes sure volume is in drive, dismounting whatever is there.
func (h *Engine) mountOn(ctx context.Context, drive, have, volume string) error {
	if have == volume {
		return nil
	}
	if have != "" {
		if err := h.lib.Dismount(ctx, drive); err != nil {
			return err
		}
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = h.lib.Mount(ctx, drive, volume); !errors.Is(err, tape.ErrRobot) {
			return err
		}
		h.log.Warn("hsm: robot failed a move, retrying", "drive", drive, "volume", volume, "err", err)
	}
	return err
}

// pathOf names a file for messages and tape headers.
func (h *Engine) pathOf(ctx context.Context, in catalog.Inode) string {
	p, err := h.store.Path(ctx, in.ID)
	if err != nil {
		return fmt.Sprintf("<inode %d>", in.ID)
	}
	return p
}

// pathIn is pathOf for a file whose directory's path may be in dirs
// (by inode), and is added to it.
func (h *Engine) pathIn(ctx context.Context, in catalog.Inode, dirs map[int64]string) string {
	dir, ok := dirs[in.Parent]
	if !ok {
		p, err := h.store.Path(ctx, in.Parent)
		if err != nil {
			return h.pathOf(ctx, in)
		}
		dir, dirs[in.Parent] = p, p
	}
	return path.Join(dir, in.Name)
}

// geometry is the library's tape layout for the scheduler's read order:
// the generation, and the cartridges' capacity (an emulated library's may
// be smaller than the generation's, spread over the whole tape).
func geometry(lib tape.Library) *sched.Geometry {
	g := &sched.Geometry{Gen: lib.Generation()}
	if cs := lib.Cartridges(); len(cs) > 0 {
		g.Capacity = cs[0].Capacity
	}
	return g
}

// filesOf says where the disk copies of a tape file's files are, with
// capabilities to read them, for the job that writes it.
func (h *Engine) filesOf(ctx context.Context, cands []catalog.Candidate) ([]tapeserver.File, error) {
	out := make([]tapeserver.File, len(cands))
	for i, cd := range cands {
		b := cd.Bitfile
		if !b.OnDisk || len(b.Segments) == 0 {
			return nil, api.Errorf(api.ErrOffline, "bitfile %d has no disk copy", b.ID)
		}
		out[i] = tapeserver.File{Size: b.Size, StripeUnit: b.StripeUnit}
		for _, s := range b.Segments {
			src, err := h.source(ctx, s, token.OpRead, 0)
			if err != nil {
				return nil, err
			}
			out[i].Stripes = append(out[i].Stripes, src)
		}
	}
	return out, nil
}

// source is one disk object with its mover and a capability for op. The
// capability lives the token lifetime plus the time the rest of a tape
// file may take to write at a slow 20 MB/s: a job reads its files one
// after the other.
func (h *Engine) source(ctx context.Context, s catalog.Segment, op string, maxLen int64) (tapeserver.Source, error) {
	return h.c.Source(ctx, s, op, maxLen, time.Duration(h.cfg.Aggregate/(20<<20))*time.Second)
}

// RegisterTapeServer adds a tape server's drives to the library, which
// must be one with remote drives.
func (h *Engine) RegisterTapeServer(r tapeserver.Registration) error {
	lib, _ := h.lib.(*tapeserver.Library)
	if lib == nil {
		return api.Errorf(api.ErrInvalid, "register tape server %s: this core's library has no remote drives (set [library] remote = true)", r.ID)
	}
	if err := lib.Register(r); err != nil {
		return err
	}
	h.poke() // drives may have come (back)
	return nil
}
