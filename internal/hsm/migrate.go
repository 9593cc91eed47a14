package hsm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// Migrate copies to tape now the files named by paths (those with fewer
// copies than their class wants, or none, get one more), or with paths
// nil every file of a tape class that lacks copies, whatever its age.
func (h *Engine) Migrate(ctx context.Context, paths []string) (api.HSMResult, error) {
	return h.migrate(ctx, paths, 0)
}

// class finds a class of service by name.
func (h *Engine) class(name string) (catalog.COS, bool) {
	for _, k := range h.c.Classes() {
		if k.Name == name {
			return k, true
		}
	}
	return catalog.COS{}, false
}

// copiesWanted is how many tape copies a file of class cos should have.
func (h *Engine) copiesWanted(cos string, explicit bool) int {
	if k, ok := h.class(cos); ok && k.TapeCopies > 0 {
		return k.TapeCopies
	}
	if explicit {
		return 1 // a file named on the command line gets one copy
	}
	return 0
}

// migrate copies to tape the files named by paths, or every file of a
// tape class of service unmodified for age. Each pass writes one more copy
// of each file that needs it, filling tape files of cfg.Aggregate bytes on
// up to MigrateDrives drives at once; passes repeat while files still lack
// copies and progress is made. A migration asked for (age 0: named files,
// or all that are there) stops after a pass that left none of what it
// found lacking a copy, not cut at maxPass; files written meanwhile are
// the policy's, whose passes (age > 0) repeat while files are due, as
// strata sim models them.
func (h *Engine) migrate(ctx context.Context, paths []string, age time.Duration) (api.HSMResult, error) {
	h.migrateMu.Lock()
	defer h.migrateMu.Unlock()
	var total api.HSMResult
	for pass := 0; ; pass++ {
		// Files of one stripe go to the drives as the catalog's pages
		// come (the first tape file is written while the next page is
		// read); striped files, each written over several drives, after.
		var striped []catalog.Candidate
		found := 0
		more := false // a file found wants more copies than this pass writes
		var listErr error
		whole := func(yield func(catalog.Candidate) bool) {
			listErr = h.candidates(ctx, paths, age, func(cd catalog.Candidate) bool {
				found++
				more = more || len(cd.Bitfile.Tapes)+1 < h.copiesWanted(cd.Inode.COS, paths != nil)
				if h.stripes(cd.Bitfile) > 1 {
					striped = append(striped, cd)
					return true
				}
				return yield(cd)
			})
		}
		res, err := h.migratePass(ctx, whole)
		if listErr != nil {
			return total, errors.Join(listErr, err)
		}
		if found == 0 {
			return total, err
		}
		for _, cd := range striped {
			if err != nil {
				break
			}
			var r api.HSMResult
			r, err = h.writeStriped(ctx, cd)
			res.Add(r)
			if errors.Is(err, api.ErrCorrupt) {
				if p, perr := h.store.Path(ctx, cd.Inode.ID); perr == nil {
					if what := h.c.VerifyDiskCopy(ctx, cd, p); what != "" {
						res.Damaged = append(res.Damaged, what)
						err = nil // dealt with; the other files go on
					}
				}
			}
		}
		total.Add(res)
		if err != nil && errors.Is(err, tapeserver.ErrLost) && pass < 8 && ctx.Err() == nil {
			// Nothing it wrote since its last flush is recorded: those
			// files are candidates again, for the drives still in service.
			h.log.Warn("hsm: a tape server was lost mid-migration; its files are written again on another drive", "err", err)
			continue
		}
		if err != nil {
			return total, err
		}
		// A migration asked for has no more to do after a pass that
		// wrote every file it found, each to its last copy, and was not
		// cut at maxPass (the pass that would confirm it cost 16,384
		// small files 20–90 ms of their 2.5 s).
		if res.Files == 0 || pass > 8 || (age == 0 && !more && res.Files == found && found < maxPass) {
			return total, nil
		}
	}
}

// maxPass bounds the candidates of one migration pass; the next pass
// takes those after.
const maxPass = 100000

// candidates hands emit the files that need another tape copy, until
// emit returns false. Files named by paths are all checked before the
// first is handed on (a bad name migrates nothing); the policy's are
// handed on a page at a time, in bitfile order within each group of
// classes (files written together stay together on tape; see batches).
func (h *Engine) candidates(ctx context.Context, paths []string, age time.Duration, emit func(catalog.Candidate) bool) error {
	if paths != nil {
		var out []catalog.Candidate
		for _, p := range paths {
			in, err := h.c.Stat(ctx, p)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			if in.Kind == catalog.KindDir {
				return api.Errorf(api.ErrIsDir, "migrate %s", p)
			}
			if in.Bitfile == 0 {
				continue // empty: nothing to copy
			}
			b, err := h.store.Bitfile(ctx, in.Bitfile)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", p, err)
			}
			if len(b.Tapes) < h.copiesWanted(in.COS, true) && b.OnDisk && h.c.Lost(b.ID) == "" {
				out = append(out, catalog.Candidate{Inode: in, Bitfile: b})
			}
		}
		for _, cd := range out {
			if !emit(cd) {
				break
			}
		}
		return nil
	}
	before := h.c.Now().Add(-age).UnixNano() // file times are wall-clock
	groups := h.tapeCOSByCopies()
	n := 0
	for _, copies := range slices.Sorted(maps.Keys(groups)) {
		var after int64
		for {
			page, err := h.store.MigrationCandidates(ctx, groups[copies], copies, before, after, 1000)
			if err != nil {
				return err
			}
			for _, cd := range page {
				after = cd.Bitfile.ID
				if len(cd.Bitfile.Tapes) >= h.copiesWanted(cd.Inode.COS, false) || h.c.Lost(cd.Bitfile.ID) != "" {
					continue
				}
				if n++; !emit(cd) {
					return nil
				}
			}
			if n >= maxPass {
				return nil
			}
			if len(page) < 1000 {
				break
			}
		}
	}
	return nil
}

// batch is one tape file's worth of files.
type batch struct {
	files []catalog.Candidate
	bytes int64
	// sources: the files' disk copies with their capabilities, made
	// at made while the drive writes the batch before (see
	// migratePass); nil when not made.
	sources []tapeserver.File
	made    time.Time
}

// sourcesFresh is how long a batch's sources made ahead are used: a batch
// that waited longer (a cartridge change, a busy library) has them made
// again, so no capability it carries is near its end and no mover it
// names has moved.
const sourcesFresh = time.Minute

// batches groups files into tape files of about cfg.Aggregate bytes, in
// the order given (bitfile order: files written together stay together),
// by sched.Aggregator — the rule strata sim models migration with — and
// hands each to send as soon as it is closed.
func (h *Engine) batches(cands iter.Seq[catalog.Candidate], send func(batch)) {
	agg := sched.Aggregator{Target: h.cfg.Aggregate}
	var b batch
	for cd := range cands {
		if agg.Add(cd.Bitfile.Size) && len(b.files) > 0 {
			send(b)
			b = batch{}
		}
		b.files = append(b.files, cd)
		b.bytes += cd.Bitfile.Size
	}
	if len(b.files) > 0 {
		send(b)
	}
}

// migratePass writes cands to tape on up to cfg.MigrateDrives drives at
// once, a tape file at a time as batches closes them.
func (h *Engine) migratePass(ctx context.Context, cands iter.Seq[catalog.Candidate]) (api.HSMResult, error) {
	work := make(chan batch)
	var mu sync.Mutex
	var res api.HSMResult
	var errs []error
	var wg sync.WaitGroup
	for i := 0; i < h.cfg.MigrateDrives; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &writer{h: h}
			add := func(r api.HSMResult, err error) {
				mu.Lock()
				res.Add(r)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
			for b := range work {
				add(w.write(ctx, b))
			}
			add(w.close(ctx))
		}()
	}
	h.batches(cands, func(b batch) {
		// The capabilities are made here, while the drive writes the
		// batch before, not by the writer once the drive waits for them
		// (25–50 ms for 10,000 files). A failure leaves them to the
		// writer, which reports it.
		if src, err := h.filesOf(ctx, b.files); err == nil {
			b.sources, b.made = src, h.c.Now()
		}
		select {
		case work <- b:
		case <-ctx.Done():
		}
	})
	close(work)
	wg.Wait()
	return res, errors.Join(errs...)
}

// writer is one migration stream: a drive it holds for a whole pass, the
// cartridge in it, and the tape files written since the last flush. Copies
// count only once flushed (a synchronising file mark costs seconds, so it
// is paid per FlushBytes, not per tape file, as CTA does).
type writer struct {
	h       *Engine
	drive   string
	volume  string
	pending []written
	bytes   int64 // pending data
	// failed is the cartridge a write in this drive failed on during the
	// pass: a second makes the drive the suspect.
	failed string
}

// written is a tape file closed but not yet flushed.
type written struct {
	b     batch
	hdr   *tape.Header
	crcs  []uint32
	tapes []uint32 // the entries' CRCs as the drive wrote them
	seq   int
	start int64
}

// write appends one tape file holding b's files, flushing first when the
// cartridge must change and after when enough is pending.
func (w *writer) write(ctx context.Context, b batch) (api.HSMResult, error) {
	h := w.h
	exclude := map[string]bool{} // a further copy goes to another cartridge
	for _, cd := range b.files {
		for _, t := range cd.Bitfile.Tapes {
			exclude[t.Volume] = true
		}
	}
	need := b.bytes + int64(len(b.files))*512 + 1<<20
	var res api.HSMResult
	if w.drive == "" {
		for {
			var ok bool
			var have string
			w.drive, have, ok = h.takeDrive("migrate", func(d, v string) bool { return h.writable(v, d, need, exclude) })
			if ok {
				w.volume = have
				break
			}
			if why := h.noUsableDrive(); why != "" {
				return res, api.Errorf(api.ErrUnavailable, "migrate: %s", why) // busy drives free up; these do not
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if w.volume == "" || !h.writable(w.volume, w.drive, need, exclude) {
		r, err := w.flush(ctx)
		res = r
		if err != nil {
			return res, err
		}
		vol, err := h.pickVolume(w.drive, w.volume, need, exclude)
		if err != nil {
			return res, err
		}
		if err := h.mountOn(ctx, w.drive, w.volume, vol); err != nil {
			if errors.Is(err, tape.ErrDriveFailed) {
				w.leaveDrive(ctx, err)
			}
			return res, fmt.Errorf("migrate: mount %s: %w", vol, err)
		}
		w.volume = vol
	}
	for len(b.files) > 0 {
		bad, damaged, err := w.append(ctx, b)
		if errors.Is(err, tape.ErrWriteFailed) {
			if w.failed != "" {
				// A second cartridge in this drive: the drive is the
				// likelier cause, and this cartridge keeps taking
				// writes. What it holds from this pass is flushed
				// (and counts if that works), and the stream's next
				// batch takes another drive.
				r, ferr := w.flush(ctx)
				res.Add(r)
				w.leaveDrive(ctx, fmt.Errorf("writes failed on %s and %s: %w", w.failed, w.volume, err))
				return res, errors.Join(err, ferr)
			}
			failed := w.volume
			w.failed = failed
			h.cartridgeWriteFailed(ctx, w.volume, w.drive, err)
			// What this stream wrote on it before is flushed and
			// counts; the batch is written again on another cartridge.
			r, ferr := w.flush(ctx)
			res.Add(r)
			if ferr != nil {
				return res, errors.Join(err, ferr)
			}
			vol, perr := h.pickVolume(w.drive, w.volume, need, exclude)
			if perr != nil {
				return res, errors.Join(err, perr)
			}
			if merr := h.mountOn(ctx, w.drive, w.volume, vol); merr != nil {
				if errors.Is(merr, tape.ErrDriveFailed) {
					w.leaveDrive(ctx, merr)
				}
				return res, errors.Join(err, fmt.Errorf("migrate: mount %s: %w", vol, merr))
			}
			h.log.Warn("hsm: migration goes on on another cartridge", "failed", failed, "volume", vol, "drive", w.drive)
			w.volume = vol
			continue
		}
		if err != nil {
			return res, err
		}
		if bad < 0 {
			if w.bytes >= h.cfg.FlushBytes {
				r, err := w.flush(ctx)
				res.Add(r)
				return res, err
			}
			return res, nil
		}
		// A file whose disk copy is damaged was dealt with (recalled
		// from tape to repair it, or found lost): the tape file is
		// written again without it, so the healthy files migrate.
		res.Damaged = append(res.Damaged, damaged)
		b.bytes -= b.files[bad].Bitfile.Size
		b.files = slices.Delete(slices.Clone(b.files), bad, bad+1)
		if b.sources != nil {
			b.sources = slices.Delete(slices.Clone(b.sources), bad, bad+1)
		}
	}
	return res, nil
}

// append writes b's files to one tape file. When a file's disk copy turns
// out damaged at rest, it abandons the tape file, acts on the damage
// (diskDamaged) and returns the file's index and what was done; otherwise
// -1.
func (w *writer) append(ctx context.Context, b batch) (int, string, error) {
	h := w.h
	hdr := &tape.Header{}
	var off int64
	dirs := map[int64]string{} // the files of a tape file share few directories: each is named once
	for _, cd := range b.files {
		in := cd.Inode
		hdr.Entries = append(hdr.Entries, tape.Entry{Path: h.pathIn(ctx, in, dirs), Bitfile: cd.Bitfile.ID, Offset: off, Size: cd.Bitfile.Size,
			Fixity: cd.Bitfile.Fixity, Mode: in.Mode, UID: in.UID, GID: in.GID, Mtime: in.Mtime, COS: in.COS})
		off += cd.Bitfile.Size
	}
	files, err := b.sources, error(nil)
	if files == nil || h.c.Now().Sub(b.made) > sourcesFresh {
		files, err = h.filesOf(ctx, b.files)
	}
	if err != nil {
		return -1, "", fmt.Errorf("migrate to %s: %w", w.volume, err)
	}
	r, err := h.jobs.Write(ctx, tapeserver.WriteJob{Drive: w.drive, Header: hdr, Files: files})
	if errors.Is(err, tape.ErrDriveFailed) {
		// Also when it failed while a file was being written: the
		// drive is what failed, not the file.
		vol := w.volume
		w.leaveDrive(ctx, err)
		return -1, "", fmt.Errorf("migrate to %s: %w", vol, err)
	}
	if fe := (*tapeserver.FileError)(nil); errors.As(err, &fe) {
		i := fe.Index
		if errors.Is(err, api.ErrCorrupt) && i >= 0 && i < len(b.files) {
			if what := h.c.VerifyDiskCopy(ctx, b.files[i], hdr.Entries[i].Path); what != "" {
				return i, what, nil
			}
		}
		if i >= 0 && i < len(hdr.Entries) {
			return -1, "", fmt.Errorf("migrate %s: %w", hdr.Entries[i].Path, fe.Err)
		}
	}
	if err != nil {
		return -1, "", fmt.Errorf("migrate to %s: %w", w.volume, err)
	}
	// What the drive's entry CRC must equal: for a file of one stripe,
	// the CRC32C the catalog holds for it; for a striped one, its CRC32C
	// in file order as the job read it.
	crcs := r.CRCs
	for i, f := range files {
		if f.Single() {
			crcs[i] = b.files[i].Bitfile.Segments[0].CRC32C
		}
	}
	w.pending = append(w.pending, written{b: b, hdr: hdr, crcs: crcs, tapes: r.EntryCRCs, seq: r.Seq, start: r.Start})
	w.bytes += b.bytes
	return -1, "", nil
}

// leaveDrive takes the stream's drive out of service for cause and gives
// it back, dropping the tape files it has not flushed (their files stay
// candidates, on disk): the stream's next tape file takes another drive.
func (w *writer) leaveDrive(ctx context.Context, cause error) {
	w.h.driveFailed(ctx, w.drive, cause)
	w.h.releaseDrive(w.drive)
	w.drive, w.volume, w.failed, w.pending, w.bytes = "", "", "", nil, 0
}

// flush forces the pending tape files to tape and records their copies.
func (w *writer) flush(ctx context.Context) (api.HSMResult, error) {
	var res api.HSMResult
	if len(w.pending) == 0 {
		return res, nil
	}
	h := w.h
	pending := w.pending
	w.pending, w.bytes = nil, 0
	if err := h.lib.Flush(ctx, w.drive); err != nil {
		return res, fmt.Errorf("migrate to %s: flush: %w", w.volume, err)
	}
	for _, p := range pending {
		n, err := w.record(ctx, p)
		if err != nil {
			return res, err
		}
		res.Files += n
		res.Bytes += p.b.bytes
		res.TapeFiles++
		h.log.Info("hsm: migrated", "files", n, "bytes", p.b.bytes, "volume", w.volume, "seq", p.seq, "drive", w.drive)
	}
	return res, nil
}

// dropParallel is how many disk copies of a tape-only class's files are
// dropped at once once their tape copies are recorded: enough that the
// catalog's writer commits them in a few groups.
const dropParallel = 256

// record adds the copies of one flushed tape file's files to the catalog
// (in one call: a tape file holds up to sched.MaxAggregateFiles) and
// returns how many it recorded; a copy whose CRC differs from the disk
// copy's is left out (and logged), and a file removed or replaced
// meanwhile is left to repack.
func (w *writer) record(ctx context.Context, p written) (int, error) {
	h := w.h
	copies := make([]catalog.NewTapeCopy, 0, len(p.b.files))
	of := make([]int, 0, len(p.b.files)) // the files' indexes in p.b
	for i, cd := range p.b.files {
		e := p.hdr.Entries[i]
		if p.tapes[i] != p.crcs[i] {
			h.log.Error("hsm: tape copy differs from the disk copy", "path", e.Path, "volume", w.volume, "seq", p.seq, "disk_crc", p.crcs[i], "tape_crc", p.tapes[i])
			continue
		}
		copies = append(copies, catalog.NewTapeCopy{Bitfile: cd.Bitfile.ID, Stripes: []catalog.TapeCopy{
			{Volume: w.volume, Seq: p.seq, Position: p.start, Offset: e.Offset, Length: e.Size, CRC32C: p.crcs[i]}}})
		of = append(of, i)
	}
	added, err := h.store.AddTapeCopies(ctx, copies)
	if err != nil {
		return 0, err
	}
	var (
		n     int
		g     errgroup.Group
		stale sync.Once
	)
	g.SetLimit(dropParallel)
	for k, i := range of {
		if !added[k] {
			continue
		}
		n++
		cd := p.b.files[i]
		if cls, ok := h.class(cd.Inode.COS); ok && cls.TapeOnly {
			stale.Do(h.c.DiskChanged) // what is on disk changes
			g.Go(func() error {
				if err := h.store.DropDiskCopy(ctx, cd.Bitfile.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
					h.log.Warn("hsm: tape-only file keeps its disk copy", "path", p.hdr.Entries[i].Path, "err", err)
				}
				return nil
			})
		}
	}
	g.Wait()
	return n, nil
}

// close flushes what is pending and lets the drive go (with its cartridge
// mounted: the next pass or a recall may want it).
func (w *writer) close(ctx context.Context) (api.HSMResult, error) {
	if w.drive == "" {
		return api.HSMResult{}, nil
	}
	defer w.h.releaseDrive(w.drive)
	return w.flush(ctx)
}

// writable reports whether a tape file of need bytes may go to volume from
// drive.
func (h *Engine) writable(volume, drive string, need int64, exclude map[string]bool) bool {
	carts := h.lib.Cartridges()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fitsLocked(carts, volume, drive, need, exclude)
}

// fitsLocked is writable over a snapshot of the cartridges; h.mu is held,
// so a caller can check and reserve in one step.
func (h *Engine) fitsLocked(carts []tape.CartridgeInfo, volume, drive string, need int64, exclude map[string]bool) bool {
	if other := h.reserved[volume]; h.draining[volume] || (other != "" && other != drive) {
		return false
	}
	if d := h.sched.Serving(volume); d != "" && d != drive {
		return false // a recall batch has it, maybe still mounting
	}
	for _, ci := range carts {
		if ci.Volume == volume {
			return h.volumeOutLocked(ci) == "" && h.readOnly[volume].why == "" && !exclude[volume] && (ci.Drive == "" || ci.Drive == drive) && ci.Capacity-ci.Used >= need
		}
	}
	return false
}

// pickVolume chooses the cartridge to write and reserves it for drive: the
// one already in the drive if it fits, else the fullest that fits (tapes
// are filled one by one, as CTA does, so fewer are mounted for writing).
// Choosing and reserving happen under one lock: two drives looking at the
// same moment must not both settle on the same cartridge.
func (h *Engine) pickVolume(drive, have string, need int64, exclude map[string]bool) (string, error) {
	carts := h.lib.Cartridges()
	sort.SliceStable(carts, func(i, j int) bool { return carts[i].Used > carts[j].Used })
	h.mu.Lock()
	defer h.mu.Unlock()
	pick := ""
	if have != "" && h.fitsLocked(carts, have, drive, need, exclude) {
		pick = have
	}
	for i := 0; pick == "" && i < len(carts); i++ {
		if h.fitsLocked(carts, carts[i].Volume, drive, need, exclude) {
			pick = carts[i].Volume
		}
	}
	if pick == "" {
		if len(h.readOnly) > 0 {
			return "", api.Errorf(api.ErrNoSpace, "migrate: no writable cartridge has %d bytes free (%d read-only after damage or a failed write: strata admin tapes)", need, len(h.readOnly))
		}
		return "", api.Errorf(api.ErrNoSpace, "migrate: no cartridge has %d bytes free", need)
	}
	h.reserved[pick] = drive
	return pick, nil
}

// stripes is how many drives a tape copy of b is written on at once: a
// large file striped on disk keeps its stripes on tape, the stripes of
// each drive in one tape file on its own cartridge, so it streams at the
// rate of several drives.
func (h *Engine) stripes(b catalog.Bitfile) int {
	if h.cfg.StripeMin <= 0 || b.Size < h.cfg.StripeMin || h.cfg.MigrateDrives < 2 {
		return 1
	}
	return len(b.Segments)
}

// lane is one drive writing some stripes of a striped copy.
type lane struct {
	drive, volume string
	stripes       []int
	err           error
}

// writeStriped writes one tape copy of cd with the stripes of its disk
// copy dealt round to up to MigrateDrives drives at once, each writing
// its stripes as one tape file on another cartridge; the copy is recorded
// only once every stripe is verified and flushed.
func (h *Engine) writeStriped(ctx context.Context, cd catalog.Candidate) (api.HSMResult, error) {
	b := cd.Bitfile
	segs := b.Segments
	exclude := map[string]bool{}
	for _, t := range b.Tapes {
		exclude[t.Volume] = true
	}
	lanes := make([]*lane, min(len(segs), h.cfg.MigrateDrives))
	defer func() {
		for _, l := range lanes {
			if l != nil && l.drive != "" {
				h.releaseDrive(l.drive)
			}
		}
	}()
	for i := range segs {
		k := i % len(lanes)
		if lanes[k] == nil {
			lanes[k] = &lane{}
		}
		lanes[k].stripes = append(lanes[k].stripes, i)
	}
	for _, l := range lanes {
		var need int64 = 1 << 20
		for _, i := range l.stripes {
			need += segs[i].Length + 4096
		}
		for l.drive == "" {
			drive, have, ok := h.takeDrive("migrate", func(d, v string) bool { return h.writable(v, d, need, exclude) })
			if ok {
				l.drive, l.volume = drive, have
				break
			}
			select {
			case <-ctx.Done():
				return api.HSMResult{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		vol, err := h.pickVolume(l.drive, l.volume, need, exclude)
		if err != nil {
			return api.HSMResult{}, err
		}
		if err := h.mountOn(ctx, l.drive, l.volume, vol); err != nil {
			return api.HSMResult{}, fmt.Errorf("migrate: mount %s: %w", vol, err)
		}
		l.volume = vol
		exclude[vol] = true // the next lane takes another cartridge
	}
	path := h.pathOf(ctx, cd.Inode)
	copyID := fmt.Sprintf("%d-%d", b.ID, time.Now().UnixNano())
	written := make([]catalog.TapeCopy, len(segs))
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tcs, err := h.writeLane(ctx, l, cd, path, copyID)
			if err != nil {
				l.err = err
				return
			}
			for j, i := range l.stripes {
				written[i] = tcs[j]
			}
			if err := h.lib.Flush(ctx, l.drive); err != nil {
				l.err = fmt.Errorf("migrate to %s: flush: %w", l.volume, err)
			}
		}()
	}
	wg.Wait()
	for _, l := range lanes {
		if l.err != nil {
			switch {
			case errors.Is(l.err, tape.ErrDriveFailed):
				h.driveFailed(ctx, l.drive, l.err)
			case errors.Is(l.err, tape.ErrWriteFailed):
				// The next pass writes the file on other cartridges.
				h.cartridgeWriteFailed(ctx, l.volume, l.drive, l.err)
			}
			return api.HSMResult{}, fmt.Errorf("migrate %s: %w", path, l.err)
		}
	}
	if err := h.store.AddTapeCopy(ctx, b.ID, written...); err != nil {
		if errors.Is(err, api.ErrNotFound) {
			return api.HSMResult{}, nil // removed meanwhile
		}
		return api.HSMResult{}, err
	}
	if k, ok := h.class(cd.Inode.COS); ok && k.TapeOnly {
		h.c.DiskChanged() // what is on disk changes
		if err := h.store.DropDiskCopy(ctx, b.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
			h.log.Warn("hsm: tape-only file keeps its disk copy", "path", path, "err", err)
		}
	}
	h.log.Info("hsm: migrated striped", "path", path, "stripes", len(segs), "drives", len(lanes), "bytes", b.Size)
	return api.HSMResult{Files: 1, Bytes: b.Size, TapeFiles: len(lanes)}, nil
}

// writeLane writes l's stripes of cd's disk copy as one tape file on l's
// drive, an entry a stripe (as aggregation writes small files: a file
// joined from thousands of parts costs one tape file a drive, not one a
// part), and checks each against the CRC32C the catalog has for it.
func (h *Engine) writeLane(ctx context.Context, l *lane, cd catalog.Candidate, path, copyID string) ([]catalog.TapeCopy, error) {
	in, b := cd.Inode, cd.Bitfile
	hdr := &tape.Header{}
	files := make([]tapeserver.File, len(l.stripes))
	var off int64
	for j, i := range l.stripes {
		seg := b.Segments[i]
		hdr.Entries = append(hdr.Entries, tape.Entry{Path: path, Bitfile: b.ID, Offset: off, Size: seg.Length, Fixity: b.Fixity,
			Mode: in.Mode, UID: in.UID, GID: in.GID, Mtime: in.Mtime, COS: in.COS,
			Stripe: i, Stripes: len(b.Segments), StripeUnit: b.StripeUnit, FileSize: b.Size, CopyID: copyID})
		src, err := h.source(ctx, seg, token.OpRead, seg.Length)
		if err != nil {
			return nil, err
		}
		files[j] = tapeserver.File{Size: seg.Length, StripeUnit: b.StripeUnit, Stripes: []tapeserver.Source{src}}
		off += seg.Length
	}
	r, err := h.jobs.Write(ctx, tapeserver.WriteJob{Drive: l.drive, Header: hdr, Files: files})
	if err != nil {
		return nil, err
	}
	out := make([]catalog.TapeCopy, len(l.stripes))
	for j, i := range l.stripes {
		seg := b.Segments[i]
		if got := r.EntryCRCs[j]; got != seg.CRC32C {
			return nil, api.Errorf(api.ErrCorrupt, "stripe %d: disk has crc32c %08x, tape wrote %08x", i, seg.CRC32C, got)
		}
		out[j] = catalog.TapeCopy{Stripe: i, Volume: l.volume, Seq: r.Seq, Position: r.Start, Offset: hdr.Entries[j].Offset, Length: seg.Length, CRC32C: seg.CRC32C}
	}
	return out, nil
}
