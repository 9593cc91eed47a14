package core

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/token"
	"github.com/strata-storage/strata/internal/wire"
)

// Migrate copies files to tape now (see api.MigrateRequest).
func (c *Core) Migrate(ctx context.Context, r api.MigrateRequest) (api.HSMResult, error) {
	if c.hsm == nil {
		return api.HSMResult{}, api.Errorf(api.ErrInvalid, "migrate: no tape library configured")
	}
	return c.hsm.migrate(ctx, r.Paths, 0)
}

// copiesWanted is how many tape copies a file of class cos should have.
func (c *Core) copiesWanted(cos string, explicit bool) int {
	if k, ok := c.cos[cos]; ok && k.TapeCopies > 0 {
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
// copies and progress is made.
func (h *hsm) migrate(ctx context.Context, paths []string, age time.Duration) (api.HSMResult, error) {
	h.migrateMu.Lock()
	defer h.migrateMu.Unlock()
	var total api.HSMResult
	for pass := 0; ; pass++ {
		cands, err := h.candidates(ctx, paths, age)
		if err != nil || len(cands) == 0 {
			return total, err
		}
		res, err := h.migratePass(ctx, cands)
		total.Files += res.Files
		total.Bytes += res.Bytes
		total.TapeFiles += res.TapeFiles
		if err != nil {
			return total, err
		}
		if res.Files == 0 || pass > 8 {
			return total, nil
		}
	}
}

// candidates returns the files that need another tape copy.
func (h *hsm) candidates(ctx context.Context, paths []string, age time.Duration) ([]catalog.Candidate, error) {
	c := h.c
	if paths != nil {
		var out []catalog.Candidate
		for _, p := range paths {
			_, in, err := c.statPath(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("migrate: %w", err)
			}
			if in.Kind == catalog.KindDir {
				return nil, api.Errorf(api.ErrIsDir, "migrate %s", p)
			}
			if in.Bitfile == 0 {
				continue // empty: nothing to copy
			}
			b, err := c.store.Bitfile(ctx, in.Bitfile)
			if err != nil {
				return nil, fmt.Errorf("migrate %s: %w", p, err)
			}
			if len(b.Tapes) < c.copiesWanted(in.COS, true) && b.OnDisk {
				out = append(out, catalog.Candidate{Inode: in, Bitfile: b})
			}
		}
		return out, nil
	}
	cos, most := c.tapeCOS()
	before := h.c.now().Add(-age).UnixNano() // file times are wall-clock
	var out []catalog.Candidate
	var after int64
	for {
		page, err := c.store.MigrationCandidates(ctx, cos, most, before, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, cd := range page {
			if len(cd.Bitfile.Tapes) < c.copiesWanted(cd.Inode.COS, false) {
				out = append(out, cd)
			}
			after = cd.Bitfile.ID
		}
		if len(page) < 1000 || len(out) >= 100000 {
			return out, nil
		}
	}
}

// batch is one tape file's worth of files.
type batch struct {
	files []catalog.Candidate
	bytes int64
}

// batches groups files into tape files of about cfg.Aggregate bytes, in
// the order given (bitfile order: files written together stay together).
func (h *hsm) batches(cands []catalog.Candidate) []batch {
	var out []batch
	var cur batch
	for _, cd := range cands {
		if len(cur.files) > 0 && (cur.bytes+cd.Bitfile.Size > h.cfg.Aggregate || len(cur.files) >= maxAggregateFiles) {
			out = append(out, cur)
			cur = batch{}
		}
		cur.files = append(cur.files, cd)
		cur.bytes += cd.Bitfile.Size
	}
	if len(cur.files) > 0 {
		out = append(out, cur)
	}
	return out
}

// maxAggregateFiles bounds a tape file's header.
const maxAggregateFiles = 10000

func (h *hsm) migratePass(ctx context.Context, cands []catalog.Candidate) (api.HSMResult, error) {
	work := make(chan batch)
	var mu sync.Mutex
	var res api.HSMResult
	var errs []error
	var wg sync.WaitGroup
	for i := 0; i < h.cfg.MigrateDrives; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				n, err := h.writeBatch(ctx, b)
				mu.Lock()
				res.Files += n
				if n > 0 {
					res.Bytes += b.bytes
					res.TapeFiles++
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, b := range h.batches(cands) {
		select {
		case work <- b:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return res, errors.Join(errs...)
}

// errNoDrive: every drive is busy or failed.
var errNoDrive = errors.New("no tape drive free")

// writeBatch writes one tape file holding b's files, verifies it, flushes
// it, and only then records the copies. It returns how many were recorded.
func (h *hsm) writeBatch(ctx context.Context, b batch) (int, error) {
	exclude := map[string]bool{} // a second copy goes to another cartridge
	for _, cd := range b.files {
		for _, t := range cd.Bitfile.Tapes {
			exclude[t.Volume] = true
		}
	}
	need := b.bytes + int64(len(b.files))*512 + 1<<20
	var drive, have string
	for {
		var ok bool
		drive, have, ok = h.takeDrive("migrate", func(d, v string) bool { return h.writable(v, d, need, exclude) })
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer h.releaseDrive(drive)
	vol, err := h.pickVolume(drive, have, need, exclude)
	if err != nil {
		return 0, err
	}
	if err := h.mountOn(ctx, drive, have, vol); err != nil {
		if errors.Is(err, tape.ErrDriveFailed) {
			h.driveFailed(ctx, drive, err)
		}
		return 0, fmt.Errorf("migrate: mount %s: %w", vol, err)
	}
	hdr := &tape.Header{}
	var off int64
	for _, cd := range b.files {
		in := cd.Inode
		hdr.Entries = append(hdr.Entries, tape.Entry{Path: h.pathOf(ctx, in), Bitfile: cd.Bitfile.ID, Offset: off, Size: cd.Bitfile.Size,
			SHA256: cd.Bitfile.Fixity, Mode: in.Mode, UID: in.UID, GID: in.GID, Mtime: in.Mtime, COS: in.COS})
		off += cd.Bitfile.Size
	}
	w, err := h.lib.Append(ctx, drive, hdr)
	if err != nil {
		if errors.Is(err, tape.ErrDriveFailed) {
			h.driveFailed(ctx, drive, err)
		}
		return 0, fmt.Errorf("migrate to %s: %w", vol, err)
	}
	crcs := make([]uint32, len(b.files))
	for i, cd := range b.files {
		cw := &crcWriter{w: w}
		if err := h.c.readDisk(ctx, cd.Bitfile, cw); err != nil {
			w.Abort()
			return 0, fmt.Errorf("migrate %s: %w", hdr.Entries[i].Path, err)
		}
		crcs[i] = cw.crc
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("migrate to %s: %w", vol, err)
	}
	if err := h.lib.Flush(ctx, drive); err != nil {
		return 0, fmt.Errorf("migrate to %s: flush: %w", vol, err)
	}
	written := w.EntryCRCs()
	n := 0
	for i, cd := range b.files {
		e := hdr.Entries[i]
		if written[i] != crcs[i] {
			h.c.log.Error("hsm: tape copy differs from the disk copy", "path", e.Path, "volume", vol, "seq", w.Seq(), "disk_crc", crcs[i], "tape_crc", written[i])
			continue
		}
		tc := catalog.TapeCopy{Volume: vol, Seq: w.Seq(), Position: w.Start(), Offset: e.Offset, Length: e.Size, CRC32C: crcs[i]}
		if err := h.c.store.AddTapeCopy(ctx, cd.Bitfile.ID, tc); err != nil {
			if errors.Is(err, api.ErrNotFound) {
				continue // removed or replaced meanwhile; repack reclaims the space
			}
			return n, err
		}
		n++
		if k, ok := h.c.cos[cd.Inode.COS]; ok && k.TapeOnly {
			if err := h.c.store.DropDiskCopy(ctx, cd.Bitfile.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
				h.c.log.Warn("hsm: tape-only file keeps its disk copy", "path", e.Path, "err", err)
			}
		}
	}
	h.c.log.Info("hsm: migrated", "files", n, "bytes", b.bytes, "volume", vol, "seq", w.Seq(), "drive", drive)
	return n, nil
}

// writable reports whether a tape file of need bytes may go to volume from
// drive.
func (h *hsm) writable(volume, drive string, need int64, exclude map[string]bool) bool {
	for _, ci := range h.lib.Cartridges() {
		if ci.Volume == volume {
			return !ci.Unreadable && !exclude[volume] && (ci.Drive == "" || ci.Drive == drive) && ci.Capacity-ci.Used >= need
		}
	}
	return false
}

// pickVolume chooses the cartridge to write: the one already in the drive
// if it fits, else the fullest that fits (tapes are filled one by one, as
// CTA does, so fewer are mounted for writing).
func (h *hsm) pickVolume(drive, have string, need int64, exclude map[string]bool) (string, error) {
	if have != "" && h.writable(have, drive, need, exclude) {
		return have, nil
	}
	var best *tape.CartridgeInfo
	carts := h.lib.Cartridges()
	sort.SliceStable(carts, func(i, j int) bool { return carts[i].Used > carts[j].Used })
	for i := range carts {
		ci := &carts[i]
		if h.writable(ci.Volume, drive, need, exclude) {
			best = ci
			break
		}
	}
	if best == nil {
		return "", api.Errorf(api.ErrNoSpace, "migrate: no cartridge has %d bytes free", need)
	}
	return best.Volume, nil
}

// crcWriter passes bytes on and computes their CRC32C.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, wire.Castagnoli, p[:n])
	return n, err
}

// readDisk writes b's disk copy to w in file order, stripe unit by stripe
// unit, every byte checked against the CRCs stored with it (the mover
// verifies each chunk, the connection each frame).
func (c *Core) readDisk(ctx context.Context, b catalog.Bitfile, w io.Writer) error {
	if !b.OnDisk || len(b.Segments) == 0 {
		return api.Errorf(api.ErrOffline, "bitfile %d has no disk copy", b.ID)
	}
	width, unit := int64(len(b.Segments)), b.StripeUnit
	buf := make([]byte, 1<<20)
	for i, off := int64(0), int64(0); off < b.Size; i++ {
		s := b.Segments[i%width]
		n := min(unit, b.Size-off)
		ep, err := c.moverFor(s.Device)
		if err != nil {
			return err
		}
		conn, err := c.pool.Get(ctx, ep)
		if err != nil {
			return err
		}
		req := wire.Request{Op: token.OpRead, Token: c.sign(token.OpRead, s.Device, s.Object, 0), Device: s.Device, Object: s.Object,
			Offset: (i / width) * unit, Length: n, Verify: true}
		st, err := conn.Read(ctx, req, w, buf)
		c.pool.Put(conn)
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", s.Device, s.Object, err)
		}
		if st.Length != n {
			return fmt.Errorf("read %s/%s: %d bytes at %d, want %d", s.Device, s.Object, st.Length, req.Offset, n)
		}
		off += n
	}
	return nil
}
