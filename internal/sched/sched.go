// Package sched decides which tape to mount in which drive and in what order
// to read from it. It is a pure function of its queue, the drives' state
// and the time it is given: no I/O, no clock of its own, no map iteration on
// a decision path, so the same requests always give the same decisions —
// which is what lets `strata sim` run this very code in virtual time.
//
// The rules follow CERN CTA's scheduler (Scheduler.cpp's mount criteria,
// gitlab.cern.ch/cta/CTA): a
// mount is worth its minutes only when enough is queued for a cartridge —
// bytes, files, or a request old enough — or a request has priority; a
// mounted cartridge serves everything queued for it before it is let go;
// requests for the same file are served once; within a mount, reads go in
// tape position order; recalls never take more drives than their quota, nor
// more disk buffer than is free.
//
// "Position order" is physical when the scheduler knows the tape's
// geometry (Scheduler.Tape): LTO tape is serpentine, so byte order jumps
// back and forth along the tape between neighbours; the scheduler instead
// reads a batch in one sweep out along the forward wraps and one back along
// the reverse wraps, as a drive's recommended access order does, unless
// byte order positions less by the tape model (a dense batch: a whole
// cartridge read for a repack or a recopy streams wrap by wrap in byte
// order). strata sim measured both differences (docs/SIMULATION.md).
// Within a batch, a gap between two requests that streams in less time than a
// locate takes is read through (Request.ReadThrough), as drives do over
// short distances: a locate costs seconds however short it is. A running
// batch takes the requests that arrive for its cartridge when the drive
// reads on to them (Merge), as a CTA tape session goes on taking its
// tape's jobs.
package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/strata-storage/strata/internal/tape"
)

// Request is one recall: a file (or a member of an aggregate) at a position
// on a cartridge.
type Request struct {
	ID       int64
	Key      string // requests with the same key are served by one read
	Volume   string
	Seq      int   // tape file
	Offset   int64 // position: bytes from the beginning of the tape
	Size     int64
	Priority int // higher first; > 0 also mounts at once
	Queued   time.Time
	// ReadThrough is the scheduler's answer, on a request of a Decision:
	// reach it by reading on from the end of the one before rather than
	// by locating, because the gap streams in less time than a locate
	// takes (Scheduler.Tape set; never on a batch's first request).
	ReadThrough bool
}

// Rules decide when a cartridge is worth a mount.
type Rules struct {
	MinBytes int64         // queued bytes that justify a mount
	MinFiles int           // queued files that justify a mount
	MaxAge   time.Duration // a request this old is served regardless
	// Drives is the most drives recalls may hold at once (0: all).
	Drives int
	// Linger is how long a drive that has served its cartridge's queue
	// keeps the cartridge for the requests that follow before it may be
	// given another: a program reading a tree asks for the next file
	// only when it has the last, so its requests reach a cartridge one
	// at a time, and each would otherwise cost a dismount and a mount.
	Linger time.Duration
	// LocateEveryFile turns reading through gaps off: the drive locates
	// before every request of a batch (recall_gaps = "locate"), for
	// drives whose locates are quicker than their model says.
	LocateEveryFile bool
}

// ParseGaps reads the recall_gaps setting: "read" (the default, also "")
// reads through a gap when that is quicker than locating; "locate" always
// locates. It returns Rules.LocateEveryFile.
func ParseGaps(s string) (locate bool, err error) {
	switch s {
	case "", "read":
		return false, nil
	case "locate":
		return true, nil
	}
	return false, fmt.Errorf("recall_gaps %q: want \"read\" or \"locate\"", s)
}

// DefaultRules are sensible for LTO-class drives: a mount and dismount
// cost about two minutes, which is 48 GB of streaming at 400 MB/s.
var DefaultRules = Rules{MinBytes: 8 << 30, MinFiles: 500, MaxAge: 5 * time.Minute}

// Drive is a drive's state as the scheduler needs it.
type Drive struct {
	ID     string
	Volume string // mounted cartridge, "" if empty
	Busy   bool   // serving a batch (or writing for migration)
	Failed bool
	// Idle is when the drive finished its last recall batch (zero: not
	// recently).
	Idle time.Time
}

// Decision tells one drive to serve one cartridge's batch, in order.
type Decision struct {
	Drive  string
	Volume string
	// Mount is set when the cartridge must be mounted first (after
	// dismounting Unmount, if set).
	Mount    bool
	Unmount  string
	Requests []Request
}

// Geometry is what the scheduler needs to know of the tape to order reads
// physically: the generation's layout and the cartridges' capacity.
type Geometry struct {
	Gen      tape.Generation
	Capacity int64 // per cartridge; 0: the generation's
}

// Scheduler holds the recall queue.
type Scheduler struct {
	Rules Rules
	// Tape, when set, orders each batch by physical position (a sweep
	// out and back); otherwise by byte offset.
	Tape *Geometry
	vols map[string]*queue // by volume
	keys map[string]*Request
	n    int
	// active are volumes being served (by drive), so a volume is never
	// mounted twice.
	active map[string]string
	// held are volumes not to be mounted before a time (Hold).
	held map[string]time.Time
	// byOffset are the active volumes whose batch reads in byte order
	// (the others sweep); Merge keeps a running batch's order.
	byOffset map[string]bool
}

type queue struct {
	reqs   []*Request
	bytes  int64
	oldest time.Time
	prio   int
}

// New returns an empty scheduler.
func New(r Rules) *Scheduler {
	return &Scheduler{Rules: r, vols: map[string]*queue{}, keys: map[string]*Request{}, active: map[string]string{}, held: map[string]time.Time{}, byOffset: map[string]bool{}}
}

// Hold keeps volume from being mounted before until (its requests stay
// queued; a drive that already holds it still serves them): the robot
// failed to mount it, and trying again at once would fail the same way.
func (s *Scheduler) Hold(volume string, until time.Time) {
	s.held[volume] = until
}

// heldAt reports whether volume may not be mounted at now, forgetting a
// hold that has passed.
func (s *Scheduler) heldAt(volume string, now time.Time) bool {
	until, ok := s.held[volume]
	if ok && !now.Before(until) {
		delete(s.held, volume)
		return false
	}
	return ok
}

// Add queues r. A request for a key already queued is coalesced: the queued
// one is returned (its priority raised if r's is higher) and true.
func (s *Scheduler) Add(r Request) (Request, bool) {
	if q, ok := s.keys[r.Key]; ok && r.Key != "" {
		if r.Priority > q.Priority {
			q.Priority = r.Priority
			s.vols[q.Volume].prio = max(s.vols[q.Volume].prio, r.Priority)
		}
		return *q, true
	}
	q := s.vols[r.Volume]
	if q == nil {
		q = &queue{oldest: r.Queued}
		s.vols[r.Volume] = q
	}
	p := &r
	q.reqs = append(q.reqs, p)
	q.bytes += r.Size
	if r.Queued.Before(q.oldest) {
		q.oldest = r.Queued
	}
	q.prio = max(q.prio, r.Priority)
	if r.Key != "" {
		s.keys[r.Key] = p
	}
	s.n++
	return r, false
}

// Len is the number of queued requests.
func (s *Scheduler) Len() int { return s.n }

// Waiting is how many requests are queued for volume.
func (s *Scheduler) Waiting(volume string) int {
	if q := s.vols[volume]; q != nil {
		return len(q.reqs)
	}
	return 0
}

// Queued returns the queued requests of volume in position order.
func (s *Scheduler) Queued(volume string) []Request {
	q := s.vols[volume]
	if q == nil {
		return nil
	}
	out := make([]Request, len(q.reqs))
	for i, r := range q.reqs {
		out[i] = *r
	}
	s.sortByPosition(out)
	return out
}

// VolumeSummary is a cartridge's queue as reported to users.
type VolumeSummary struct {
	Volume   string
	Files    int
	Bytes    int64
	Oldest   time.Time
	Priority int
	Drive    string // being served by
}

// Summary lists every volume with queued requests, in the order the
// scheduler would mount them.
func (s *Scheduler) Summary(now time.Time) []VolumeSummary {
	var out []VolumeSummary
	for _, v := range s.ordered(now, false) {
		q := v.q
		out = append(out, VolumeSummary{Volume: v.name, Files: len(q.reqs), Bytes: q.bytes, Oldest: q.oldest, Priority: q.prio, Drive: s.active[v.name]})
	}
	return out
}

// AgeDue is when the next cartridge not being served becomes worth a
// mount by its oldest request's age (Rules.MaxAge), after now; false when
// none will. A caller with no clock of its own to poll by (strata sim)
// asks the scheduler again then.
func (s *Scheduler) AgeDue(now time.Time) (time.Time, bool) {
	var at time.Time
	if s.Rules.MaxAge <= 0 {
		return at, false
	}
	for v, q := range s.vols {
		if len(q.reqs) == 0 || s.active[v] != "" {
			continue
		}
		if t := q.oldest.Add(s.Rules.MaxAge); t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at, !at.IsZero()
}

func (s *Scheduler) worth(q *queue, now time.Time) bool {
	r := s.Rules
	return q.prio > 0 ||
		(r.MinBytes > 0 && q.bytes >= r.MinBytes) ||
		(r.MinFiles > 0 && len(q.reqs) >= r.MinFiles) ||
		now.Sub(q.oldest) >= r.MaxAge
}

// order lists queued volumes by who goes first (ordered).
func (s *Scheduler) order(now time.Time, onlyWorth bool) []string {
	vs := s.ordered(now, onlyWorth)
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.name
	}
	return names
}

// namedQueue is a volume and its queue, as ordered sorts them.
type namedQueue struct {
	name string
	q    *queue
}

// ordered lists queued volumes by who goes first: priority, then the
// oldest request, then the most bytes, then the name (so ties are
// stable). With onlyWorth, volumes that do not yet justify a mount are
// left out.
func (s *Scheduler) ordered(now time.Time, onlyWorth bool) []namedQueue {
	var vs []namedQueue
	for v, q := range s.vols {
		if len(q.reqs) > 0 && (!onlyWorth || s.worth(q, now)) {
			vs = append(vs, namedQueue{v, q})
		}
	}
	slices.SortFunc(vs, func(a, b namedQueue) int {
		qa, qb := a.q, b.q
		if c := cmp.Compare(qb.prio, qa.prio); c != 0 {
			return c
		}
		if c := qa.oldest.Compare(qb.oldest); c != 0 {
			return c
		}
		if c := cmp.Compare(qb.bytes, qa.bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return vs
}

// Next assigns work to idle drives. bufferFree bounds the bytes of all
// batches handed out (the disk space recalls land in); a batch always
// holds at least one request. The returned batches are taken out of the
// queue; report them back with Done.
func (s *Scheduler) Next(now time.Time, drives []Drive, bufferFree int64) []Decision {
	var out []Decision
	busy := 0
	for _, d := range drives {
		if d.Busy && s.isRecalling(d.ID) {
			busy++
		}
	}
	limit := s.Rules.Drives
	if limit <= 0 {
		limit = len(drives)
	}
	idle := func(d Drive) bool { return !d.Busy && !d.Failed }
	used := map[string]bool{}
	take := func(d Drive, vol string, mount bool) {
		reqs := s.takeBatch(vol, &bufferFree)
		dec := Decision{Drive: d.ID, Volume: vol, Mount: mount, Requests: reqs}
		if mount && d.Volume != "" {
			dec.Unmount = d.Volume
		}
		s.active[vol] = d.ID
		used[d.ID] = true
		busy++
		out = append(out, dec)
	}
	// First, cartridges already mounted on idle drives: no mount to pay,
	// so no threshold to meet.
	for _, d := range drives {
		if busy >= limit || bufferFree <= 0 {
			return out
		}
		if idle(d) && d.Volume != "" && s.queued(d.Volume) && s.active[d.Volume] == "" {
			take(d, d.Volume, false)
		}
	}
	// Then new mounts, best volume first, on empty drives before drives
	// holding a cartridge nobody is waiting for — if a drive could take
	// one (ordering the queue is the cost of a decision).
	if !slices.ContainsFunc(drives, func(d Drive) bool { return idle(d) && !used[d.ID] && !s.lingering(d, now) }) {
		return out
	}
	for _, vol := range s.order(now, true) {
		if busy >= limit || bufferFree <= 0 {
			break
		}
		if s.active[vol] != "" || mountedOn(drives, vol) || s.heldAt(vol, now) {
			continue
		}
		d, ok := pickDrive(drives, used, func(d Drive) bool { return idle(d) && !s.lingering(d, now) }, s)
		if !ok {
			break
		}
		take(d, vol, true)
	}
	return out
}

// lingering reports whether d still keeps its cartridge for requests that
// may follow its last batch.
func (s *Scheduler) lingering(d Drive, now time.Time) bool {
	return d.Volume != "" && !d.Idle.IsZero() && now.Sub(d.Idle) < s.Rules.Linger
}

func mountedOn(drives []Drive, vol string) bool {
	for _, d := range drives {
		if d.Volume == vol {
			return true
		}
	}
	return false
}

func pickDrive(drives []Drive, used map[string]bool, idle func(Drive) bool, s *Scheduler) (Drive, bool) {
	for _, empty := range []bool{true, false} {
		for _, d := range drives {
			if used[d.ID] || !idle(d) || (d.Volume == "") != empty {
				continue
			}
			if !empty && s.queued(d.Volume) {
				continue // its own queue comes first
			}
			return d, true
		}
	}
	return Drive{}, false
}

// Serving is the drive a batch of volume's recalls was handed to (and is
// not yet Done), or "": a writer must not pick that cartridge, which the
// drive may still be mounting.
func (s *Scheduler) Serving(volume string) string { return s.active[volume] }

func (s *Scheduler) isRecalling(drive string) bool {
	for _, d := range s.active {
		if d == drive {
			return true
		}
	}
	return false
}

func (s *Scheduler) queued(vol string) bool {
	q := s.vols[vol]
	return q != nil && len(q.reqs) > 0
}

// takeBatch removes vol's requests in position order, up to the buffer's
// free space (at least one), and remembers the order for Merge.
func (s *Scheduler) takeBatch(vol string, free *int64) []Request {
	batch := s.take(vol, nil, free, true, func(rs []Request) { s.byOffset[vol] = s.sortByPosition(rs) })
	s.planGaps(batch)
	return batch
}

// Merge takes into a running batch of volume the requests queued for it
// since the batch began that its drive can read on the way: those the
// batch's order puts after cur, the request being read — further along
// the sweep, or ahead in byte order. rest is what the batch has left after
// cur, in order; Merge returns it with the requests taken put in their
// places and its gaps planned again from cur, and the requests taken, as
// far as bufferFree holds them. The rest stay queued for the next batch,
// as do all of them when the batch is not running: CTA's tape sessions go
// on taking the queue's jobs for their mount the same way, so a recall
// arriving for a cartridge being read — during a recopy or a repack, for
// hours — waits for its part of the tape, not for the end.
func (s *Scheduler) Merge(volume string, cur Request, rest []Request, bufferFree int64) (merged, added []Request) {
	if !s.queued(volume) || s.active[volume] == "" {
		return rest, nil
	}
	if s.Tape == nil || s.Rules.LocateEveryFile {
		return rest, nil // every request located to: none is on the way
	}
	order := s.orderOf(volume)
	// on the way: after cur, and read through to from the request the
	// batch reads before it — no locate added, so a batch that takes
	// arrivals holds its drive no longer than the reading takes
	onWay := func(r Request) bool {
		if order(cur, r) >= 0 {
			return false
		}
		prev := cur
		if i, _ := slices.BinarySearchFunc(rest, r, order); i > 0 {
			prev = rest[i-1]
		}
		reach, _ := s.Tape.Gen.Reach(prev.Offset+prev.Size, r.Offset, s.Tape.Capacity)
		return reach
	}
	added = s.take(volume, onWay, &bufferFree, false, func(rs []Request) { slices.SortFunc(rs, order) })
	if len(added) == 0 {
		return rest, nil
	}
	merged = make([]Request, 0, 1+len(rest)+len(added))
	merged = append(append(append(merged, cur), rest...), added...)
	slices.SortStableFunc(merged[1:], order)
	s.planGaps(merged)
	return merged[1:], added
}

// take removes vol's queued requests that pick accepts (all, when nil),
// ordered by order, up to *free bytes (at least one with atLeastOne), and
// returns them; the others stay queued.
func (s *Scheduler) take(vol string, pick func(Request) bool, free *int64, atLeastOne bool, order func([]Request)) []Request {
	q := s.vols[vol]
	var cand, keep []Request
	if pick == nil {
		cand = make([]Request, 0, len(q.reqs))
	}
	for _, r := range q.reqs {
		if pick == nil || pick(*r) {
			cand = append(cand, *r)
		} else {
			keep = append(keep, *r)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	order(cand)
	n := 0
	for n < len(cand) && (n == 0 && atLeastOne || *free >= cand[n].Size) {
		*free -= cand[n].Size
		n++
	}
	batch := cand[:n]
	keep = append(keep, cand[n:]...)
	q.reqs = q.reqs[:0]
	q.bytes = 0
	q.prio = 0
	q.oldest = time.Time{}
	for i := range keep {
		r := keep[i]
		q.reqs = append(q.reqs, &r)
		q.bytes += r.Size
		q.prio = max(q.prio, r.Priority)
		if q.oldest.IsZero() || r.Queued.Before(q.oldest) {
			q.oldest = r.Queued
		}
		if r.Key != "" {
			s.keys[r.Key] = q.reqs[len(q.reqs)-1]
		}
	}
	for _, r := range batch {
		delete(s.keys, r.Key)
	}
	s.n -= len(batch)
	if len(q.reqs) == 0 {
		delete(s.vols, vol)
	}
	return batch
}

// MaxMountFailures is how many rounds of mount attempts (each a few tries
// of the robot) a cartridge gets before its recalls give up on it; the
// rounds are a base pause, 2×, 4× … apart (at most MaxMountHold), so a
// robot that stops for a while (a door opened, an inventory) does not
// fail recalls a copy elsewhere could not serve either.
const (
	MaxMountFailures = 5
	MaxMountHold     = 5 * time.Minute
)

// RetryMount is what follows the n-th failed round in a row of mounting
// a cartridge: hold it for the returned pause (base doubled each round,
// at most MaxMountHold) and try again, or, once n reaches
// MaxMountFailures, give up on it (giveUp): its recalls go to another
// copy or fail. strata serve's recaller and strata sim both follow it.
func RetryMount(base time.Duration, n int) (hold time.Duration, giveUp bool) {
	if n >= MaxMountFailures {
		return 0, true
	}
	return min(base<<(max(n, 1)-1), MaxMountHold), false
}

// Done reports that drive has finished its batch on volume. Requests that
// failed and should be tried again (another drive, later) are re-queued.
func (s *Scheduler) Done(volume string, retry []Request) {
	delete(s.active, volume)
	delete(s.byOffset, volume)
	for _, r := range retry {
		s.Add(r)
	}
}

// Remove drops every queued request of volume and returns them (the
// cartridge is unreadable: they must be served from another copy or fail).
func (s *Scheduler) Remove(volume string) []Request {
	q := s.vols[volume]
	if q == nil {
		return nil
	}
	var out []Request
	for _, r := range q.reqs {
		out = append(out, *r)
		delete(s.keys, r.Key)
	}
	s.n -= len(out)
	delete(s.vols, volume)
	return out
}

// planGaps decides, for each request of a batch after the first, whether
// the drive reads on through the gap from the one before or locates: a
// drive's recommended access order reads through short gaps, since a
// locate costs seconds however short it is. Without a geometry, or with
// Rules.LocateEveryFile, every request is located to.
func (s *Scheduler) planGaps(batch []Request) {
	for i := range batch {
		batch[i].ReadThrough = false
		if i == 0 || s.Tape == nil || s.Rules.LocateEveryFile {
			continue
		}
		prev := batch[i-1]
		batch[i].ReadThrough, _ = s.Tape.Gen.Reach(prev.Offset+prev.Size, batch[i].Offset, s.Tape.Capacity)
	}
}

// sortByPosition orders requests as a drive should read them: by byte
// offset, or with a geometry in one sweep — forward wraps by rising
// longitudinal position, then reverse wraps by falling position — so the
// head crosses the tape about twice per batch instead of a third of its
// length per file; unless byte order costs less. It does when the batch
// is dense (a whole cartridge's files, as a repack or a recopy reads
// them): byte order streams the serpentine tape wrap by wrap, where the
// sweep would locate between every two files.
func (s *Scheduler) sortByPosition(rs []Request) (byOffset bool) {
	if s.Tape == nil {
		slices.SortFunc(rs, compareOffsets)
		return true
	}
	s.sweep(rs)
	off := slices.Clone(rs)
	slices.SortFunc(off, compareOffsets)
	if s.orderCost(off) < s.orderCost(rs) {
		copy(rs, off)
		return true
	}
	return false
}

// compareOffsets orders requests by byte offset.
func compareOffsets(a, b Request) int {
	if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// orderOf is the order volume's running batch reads in.
func (s *Scheduler) orderOf(volume string) func(a, b Request) int {
	if s.Tape == nil || s.byOffset[volume] {
		return compareOffsets
	}
	return s.compareSweep
}

// orderCost is the positioning time of reading rs in order from the
// beginning of the tape: each request reached the quicker way, reading on
// through the gap or locating (Generation.Reach).
func (s *Scheduler) orderCost(rs []Request) time.Duration {
	var t time.Duration
	at := int64(0)
	for _, r := range rs {
		_, d := s.Tape.Gen.Reach(at, r.Offset, s.Tape.Capacity)
		t += d
		at = r.Offset + r.Size
	}
	return t
}

// sweep orders rs in one sweep of the tape: forward wraps by rising
// longitudinal position, then reverse wraps by falling position.
// Each request's place is worked out once.
func (s *Scheduler) sweep(rs []Request) {
	// small keys sorted, the requests moved once
	type keyed struct {
		back    bool
		lpos    float64
		off, id int64
		i       int
	}
	ks := make([]keyed, len(rs))
	for i, r := range rs {
		back, l := s.sweepKey(r)
		ks[i] = keyed{back, l, r.Offset, r.ID, i}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return compareSwept(a.back, a.lpos, a.off, a.id, b.back, b.lpos, b.off, b.id) })
	sorted := make([]Request, len(rs))
	for i, k := range ks {
		sorted[i] = rs[k.i]
	}
	copy(rs, sorted)
}

// compareSweep orders two requests along the sweep.
func (s *Scheduler) compareSweep(a, b Request) int {
	ab, al := s.sweepKey(a)
	bb, bl := s.sweepKey(b)
	return compareSwept(ab, al, a.Offset, a.ID, bb, bl, b.Offset, b.ID)
}

// compareSwept orders two requests by their places in the sweep, then by
// offset and ID.
func compareSwept(ab bool, al float64, ao, aid int64, bb bool, bl float64, bo, bid int64) int {
	if ab != bb {
		if ab {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(al, bl); c != 0 {
		return c
	}
	if c := cmp.Compare(ao, bo); c != 0 {
		return c
	}
	return cmp.Compare(aid, bid)
}

// sweepKey is a request's place in the sweep: on a reverse wrap (the
// return), and how far along the sweep's direction.
func (s *Scheduler) sweepKey(r Request) (back bool, lpos float64) {
	p := s.Tape.Gen.PositionIn(r.Offset, s.Tape.Capacity)
	back = p.Wrap%2 == 1
	if back {
		return true, -p.LPos
	}
	return false, p.LPos
}

// MaxAggregateFiles bounds the files in one tape file (its header lists
// them all).
const MaxAggregateFiles = 10000

// DefaultFlushBytes is how much a migration stream writes between
// synchronising file marks: a flush costs seconds, so it is paid per tens
// of gigabytes, not per tape file, as CTA does.
const DefaultFlushBytes = 16 << 30

// FirstAggregateFiles bounds the files in a pass's first tape file: one
// page of the catalog's candidates. The drive starts on it while the
// catalog lists the rest, instead of waiting for MaxAggregateFiles of
// them (16,384 files of 64 KiB waited 0.15–0.19 s of their 2.4 s).
const FirstAggregateFiles = 1000

// Aggregate groups files, in the order given, into tape files of about
// target bytes: a tape file is closed when the next file would take it
// past target or past MaxAggregateFiles, or the first one past
// FirstAggregateFiles (a file larger than target is a tape file of its
// own). It returns the index of the first file of each group. Migration
// (and the simulator's model of it) both use it.
func Aggregate(sizes []int64, target int64) []int {
	var starts []int
	a := Aggregator{Target: target}
	for i, s := range sizes {
		if a.Add(s) {
			starts = append(starts, i)
		}
	}
	return starts
}

// Aggregator is Aggregate one file at a time, for files handed on as they
// are found.
type Aggregator struct {
	Target int64
	bytes  int64
	n      int
	closed int // tape files closed so far
}

// Add reports whether a file of size s starts a new tape file.
func (a *Aggregator) Add(s int64) bool {
	most := MaxAggregateFiles
	if a.closed == 0 {
		most = FirstAggregateFiles
	}
	if a.n > 0 && (a.bytes+s > a.Target || a.n >= most) {
		a.bytes, a.n = 0, 0
		a.closed++
	}
	start := a.n == 0
	a.bytes += s
	a.n++
	return start
}
