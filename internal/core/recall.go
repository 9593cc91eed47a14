package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// Stage queues recalls of the named files (see api.StageRequest) and
// reports where each stands. A caller may stage what it may read.
func (c *Core) Stage(ctx context.Context, r api.StageRequest) (api.StageResponse, error) {
	var out api.StageResponse
	var ids []int64
	who, err := caller(ctx)
	if err != nil {
		return out, err
	}
	if r.Priority > 0 && !who.Admin {
		// A raised priority jumps every other user's queue.
		return out, fmt.Errorf("stage --priority: %w (%s is not an admin)", api.ErrDenied, who.User)
	}
	for _, p := range r.Paths {
		st, id, err := c.stageOne(ctx, who, p, r.Priority, true)
		if err == nil && r.Pin > 0 {
			err = c.pin(ctx, who, p, time.Duration(r.Pin*float64(time.Second)), &st)
		}
		if err != nil {
			return out, err
		}
		out.Files = append(out.Files, st)
		ids = append(ids, id)
	}
	c.hsm.statuses(out.Files, ids) // one pass over the queue for all of them
	return out, nil
}

// StageStatus reports one file's recall without queueing one.
func (c *Core) StageStatus(ctx context.Context, p string) (api.StageStatus, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.StageStatus{}, err
	}
	st, id, err := c.stageOne(ctx, who, p, 0, false)
	if err != nil {
		return st, err
	}
	sts := []api.StageStatus{st}
	c.hsm.statuses(sts, []int64{id})
	return sts[0], nil
}

// MaxStageWait bounds how long one status request waits for a recall.
const MaxStageWait = time.Minute

// StageWait is StageStatus that, while p's recall is queued or running,
// first waits up to wait (at most MaxStageWait) for it to end: a reader
// blocked in open(2) learns at once that its file is back, which polling
// would tell it up to a poll interval later — time in which the drive
// might have let the cartridge go.
func (c *Core) StageWait(ctx context.Context, p string, wait time.Duration) (api.StageStatus, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.StageStatus{}, err
	}
	_, id, err := c.stageOne(ctx, who, p, 0, false)
	if err != nil {
		return api.StageStatus{}, err
	}
	if done := c.hsm.doneOf(id); done != nil && wait > 0 {
		t := time.NewTimer(min(wait, MaxStageWait))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
			return api.StageStatus{}, ctx.Err()
		}
	}
	return c.StageStatus(ctx, p)
}

// doneOf is the channel closed when bitfile's recall ends, or nil if none
// is queued or running.
func (h *hsm) doneOf(bitfile int64) <-chan struct{} {
	if h == nil || bitfile == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.recalls[bitfile]; r != nil {
		return r.done
	}
	return nil
}

// stageOne resolves p and queues its recall if asked and needed. It
// returns the file's state if it is settled (resident), else the bitfile
// whose recall status statuses fills in.
func (c *Core) stageOne(ctx context.Context, who *auth.Identity, p string, prio int, queue bool) (api.StageStatus, int64, error) {
	op := auth.ScopeRead
	if queue {
		op = auth.ScopeStage
	}
	// Who may stage a file may ask how its recall goes.
	if err := scoped(who, op, p); err != nil && (queue || !who.Allows(auth.ScopeStage, p)) {
		return api.StageStatus{}, 0, err
	}
	comps, in, err := c.statPath(ctx, who, p)
	if err != nil {
		return api.StageStatus{}, 0, fmt.Errorf("stage: %w", err)
	}
	path := joinPath(comps)
	if in.Kind == catalog.KindDir {
		return api.StageStatus{}, 0, api.Errorf(api.ErrIsDir, "stage %s", path)
	}
	if queue {
		if err := may(who, in, path, path, auth.Read); err != nil {
			return api.StageStatus{}, 0, err
		}
	}
	st := api.StageStatus{Path: path, State: api.StageResident}
	if in.Bitfile == 0 {
		return st, 0, nil
	}
	b, err := c.store.Bitfile(ctx, in.Bitfile)
	if err != nil {
		return st, 0, fmt.Errorf("stage %s: %w", path, err)
	}
	st.PinnedUntil = pinTime(b.PinnedUntil, c.now())
	if b.OnDisk {
		return st, 0, nil
	}
	if why := c.lostFile(b.ID); why != "" {
		return st, 0, api.Errorf(api.ErrCorrupt, "stage %s: lost: %s", path, why)
	}
	h := c.hsm
	if h == nil {
		return st, 0, api.Errorf(api.ErrOffline, "stage %s: on tape, and no tape library is configured", path)
	}
	if queue {
		had, err := c.store.QueueRecall(ctx, catalog.Recall{Bitfile: b.ID, Queued: h.clk.Now().UnixNano(), Priority: prio})
		if err != nil {
			return st, 0, fmt.Errorf("stage %s: %w", path, err)
		}
		if err := h.enqueue(b, h.clk.Now(), prio, path, c.poolOf(in.COS)); err != nil {
			if !had {
				c.store.DoneRecall(ctx, b.ID)
			}
			return st, 0, fmt.Errorf("stage %s: %w", path, err)
		}
	}
	return st, b.ID, nil
}

// poolOf is the disk pool a class of service writes to.
func (c *Core) poolOf(cos string) string {
	if k, ok := c.class(cos); ok {
		return k.Pool
	}
	return c.defaultPool()
}

// enqueue adds a recall of b to the scheduler (coalescing with one already
// queued), reading the first tape copy on a readable cartridge.
func (h *hsm) enqueue(b catalog.Bitfile, queued time.Time, prio int, path, pool string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.recalls[b.ID]; r != nil {
		if prio > 0 {
			for _, k := range r.keys {
				h.sched.Add(sched.Request{Key: k, Priority: prio})
			}
		}
		return nil
	}
	r := &recall{bitfile: b.ID, path: path, pool: pool, tried: map[string]bool{}, done: make(chan struct{})}
	if err := h.queueLocked(r, b, queued, prio); err != nil {
		return err
	}
	h.recalls[b.ID] = r
	delete(h.failedRecalls, b.ID)
	h.poke()
	return nil
}

// queueLocked queues r on the first tape copy none of whose cartridges has
// failed: one request per stripe (an unstriped copy is one stripe), so the
// stripes of a striped copy are read on several drives at once.
func (h *hsm) queueLocked(r *recall, b catalog.Bitfile, queued time.Time, prio int) error {
	bad := map[string]bool{}
	for _, ci := range h.lib.Cartridges() {
		bad[ci.Volume] = h.volumeOutLocked(ci) != ""
	}
	for _, cp := range copiesOf(b.Tapes) {
		usable := true
		for _, tc := range cp {
			usable = usable && !r.tried[tc.Volume] && !bad[tc.Volume]
		}
		if !usable {
			continue
		}
		r.copy, r.stripes, r.volume, r.keys = cp[0].Copy, len(cp), cp[0].Volume, nil
		r.segs = map[int]catalog.Segment{}
		for _, tc := range cp {
			h.nextID++
			k := stripeKey(b.ID, tc.Copy, tc.Stripe)
			r.keys = append(r.keys, k)
			h.sched.Add(sched.Request{ID: h.nextID, Key: k, Volume: tc.Volume, Seq: tc.Seq, Offset: tc.Position + tc.Offset,
				Size: tc.Length, Priority: prio, Queued: queued})
		}
		return nil
	}
	if len(b.Tapes) == 0 {
		return api.Errorf(api.ErrOffline, "no disk copy and no tape copy")
	}
	var vols []string
	for _, tc := range b.Tapes {
		vols = append(vols, tc.Volume)
	}
	return api.Errorf(api.ErrOffline, "every tape copy is on a cartridge that failed, is unreadable or is out of service (%s)", strings.Join(vols, ", "))
}

// loadRecalls queues the recalls a previous run left.
func (h *hsm) loadRecalls(ctx context.Context) error {
	rs, err := h.c.store.Recalls(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		b, err := h.c.store.Bitfile(ctx, r.Bitfile)
		if err != nil || b.OnDisk || b.State != catalog.Committed {
			h.c.store.DoneRecall(ctx, r.Bitfile)
			continue
		}
		if err := h.enqueue(b, time.Unix(0, r.Queued), r.Priority, fmt.Sprintf("<bitfile %d>", b.ID), h.c.defaultPool()); err != nil {
			h.c.log.Warn("hsm: a queued recall cannot be served", "bitfile", b.ID, "err", err)
			h.c.store.DoneRecall(ctx, r.Bitfile)
		}
	}
	if len(rs) > 0 {
		h.c.log.Info("hsm: recalls resumed", "files", len(rs))
	}
	return nil
}

// statuses fills in the recall state of sts[i] for each ids[i] != 0 (a
// file not on disk), walking the queue once for all of them: a bulk stage
// of many files costs one sort per cartridge queue, not one per file.
func (h *hsm) statuses(sts []api.StageStatus, ids []int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	type place struct {
		ahead int
		bytes int64
	}
	var view map[int64]place
	g := h.lib.Generation()
	lds := h.lib.Drives()
	drives := int64(max(1, len(lds)))
	waiting := h.noUsableDriveLocked(lds)
	stuck := map[string]string{} // cartridge → why the drive holding it cannot serve it
	for _, d := range lds {
		if why := h.driveOutLocked(d); why != "" && d.Volume != "" {
			stuck[d.Volume] = fmt.Sprintf("cartridge %s is in drive %s, which is out of service: %s", d.Volume, d.ID, why)
		}
	}
	for i, id := range ids {
		if id == 0 {
			continue
		}
		st := &sts[i]
		if err, ok := h.failedRecalls[id]; ok {
			st.State, st.Error = api.StageFailed, err.Error()
			continue
		}
		r := h.recalls[id]
		if r == nil {
			st.State = api.StageOffline // on tape, and no recall known
			continue
		}
		st.Volume = r.volume
		if r.active {
			st.State = api.StageActive
			continue
		}
		if view == nil {
			view = map[int64]place{}
			var p place
			for _, v := range h.sched.Summary(h.clk.Now()) {
				for _, q := range h.sched.Queued(v.Volume) {
					view[keyID(q.Key)] = p
					p.ahead++
					p.bytes += q.Size
				}
			}
		}
		p := view[id]
		st.State, st.Position = api.StageQueued, p.ahead
		if w := cmp.Or(waiting, stuck[r.volume]); w != "" {
			st.Waiting = w // and no estimate: nothing moves until the drive is back
			continue
		}
		eta := g.MountTime() + g.AvgLocate + g.TransferTime(p.bytes/drives)
		switch clk := h.clk.(type) {
		case *clock.Scaled:
			eta = time.Duration(float64(eta) / clk.Factor())
		case *clock.Instant:
			eta = 0
		}
		st.ETA = eta.Seconds()
	}
}

// recaller hands batches to drives as the scheduler decides.
func (h *hsm) recaller(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		free := h.bufferFree(ctx)
		lds := h.lib.Drives()
		for _, d := range lds {
			// A drive the library reports failed, with a cartridge in it:
			// take it out of service and free the cartridge.
			h.mu.Lock()
			idle := h.busy[d.ID] == ""
			out := h.driveOutLocked(d) != ""
			h.mu.Unlock()
			if d.Failed && d.Volume != "" && idle {
				h.driveFailed(ctx, d.ID, tape.ErrDriveFailed)
			} else if out && d.Volume != "" && idle {
				h.emptyOutOfService(ctx, d)
			}
		}
		h.mu.Lock()
		var drives []sched.Drive
		for _, d := range h.lib.Drives() {
			drives = append(drives, sched.Drive{ID: d.ID, Volume: d.Volume, Busy: h.busy[d.ID] != "", Failed: h.driveOutLocked(d) != "", Idle: h.idle[d.ID]})
		}
		ds := h.sched.Next(h.clk.Now(), drives, free)
		for _, d := range ds {
			h.busy[d.Drive] = "recall"
			for _, q := range d.Requests {
				if r := h.recalls[keyID(q.Key)]; r != nil {
					r.active = true
				}
			}
		}
		h.mu.Unlock()
		for _, d := range ds {
			go h.serve(ctx, d)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-t.C:
		}
	}
}

// emptyRetry is how often the recaller tries again to take a cartridge out
// of a drive out of service (the robot failed, or the drive did).
const emptyRetry = 10 * time.Second

// emptyOutOfService tries, now and then, to take the cartridge out of a
// drive out of service, so other drives can read it.
func (h *hsm) emptyOutOfService(ctx context.Context, d tape.DriveInfo) {
	h.mu.Lock()
	if time.Since(h.emptied[d.ID]) < emptyRetry {
		h.mu.Unlock()
		return
	}
	h.emptied[d.ID] = time.Now()
	h.mu.Unlock()
	if err := h.lib.Dismount(ctx, d.ID); err != nil {
		h.c.log.Debug("hsm: cannot yet take the cartridge out of a drive out of service", "drive", d.ID, "volume", d.Volume, "err", err)
		return
	}
	h.c.log.Info("hsm: cartridge taken out of a drive out of service", "drive", d.ID, "volume", d.Volume)
	h.poke()
}

// A recall request's key names the bitfile, the tape copy and the stripe
// it reads: "bitfile/copy/stripe".
func stripeKey(bitfile int64, copy, stripe int) string {
	return fmt.Sprintf("%d/%d/%d", bitfile, copy, stripe)
}

func parseKey(k string) (bitfile int64, copy, stripe int) {
	fmt.Sscanf(k, "%d/%d/%d", &bitfile, &copy, &stripe)
	return
}

func keyID(k string) int64 {
	id, _, _ := parseKey(k)
	return id
}

// copiesOf groups tape copy rows (sorted by copy, then stripe) by copy.
func copiesOf(rows []catalog.TapeCopy) [][]catalog.TapeCopy {
	var out [][]catalog.TapeCopy
	for i, tc := range rows {
		if i == 0 || tc.Copy != rows[i-1].Copy {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], tc)
	}
	return out
}

// bufferFree is the free space of the disk pools recalls land in.
func (h *hsm) bufferFree(ctx context.Context) int64 {
	devs, err := h.c.store.Devices(ctx)
	if err != nil {
		return 0
	}
	pools := map[string]bool{}
	for _, k := range h.c.classList() {
		if k.TapeCopies > 0 {
			pools[k.Pool] = true
		}
	}
	var free int64
	h.c.mu.Lock()
	for _, d := range devs {
		if pools[d.Pool] {
			free += h.c.freeLocked(d)
		}
	}
	h.c.mu.Unlock()
	return free
}

// serve runs one decision: mount, then recall each file in order.
func (h *hsm) serve(ctx context.Context, d sched.Decision) {
	var retry []sched.Request
	defer func() {
		h.mu.Lock()
		delete(h.busy, d.Drive)
		h.idle[d.Drive] = h.clk.Now()
		for _, q := range retry {
			if r := h.recalls[keyID(q.Key)]; r != nil {
				r.active = false
			}
		}
		h.sched.Done(d.Volume, retry)
		h.mu.Unlock()
		h.poke()
	}()
	have := ""
	for _, di := range h.lib.Drives() {
		if di.ID == d.Drive {
			have = di.Volume
		}
	}
	h.mu.Lock()
	out := h.volsOut[d.Volume]
	h.mu.Unlock()
	if out != "" { // taken out of service after its recalls were handed out
		h.fallback(ctx, d.Requests, api.Errorf(api.ErrOffline, "cartridge %s is out of service", d.Volume))
		return
	}
	if have != d.Volume {
		h.c.log.Info("hsm: mounting for recalls", "drive", d.Drive, "volume", d.Volume, "unmount", have, "files", len(d.Requests))
	}
	if err := h.mountOn(ctx, d.Drive, have, d.Volume); err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, tape.ErrDriveFailed):
			h.driveFailed(ctx, d.Drive, err)
			retry = d.Requests
		case errors.Is(err, tape.ErrUnreadable), errors.Is(err, tape.ErrNoSuchVolume):
			h.fallback(ctx, d.Requests, err)
		default:
			// The robot, most likely: try again on the next round, but
			// not for ever — after maxMountFailures the recalls go to
			// another copy, or fail saying why.
			h.mu.Lock()
			h.mountFails[d.Volume]++
			n := h.mountFails[d.Volume]
			if n >= maxMountFailures {
				delete(h.mountFails, d.Volume)
			}
			h.mu.Unlock()
			if n >= maxMountFailures {
				h.c.log.Error("hsm: cannot mount a cartridge; its recalls go to other copies or fail", "volume", d.Volume, "tries", n, "err", err)
				h.fallback(ctx, d.Requests, fmt.Errorf("cannot mount %s (%d tries): %w", d.Volume, n, err))
				return
			}
			h.c.log.Warn("hsm: mount failed; recalls wait for the next try", "drive", d.Drive, "volume", d.Volume, "tries", n, "err", err)
			retry = d.Requests
		}
		return
	}
	h.mu.Lock()
	delete(h.mountFails, d.Volume)
	h.mu.Unlock()
	for i, q := range d.Requests {
		complete, err := h.recallOne(ctx, d.Drive, q)
		switch {
		case err == nil:
			if complete {
				h.finish(ctx, keyID(q.Key), nil)
			}
		case ctx.Err() != nil:
			return // stopping: the requests stay in the catalog for the next run
		case errors.Is(err, tape.ErrDriveFailed):
			h.driveFailed(ctx, d.Drive, err)
			retry = d.Requests[i:]
			return
		case errors.Is(err, tape.ErrUnreadable), errors.Is(err, api.ErrCorrupt):
			var td *tapeDamage
			if errors.As(err, &td) {
				h.recallDamaged(ctx, keyID(q.Key), td.copy, td.err)
			}
			h.fallback(ctx, d.Requests[i:], err)
			return
		default:
			h.finish(ctx, keyID(q.Key), err)
		}
	}
}

// maxMountFailures is how many rounds of mount attempts (each a few tries
// of the robot) a cartridge gets before its recalls give up on it.
const maxMountFailures = 5

// fallback re-queues recalls on another copy, or fails them when none is
// left.
func (h *hsm) fallback(ctx context.Context, reqs []sched.Request, cause error) {
	for _, q := range reqs {
		id := keyID(q.Key)
		b, err := h.c.store.Bitfile(ctx, id)
		h.mu.Lock()
		r := h.recalls[id]
		var orphans map[int]catalog.Segment
		if r != nil && err == nil {
			_, cp, _ := parseKey(q.Key)
			if cp != r.copy {
				h.mu.Unlock()
				continue // already moved on to another copy
			}
			r.tried[q.Volume] = true
			r.active = false
			orphans = r.segs // stripes of the copy given up on
			err = h.queueLocked(r, b, q.Queued, q.Priority)
		}
		h.mu.Unlock()
		for _, sg := range orphans {
			h.c.deleteObject(ctx, sg.Device, sg.Object)
		}
		if err != nil {
			h.finish(ctx, id, fmt.Errorf("%s: %w", q.Volume, cause))
		}
	}
}

// finish ends a recall, successfully or not, and wakes its waiters.
func (h *hsm) finish(ctx context.Context, bitfile int64, err error) {
	h.c.store.DoneRecall(ctx, bitfile)
	h.mu.Lock()
	r := h.recalls[bitfile]
	delete(h.recalls, bitfile)
	if err != nil {
		if len(h.failedRecalls) > 10000 {
			h.failedRecalls = map[int64]error{}
		}
		h.failedRecalls[bitfile] = err
	}
	var orphans map[int]catalog.Segment
	if r != nil && err != nil {
		orphans = r.segs // stripes already on disk that no file will use
	}
	h.mu.Unlock()
	for _, sg := range orphans {
		h.c.deleteObject(ctx, sg.Device, sg.Object)
	}
	if r != nil {
		if err != nil {
			h.c.log.Warn("hsm: recall failed", "path", r.path, "err", err)
		} else {
			h.repaired(r)
		}
		r.err = err
		close(r.done)
	}
}

// recallOne copies one stripe of a file from the mounted cartridge into a
// new disk object. When it was the file's last stripe to arrive, it records
// the new disk copy (striped as the tape copy is) and reports complete.
func (h *hsm) recallOne(ctx context.Context, drive string, q sched.Request) (complete bool, err error) {
	c := h.c
	id, cp, stripe := parseKey(q.Key)
	h.mu.Lock()
	r := h.recalls[id]
	current := r != nil && r.copy == cp
	pool := c.defaultPool()
	if r != nil && r.pool != "" {
		pool = r.pool
	}
	h.mu.Unlock()
	if !current {
		return false, nil // a request left from a copy given up on, or a finished recall
	}
	b, err := c.store.Bitfile(ctx, id)
	if err != nil {
		return false, err
	}
	if b.OnDisk {
		return true, nil
	}
	var tc catalog.TapeCopy
	for _, t := range b.Tapes {
		if t.Copy == cp && t.Stripe == stripe {
			tc = t
		}
	}
	if tc.Volume == "" {
		return false, api.Errorf(api.ErrNotFound, "bitfile %d has no tape copy %d stripe %d", id, cp, stripe)
	}
	picked, err := c.place(ctx, pool, 1, tc.Length, true)
	if err != nil {
		return false, err
	}
	dev, ep := picked[0].dev.ID, picked[0].ep
	defer c.release(dev, tc.Length)
	// A name no attempt used before, recorded before it is written: an
	// attempt given up, or cut short by a crash, leaves an object that
	// becomes garbage (catalog.Store.AddRecallObject) and that no later
	// attempt could be writing when it is reclaimed.
	obj := fmt.Sprintf("%s.%d-%d", catalog.ObjectName(b.ID, b.DiskGen+1, stripe), c.epoch, c.recallSeq.Add(1))
	if err := c.store.AddRecallObject(ctx, catalog.RecallObject{Bitfile: b.ID, Epoch: c.epoch, Device: dev, Object: obj}); err != nil {
		return false, err
	}
	dest := tapeserver.Source{Endpoint: ep, Device: dev, Object: obj, Length: tc.Length,
		Token: c.sign(auth.Root, token.OpWrite, dev, obj, tc.Length, c.cfg.TokenTTL)}
	st, err := h.jobs.Read(ctx, tapeserver.ReadJob{Drive: drive, Seq: tc.Seq, Offset: tc.Offset, Length: tc.Length, ReadThrough: q.ReadThrough, Dest: dest})
	if err != nil {
		return false, err
	}
	if !c.signer.CheckReceipt(st.Receipt, dev, obj, st.Length, st.CRC32C) {
		return false, api.Errorf(api.ErrDenied, "mover for %s: bad receipt for %s", dev, obj)
	}
	if st.Length != tc.Length || st.CRC32C != tc.CRC32C {
		c.deleteObject(ctx, dev, obj)
		return false, &tapeDamage{copy: cp, err: api.Errorf(api.ErrCorrupt, "%s tape file %d: %d bytes crc32c %08x read, catalog has %d bytes %08x", tc.Volume, tc.Seq, st.Length, st.CRC32C, tc.Length, tc.CRC32C)}
	}
	h.mu.Lock()
	if r.copy != cp { // given up on meanwhile
		h.mu.Unlock()
		c.deleteObject(ctx, dev, obj)
		return false, nil
	}
	r.segs[stripe] = catalog.Segment{Stripe: stripe, Device: dev, Object: obj, Length: st.Length, CRC32C: st.CRC32C}
	var segs []catalog.Segment
	if len(r.segs) == r.stripes {
		for i := 0; i < r.stripes; i++ {
			segs = append(segs, r.segs[i])
		}
	}
	h.mu.Unlock()
	if segs == nil {
		return false, nil // other stripes still to come
	}
	c.quota.markStale() // what is on disk changes
	if err := c.store.RestoreDiskCopy(ctx, b.ID, len(segs), b.StripeUnit, segs); err != nil {
		return false, err // finish deletes the objects
	}
	h.mu.Lock()
	r.segs = nil // the file owns them now
	h.mu.Unlock()
	return true, nil
}

// tapeDamage is a tape copy whose data, read whole, is not what the
// catalog recorded.
type tapeDamage struct {
	copy int
	err  error
}

func (e *tapeDamage) Error() string { return e.err.Error() }
func (e *tapeDamage) Unwrap() error { return e.err }

// release ends a recall's placement on dev: its load, and the held bytes
// (by now in the catalog, or never to be written).
func (c *Core) release(dev string, held int64) {
	c.mu.Lock()
	if c.load[dev]--; c.load[dev] <= 0 {
		delete(c.load, dev)
	}
	if c.held[dev] -= held; c.held[dev] <= 0 {
		delete(c.held, dev)
	}
	c.mu.Unlock()
}

// pinTime is a pin's end as the API reports it: nil if there is none or
// it has passed.
func pinTime(until int64, now time.Time) *time.Time {
	if until <= now.UnixNano() {
		return nil
	}
	t := time.Unix(0, until).UTC()
	return &t
}

// pin extends p's pin to d from now (a longer one is kept); stageOne
// has checked the caller may.
func (c *Core) pin(ctx context.Context, who *auth.Identity, p string, d time.Duration, st *api.StageStatus) error {
	_, in, err := c.statPath(ctx, who, p)
	if err != nil || in.Bitfile == 0 {
		return err // an empty file has nothing on disk to keep
	}
	until := c.now().Add(d).UnixNano()
	if st.PinnedUntil != nil && st.PinnedUntil.UnixNano() >= until {
		return nil
	}
	if err := c.store.Pin(ctx, in.Bitfile, until); err != nil {
		return fmt.Errorf("stage %s: pin: %w", p, err)
	}
	st.PinnedUntil = pinTime(until, c.now())
	return nil
}

// Release drops the pins of files' disk copies. It asks what staging
// does: the stage scope and read permission.
func (c *Core) Release(ctx context.Context, r api.ReleaseRequest) (struct{}, error) {
	who, err := caller(ctx)
	if err != nil {
		return struct{}{}, err
	}
	for _, p := range r.Paths {
		if err := scoped(who, auth.ScopeStage, p); err != nil {
			return struct{}{}, err
		}
		comps, in, err := c.statPath(ctx, who, p)
		if err != nil {
			return struct{}{}, fmt.Errorf("release: %w", err)
		}
		path := joinPath(comps)
		if err := may(who, in, path, path, auth.Read); err != nil {
			return struct{}{}, err
		}
		if in.Bitfile == 0 {
			continue
		}
		if err := c.store.Pin(ctx, in.Bitfile, 0); err != nil && !errors.Is(err, api.ErrNotFound) {
			return struct{}{}, fmt.Errorf("release %s: %w", path, err)
		}
	}
	return struct{}{}, nil
}
