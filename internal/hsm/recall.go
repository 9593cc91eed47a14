package hsm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
)

// Done is the channel closed when bitfile's recall ends, or nil if none
// is queued or running.
func (h *Engine) Done(bitfile int64) <-chan struct{} {
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

// Stage queues a recall of b (path names it in messages; pool is where it
// lands) at priority prio, recorded in the catalog so that it survives a
// restart.
func (h *Engine) Stage(ctx context.Context, b catalog.Bitfile, prio int, path, pool string) error {
	had, err := h.store.QueueRecall(ctx, catalog.Recall{Bitfile: b.ID, Queued: h.clk.Now().UnixNano(), Priority: prio})
	if err != nil {
		return err
	}
	if err := h.enqueue(b, h.clk.Now(), prio, path, pool); err != nil {
		if !had {
			h.store.DoneRecall(ctx, b.ID)
		}
		return err
	}
	return nil
}

// enqueue adds a recall of b to the scheduler (coalescing with one already
// queued), reading the first tape copy on a readable cartridge.
func (h *Engine) enqueue(b catalog.Bitfile, queued time.Time, prio int, path, pool string) error {
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
func (h *Engine) queueLocked(r *recall, b catalog.Bitfile, queued time.Time, prio int) error {
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
func (h *Engine) loadRecalls(ctx context.Context) error {
	rs, err := h.store.Recalls(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		b, err := h.store.Bitfile(ctx, r.Bitfile)
		if err != nil || b.OnDisk || b.State != catalog.Committed {
			h.store.DoneRecall(ctx, r.Bitfile)
			continue
		}
		if err := h.enqueue(b, time.Unix(0, r.Queued), r.Priority, fmt.Sprintf("<bitfile %d>", b.ID), h.c.PoolOf("")); err != nil {
			h.log.Warn("hsm: a queued recall cannot be served", "bitfile", b.ID, "err", err)
			h.store.DoneRecall(ctx, r.Bitfile)
		}
	}
	if len(rs) > 0 {
		h.log.Info("hsm: recalls resumed", "files", len(rs))
	}
	return nil
}

// Statuses fills in the recall state of sts[i] for each ids[i] != 0 (a
// file not on disk), walking the queue once for all of them: a bulk stage
// of many files costs one sort per cartridge queue, not one per file.
func (h *Engine) Statuses(sts []api.StageStatus, ids []int64) {
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
		if _, ok := h.mountRetry[r.volume]; ok && stuck[r.volume] == "" {
			stuck[r.volume] = fmt.Sprintf("the robot failed to mount cartridge %s (%d of %d rounds); the next round comes after a pause", r.volume, h.mountFails[r.volume], sched.MaxMountFailures)
		}
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

// schedDrivesLocked is the library's drives as the scheduler sees them.
// A migration stream's drive holds the cartridge the stream chose for it
// even before the mount shows it there: a recall must not mount it
// elsewhere meanwhile (the mount would fail, and its recalls wait for a
// retry). h.mu is held.
func (h *Engine) schedDrivesLocked(lds []tape.DriveInfo) []sched.Drive {
	chosen := map[string]string{}
	for v, d := range h.reserved {
		chosen[d] = v
	}
	var drives []sched.Drive
	for _, d := range lds {
		vol := d.Volume
		if v := chosen[d.ID]; v != "" && h.busy[d.ID] == "migrate" {
			vol = v
		}
		drives = append(drives, sched.Drive{ID: d.ID, Volume: vol, Busy: h.busy[d.ID] != "", Failed: h.driveOutLocked(d) != "", Idle: h.idle[d.ID]})
	}
	return drives
}

// recaller hands batches to drives as the scheduler decides.
func (h *Engine) recaller(ctx context.Context) {
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
		ds := h.sched.Next(h.clk.Now(), h.schedDrivesLocked(h.lib.Drives()), free)
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
func (h *Engine) emptyOutOfService(ctx context.Context, d tape.DriveInfo) {
	h.mu.Lock()
	if time.Since(h.emptied[d.ID]) < emptyRetry {
		h.mu.Unlock()
		return
	}
	h.emptied[d.ID] = time.Now()
	h.mu.Unlock()
	if err := h.lib.Dismount(ctx, d.ID); err != nil {
		h.log.Debug("hsm: cannot yet take the cartridge out of a drive out of service", "drive", d.ID, "volume", d.Volume, "err", err)
		return
	}
	h.log.Info("hsm: cartridge taken out of a drive out of service", "drive", d.ID, "volume", d.Volume)
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
func (h *Engine) bufferFree(ctx context.Context) int64 {
	pools := map[string]bool{}
	for _, k := range h.c.Classes() {
		if k.TapeCopies > 0 {
			pools[k.Pool] = true
		}
	}
	return h.c.PoolFree(ctx, pools)
}

// serve runs one decision: mount, then recall each file in order.
func (h *Engine) serve(ctx context.Context, d sched.Decision) {
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
		h.log.Info("hsm: mounting for recalls", "drive", d.Drive, "volume", d.Volume, "unmount", have, "files", len(d.Requests))
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
			// not for ever — after sched.MaxMountFailures the recalls
			// go to another copy, or fail saying why.
			h.mu.Lock()
			h.mountFails[d.Volume]++
			n := h.mountFails[d.Volume]
			hold, giveUp := sched.RetryMount(h.cfg.MountRetry, n)
			if giveUp {
				delete(h.mountFails, d.Volume)
				delete(h.mountRetry, d.Volume)
			} else {
				at := h.clk.Now().Add(hold)
				h.mountRetry[d.Volume] = at
				h.sched.Hold(d.Volume, at)
			}
			h.mu.Unlock()
			if giveUp {
				h.log.Error("hsm: cannot mount a cartridge; its recalls go to other copies or fail", "volume", d.Volume, "tries", n, "err", err)
				h.fallback(ctx, d.Requests, fmt.Errorf("cannot mount %s (%d tries): %w", d.Volume, n, err))
				return
			}
			h.log.Warn("hsm: mount failed; recalls wait for the next try", "drive", d.Drive, "volume", d.Volume, "tries", n, "err", err)
			retry = d.Requests
		}
		return
	}
	h.mu.Lock()
	delete(h.mountFails, d.Volume)
	delete(h.mountRetry, d.Volume)
	h.mu.Unlock()
	for i := 0; i < len(d.Requests); i++ {
		q := d.Requests[i]
		complete, err := h.recallOne(ctx, d.Drive, q)
		switch {
		case err == nil:
			if complete {
				h.finish(ctx, keyID(q.Key), nil)
			}
			d.Requests = h.merge(ctx, d, i)
		case ctx.Err() != nil:
			return // stopping: the requests stay in the catalog for the next run
		case errors.Is(err, tape.ErrDriveFailed):
			h.driveFailed(ctx, d.Drive, err)
			retry = d.Requests[i:]
			return
		case errors.Is(err, tape.ErrUnreadable), errors.Is(err, api.ErrCorrupt):
			var td *tapeDamage
			if errors.As(err, &td) {
				h.recallDamaged(ctx, keyID(q.Key), td.copy, td.volume, td.err)
			}
			h.fallback(ctx, d.Requests[i:], err)
			return
		default:
			h.finish(ctx, keyID(q.Key), err)
		}
	}
}

// merge takes into d's batch, after request i (just read), the recalls
// queued for its cartridge since that the drive reads on to without a
// locate (sched.Merge): a recall arriving for a cartridge being read for
// hours — a repack, a recopy, a large batch — is served on the drive's
// way instead of after the batch. It returns the batch to go on with.
func (h *Engine) merge(ctx context.Context, d sched.Decision, i int) []sched.Request {
	h.mu.Lock()
	queued := h.sched.Waiting(d.Volume) > 0
	h.mu.Unlock()
	if !queued {
		return d.Requests
	}
	free := h.bufferFree(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	rest, added := h.sched.Merge(d.Volume, d.Requests[i], d.Requests[i+1:], free)
	if len(added) == 0 {
		return d.Requests
	}
	for _, q := range added {
		if r := h.recalls[keyID(q.Key)]; r != nil {
			r.active = true
		}
	}
	h.log.Debug("hsm: recalls joined the batch being read", "drive", d.Drive, "volume", d.Volume, "files", len(added))
	return append(d.Requests[:i+1:i+1], rest...)
}

// fallback re-queues recalls on another copy, or fails them when none is
// left.
func (h *Engine) fallback(ctx context.Context, reqs []sched.Request, cause error) {
	for _, q := range reqs {
		id := keyID(q.Key)
		b, err := h.store.Bitfile(ctx, id)
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
			h.c.DeleteObject(ctx, sg.Device, sg.Object)
		}
		if err != nil {
			h.finish(ctx, id, fmt.Errorf("%s: %w", q.Volume, cause))
		}
	}
}

// finish ends a recall, successfully or not, and wakes its waiters.
func (h *Engine) finish(ctx context.Context, bitfile int64, err error) {
	h.store.DoneRecall(ctx, bitfile)
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
		h.c.DeleteObject(ctx, sg.Device, sg.Object)
	}
	if r != nil {
		if err != nil {
			h.log.Warn("hsm: recall failed", "path", r.path, "err", err)
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
func (h *Engine) recallOne(ctx context.Context, drive string, q sched.Request) (complete bool, err error) {
	id, cp, stripe := parseKey(q.Key)
	h.mu.Lock()
	r := h.recalls[id]
	current := r != nil && r.copy == cp
	pool := ""
	if r != nil {
		pool = r.pool
	}
	h.mu.Unlock()
	if pool == "" {
		pool = h.c.PoolOf("")
	}
	if !current {
		return false, nil // a request left from a copy given up on, or a finished recall
	}
	b, err := h.store.Bitfile(ctx, id)
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
	dest, done, err := h.c.RecallTarget(ctx, b, stripe, pool, tc.Length)
	if err != nil {
		return false, err
	}
	defer done()
	dev, obj := dest.Device, dest.Object
	st, err := h.jobs.Read(ctx, tapeserver.ReadJob{Drive: drive, Seq: tc.Seq, Offset: tc.Offset, Length: tc.Length, ReadThrough: q.ReadThrough, Dest: dest})
	if err != nil {
		return false, err
	}
	if !h.c.CheckReceipt(st.Receipt, dev, obj, st.Length, st.CRC32C) {
		return false, api.Errorf(api.ErrDenied, "mover for %s: bad receipt for %s", dev, obj)
	}
	if st.Length != tc.Length || st.CRC32C != tc.CRC32C {
		h.c.DeleteObject(ctx, dev, obj)
		return false, &tapeDamage{copy: cp, volume: tc.Volume, err: api.Errorf(api.ErrCorrupt, "%s tape file %d: %d bytes crc32c %08x read, catalog has %d bytes %08x", tc.Volume, tc.Seq, st.Length, st.CRC32C, tc.Length, tc.CRC32C)}
	}
	h.mu.Lock()
	if r.copy != cp { // given up on meanwhile
		h.mu.Unlock()
		h.c.DeleteObject(ctx, dev, obj)
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
	h.c.DiskChanged() // what is on disk changes
	if err := h.store.RestoreDiskCopy(ctx, b.ID, len(segs), b.StripeUnit, segs); err != nil {
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
	copy   int
	volume string // the cartridge of the tape file read
	err    error
}

func (e *tapeDamage) Error() string { return e.err.Error() }
func (e *tapeDamage) Unwrap() error { return e.err }
