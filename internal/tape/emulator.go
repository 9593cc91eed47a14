package tape

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/wire"
)

// Options configure an emulated library.
type Options struct {
	Generation Generation
	Drives     int
	Cartridges int   // created if the directory holds fewer
	Capacity   int64 // per cartridge; default the generation's
	Clock      clock.Clock
	Log        *slog.Logger
	// FS is what the cartridges' files go through; nil means fsio.OS.
	// Tests inject faults and crashes with faultfs.
	FS fsio.FS
	// DriveIDs name the drives (default drive0 … drive<Drives-1>).
	DriveIDs []string
	// Shared makes this emulator the drives of one tape server in a
	// library whose cartridges (dir) other tape servers' drives also
	// write and whose robot is the core's: a cartridge is read again from
	// its files at every mount, and mounts and dismounts take no robot.
	Shared bool
}

// Emulator is a tape library whose cartridges are directories on the host:
// one file per tape file, written strictly in order at the end of data.
// Timing follows the generation's model on the given clock; counters record
// every mount, locate and byte. Faults can be injected (FailDrive,
// SetUnreadable, FailRobot).
type Emulator struct {
	dir      string
	fs       fsio.FS
	gen      Generation
	clk      clock.Clock
	capacity int64
	log      *slog.Logger

	mu        sync.Mutex
	carts     map[string]*cartridge
	order     []string // volume names, sorted
	drives    []*drive
	robotFail int
	robot     chan struct{} // one robot: a token
	shared    bool
}

type cartridge struct {
	volume     string
	dir        string
	files      []tapeFile // complete tape files, seq = index+1
	end        int64      // end of data, bytes from BOT
	drive      *drive
	unreadable bool // injected fault
	writeBad   bool // injected fault: writes fail
	known      bool // a read has failed on it since: the library reports it
}

type tapeFile struct {
	start, size, hdrLen int64
	name                string
}

type drive struct {
	id      string
	cart    *cartridge
	off     int64 // logical position: bytes from BOT on the mounted cartridge
	failed  bool
	busy    bool
	stats   Stats
	pending []string // tape files closed since the last flush
	// backhitched is when the drive, stopped by a synchronising flush, is
	// positioned to write on from where it stopped (Generation.Backhitch).
	backhitched time.Time
}

// volumeLabel is the file naming a cartridge directory's volume.
const volumeLabel = "VOL1"

// OpenEmulator opens (creating as needed) an emulated library in dir.
func OpenEmulator(dir string, o Options) (*Emulator, error) {
	if o.Generation.Name == "" {
		o.Generation = Generations["LTO-9"]
	}
	if o.Drives < 1 {
		o.Drives = 1
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Capacity <= 0 {
		o.Capacity = o.Generation.Capacity
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = fsio.OS
	}
	e := &Emulator{dir: dir, fs: o.FS, gen: o.Generation, clk: o.Clock, capacity: o.Capacity, log: o.Log,
		carts: map[string]*cartridge{}, robot: make(chan struct{}, 1), shared: o.Shared}
	if err := e.fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tape library %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tape library %s: %w", dir, err)
	}
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		if _, err := e.fs.Stat(filepath.Join(dir, de.Name(), volumeLabel)); err != nil {
			continue
		}
		c, err := e.loadCartridge(de.Name())
		if err != nil {
			return nil, err
		}
		e.carts[c.volume] = c
	}
	for i := 0; len(e.carts) < o.Cartridges; i++ {
		vol := fmt.Sprintf("T%05d", i)
		if e.carts[vol] != nil {
			continue
		}
		c, err := e.newCartridge(vol)
		if err != nil {
			return nil, err
		}
		e.carts[vol] = c
	}
	for v := range e.carts {
		e.order = append(e.order, v)
	}
	sort.Strings(e.order)
	for i := 0; i < o.Drives && len(o.DriveIDs) == 0; i++ {
		e.drives = append(e.drives, &drive{id: fmt.Sprintf("drive%d", i)})
	}
	for _, id := range o.DriveIDs {
		e.drives = append(e.drives, &drive{id: id})
	}
	return e, nil
}

func (e *Emulator) newCartridge(vol string) (*cartridge, error) {
	d := filepath.Join(e.dir, vol)
	if err := e.fs.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("tape: cartridge %s: %w", vol, err)
	}
	b, _ := json.Marshal(map[string]any{"volume": vol, "generation": e.gen.Name, "capacity": e.capacity})
	if err := e.writeFileSync(filepath.Join(d, volumeLabel), b); err != nil {
		return nil, fmt.Errorf("tape: label %s: %w", vol, err)
	}
	return &cartridge{volume: vol, dir: d}, nil
}

// writeFileSync writes a new file durably: its data, then its entry.
func (e *Emulator) writeFileSync(path string, b []byte) error {
	e.fs.Remove(path) // a label left by a start that failed before this
	f, err := e.fs.Create(path, 0, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return e.syncDir(filepath.Dir(path))
}

// syncDir makes a directory's entries durable.
func (e *Emulator) syncDir(dir string) error {
	d, err := e.fs.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func fileName(seq int) string { return fmt.Sprintf("%07d", seq) }

// loadCartridge reads a cartridge's tape files in order. The first one that
// is incomplete (a crash before its trailer was flushed) and everything
// after it lie beyond the end of data and are removed, as the next write at
// the end of data would overwrite them on a real tape.
func (e *Emulator) loadCartridge(vol string) (*cartridge, error) {
	c := &cartridge{volume: vol, dir: filepath.Join(e.dir, vol)}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("tape: cartridge %s: %w", vol, err)
	}
	var seqs []int
	for _, de := range ents {
		name := de.Name()
		if strings.HasSuffix(name, ".partial") {
			e.fs.Remove(filepath.Join(c.dir, name))
			continue
		}
		if n, err := strconv.Atoi(name); err == nil && n > 0 {
			seqs = append(seqs, n)
		}
	}
	sort.Ints(seqs)
	for i, seq := range seqs {
		path := filepath.Join(c.dir, fileName(seq))
		tf, err := e.checkTapeFile(path)
		if err == nil && seq != i+1 {
			err = fmt.Errorf("tape file %d follows %d", seq, i)
		}
		if err != nil {
			for _, s := range seqs[i:] {
				e.fs.Remove(filepath.Join(c.dir, fileName(s)))
			}
			e.log.Warn("tape: discarded tape files after the end of data", "volume", vol, "from", seq, "reason", err)
			break
		}
		tf.start = c.end
		c.files = append(c.files, tf)
		c.end += tf.size
	}
	return c, nil
}

// checkTapeFile checks that a tape file on the host is complete: a header,
// data of the length the trailer states, the trailer, its length.
func (e *Emulator) checkTapeFile(path string) (tapeFile, error) {
	f, err := e.fs.Open(path)
	if err != nil {
		return tapeFile{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tapeFile{}, err
	}
	_, hdrLen, err := DecodeHeader(io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return tapeFile{}, err
	}
	var tl [8]byte
	if fi.Size() < hdrLen+8 {
		return tapeFile{}, fmt.Errorf("%w: no trailer", ErrLabel)
	}
	if _, err := f.ReadAt(tl[:], fi.Size()-8); err != nil {
		return tapeFile{}, err
	}
	trLen := int64(binary.BigEndian.Uint64(tl[:]))
	if trLen <= 0 || trLen > fi.Size()-hdrLen-8 {
		return tapeFile{}, fmt.Errorf("%w: trailer length %d", ErrLabel, trLen)
	}
	var tr Trailer
	if _, err := decodeLabel(io.NewSectionReader(f, fi.Size()-8-trLen, trLen), trailerMagic, &tr); err != nil {
		return tapeFile{}, err
	}
	if hdrLen+tr.DataLen+trLen+8 != fi.Size() {
		return tapeFile{}, fmt.Errorf("%w: trailer says %d data bytes, file holds %d", ErrLabel, tr.DataLen, fi.Size()-hdrLen-trLen-8)
	}
	return tapeFile{size: fi.Size(), hdrLen: hdrLen, name: path}, nil
}

// Generation returns the library's drive and media generation.
func (e *Emulator) Generation() Generation { return e.gen }

// Cartridges lists the cartridges in volume order.
func (e *Emulator) Cartridges() []CartridgeInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]CartridgeInfo, 0, len(e.order))
	for _, v := range e.order {
		c := e.carts[v]
		ci := CartridgeInfo{Volume: v, Capacity: e.capacity, Used: c.end, Files: len(c.files), Unreadable: c.known}
		if c.drive != nil {
			ci.Drive = c.drive.id
		}
		out = append(out, ci)
	}
	return out
}

// Drives lists the drives.
func (e *Emulator) Drives() []DriveInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]DriveInfo, 0, len(e.drives))
	for _, d := range e.drives {
		di := DriveInfo{ID: d.id, Failed: d.failed, Busy: d.busy, Stats: d.stats, Position: e.posOf(d.off)}
		if d.cart != nil {
			di.Volume = d.cart.volume
		}
		out = append(out, di)
	}
	return out
}

// Stats sums every drive's counters.
func (e *Emulator) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s Stats
	for _, d := range e.drives {
		s.Add(d.stats)
	}
	return s
}

// FailDrive makes drive fail every operation (or work again).
func (e *Emulator) FailDrive(id string, failed bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.driveLocked(id)
	if d == nil {
		return fmt.Errorf("%w: %s", ErrNoSuchDrive, id)
	}
	d.failed = failed
	return nil
}

// SetUnreadable makes every read of volume fail (or work again). The
// library reports the cartridge unreadable once a read has failed on it,
// as a real one would; clearing the fault clears that too.
func (e *Emulator) SetUnreadable(volume string, bad bool) error {
	return e.withCartridge(volume, func(c *cartridge) {
		c.unreadable = bad
		if !bad {
			c.known = false
		}
	})
}

// SetWriteErrors makes every write on volume fail as a medium error would,
// the drive working (or the writes work again).
func (e *Emulator) SetWriteErrors(volume string, bad bool) error {
	return e.withCartridge(volume, func(c *cartridge) { c.writeBad = bad })
}

// withCartridge runs set on volume's cartridge under the library's lock.
func (e *Emulator) withCartridge(volume string, set func(*cartridge)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.carts[volume]
	if c == nil {
		return fmt.Errorf("%w: %s", ErrNoSuchVolume, volume)
	}
	set(c)
	return nil
}

// errWriteInjected is the medium error of a cartridge whose writes fail.
var errWriteInjected = errors.New("medium error (injected)")

// FailRobot makes the next n robot moves time out.
func (e *Emulator) FailRobot(n int) {
	e.mu.Lock()
	e.robotFail = n
	e.mu.Unlock()
}

func (e *Emulator) driveLocked(id string) *drive {
	for _, d := range e.drives {
		if d.id == id {
			return d
		}
	}
	return nil
}

// acquire claims drive id for one operation.
func (e *Emulator) acquire(id string, needMounted bool) (*drive, error) {
	return e.acquireDrive(id, needMounted, false)
}

func (e *Emulator) acquireDrive(id string, needMounted, evenFailed bool) (*drive, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.driveLocked(id)
	switch {
	case d == nil:
		return nil, fmt.Errorf("%w: %s", ErrNoSuchDrive, id)
	case d.failed && !evenFailed:
		return nil, fmt.Errorf("%w: %s", ErrDriveFailed, id)
	case d.busy:
		return nil, fmt.Errorf("%w: drive %s", ErrBusy, id)
	case needMounted && d.cart == nil:
		return nil, fmt.Errorf("%w: drive %s", ErrNotMounted, id)
	}
	d.busy = true
	return d, nil
}

func (e *Emulator) release(d *drive) {
	e.mu.Lock()
	d.busy = false
	e.mu.Unlock()
}

// spend waits for a modelled duration and charges it to a counter.
func (e *Emulator) spend(ctx context.Context, d *drive, counter *time.Duration, t time.Duration) error {
	e.mu.Lock()
	*counter += t
	e.mu.Unlock()
	return e.clk.Sleep(ctx, t)
}

// posOf maps a logical offset to a physical position.
func (e *Emulator) posOf(off int64) Position { return e.gen.PositionIn(off, e.capacity) }

func (e *Emulator) setOff(d *drive, off int64) {
	e.mu.Lock()
	d.off, d.backhitched = off, time.Time{}
	e.mu.Unlock()
}

// locate moves d to logical offset off.
func (e *Emulator) locate(ctx context.Context, d *drive, off int64) error {
	if d.off == off {
		return nil
	}
	t := e.gen.LocateTime(e.posOf(d.off), e.posOf(off))
	e.mu.Lock()
	d.stats.Locates++
	d.off = off
	d.backhitched = time.Time{} // the locate positions the tape
	e.mu.Unlock()
	return e.spend(ctx, d, &d.stats.Positioning, t)
}

// Mount moves volume into drive.
func (e *Emulator) Mount(ctx context.Context, driveID, volume string) error {
	d, err := e.acquire(driveID, false)
	if err != nil {
		return err
	}
	defer e.release(d)
	if e.shared {
		if err := e.reload(volume); err != nil {
			return err
		}
	}
	e.mu.Lock()
	c := e.carts[volume]
	switch {
	case c == nil:
		e.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoSuchVolume, volume)
	case d.cart != nil:
		e.mu.Unlock()
		return fmt.Errorf("%w: drive %s holds %s", ErrBusy, d.id, d.cart.volume)
	case c.drive != nil:
		e.mu.Unlock()
		return fmt.Errorf("%w: %s is in drive %s", ErrBusy, volume, c.drive.id)
	}
	c.drive = d // reserved while the robot moves it
	e.mu.Unlock()
	if err := e.robotMove(ctx, d); err != nil {
		e.mu.Lock()
		c.drive = nil
		e.mu.Unlock()
		return fmt.Errorf("mount %s in %s: %w", volume, d.id, err)
	}
	if err := e.spend(ctx, d, &d.stats.Mounting, e.gen.Load); err != nil {
		e.mu.Lock()
		c.drive = nil
		e.mu.Unlock()
		return err
	}
	e.mu.Lock()
	d.cart, d.off, d.backhitched = c, 0, time.Time{}
	d.stats.Mounts++
	e.mu.Unlock()
	return nil
}

// reload reads a shared cartridge from its files again: another tape
// server's drive may have written it since.
func (e *Emulator) reload(volume string) error {
	if _, err := e.fs.Stat(filepath.Join(e.dir, volume, volumeLabel)); err != nil {
		return fmt.Errorf("%w: %s", ErrNoSuchVolume, volume)
	}
	fresh, err := e.loadCartridge(volume)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.carts[volume]
	if c == nil {
		e.carts[volume] = fresh
		e.order = append(e.order, volume)
		sort.Strings(e.order)
		return nil
	}
	if c.drive == nil {
		c.files, c.end = fresh.files, fresh.end
	}
	return nil
}

// robotMove takes the robot for one exchange; a shared library's robot is
// the core's, which moved the cartridge before asking.
func (e *Emulator) robotMove(ctx context.Context, d *drive) error {
	if e.shared {
		return nil
	}
	select {
	case e.robot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.robot }()
	if err := e.spend(ctx, d, &d.stats.Mounting, e.gen.Exchange); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.robotFail > 0 {
		e.robotFail--
		return ErrRobot
	}
	return nil
}

// Dismount rewinds and unloads drive and returns its cartridge to its slot.
// A failed drive can still be emptied (the robot pulls the cartridge, as
// operators do after a drive error): what it had not flushed is lost.
func (e *Emulator) Dismount(ctx context.Context, driveID string) error {
	d, err := e.acquireDrive(driveID, true, true)
	if err != nil {
		return err
	}
	defer e.release(d)
	if d.failed {
		d.pending = d.pending[:0]
	} else if err := e.flush(ctx, d); err != nil {
		return err
	}
	if err := e.spend(ctx, d, &d.stats.Positioning, e.gen.RewindTime(e.posOf(d.off))); err != nil {
		return err
	}
	e.setOff(d, 0)
	if err := e.spend(ctx, d, &d.stats.Mounting, e.gen.Unload); err != nil {
		return err
	}
	if err := e.robotMove(ctx, d); err != nil {
		return fmt.Errorf("dismount %s from %s: %w", d.cart.volume, d.id, err)
	}
	e.mu.Lock()
	d.cart.drive, d.cart = nil, nil
	d.stats.Dismounts++
	e.mu.Unlock()
	return nil
}

// Erase empties the drive's cartridge.
func (e *Emulator) Erase(ctx context.Context, driveID string) error {
	d, err := e.acquire(driveID, true)
	if err != nil {
		return err
	}
	defer e.release(d)
	if err := e.locate(ctx, d, 0); err != nil {
		return err
	}
	c := d.cart
	for _, tf := range c.files {
		if err := e.fs.Remove(tf.name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("tape: erase %s: %w", c.volume, err)
		}
	}
	if err := e.syncDir(c.dir); err != nil {
		return fmt.Errorf("tape: erase %s: %w", c.volume, err)
	}
	e.mu.Lock()
	c.files, c.end, c.known = nil, 0, false
	d.pending = d.pending[:0]
	e.mu.Unlock()
	return nil
}

// Flush forces the drive's closed tape files to the medium.
func (e *Emulator) Flush(ctx context.Context, driveID string) error {
	d, err := e.acquire(driveID, true)
	if err != nil {
		return err
	}
	defer e.release(d)
	return e.flush(ctx, d)
}

func (e *Emulator) flush(ctx context.Context, d *drive) error {
	if len(d.pending) == 0 {
		return nil
	}
	for _, p := range d.pending {
		f, err := e.fs.Open(p)
		if err != nil {
			return fmt.Errorf("tape: flush %s: %w", p, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("tape: flush %s: %w", p, err)
		}
	}
	if err := e.syncDir(d.cart.dir); err != nil {
		return fmt.Errorf("tape: flush %s: %w", d.cart.volume, err)
	}
	d.pending = d.pending[:0]
	e.mu.Lock()
	d.stats.Flushes++
	d.backhitched = e.clk.Now().Add(e.gen.Backhitch)
	e.mu.Unlock()
	return nil
}

// Append starts a tape file at the end of data of drive's cartridge.
func (e *Emulator) Append(ctx context.Context, driveID string, h *Header) (FileWriter, error) {
	d, err := e.acquire(driveID, true)
	if err != nil {
		return nil, err
	}
	c := d.cart
	h.Volume, h.Seq, h.Start = c.volume, len(c.files)+1, c.end
	if h.Written.IsZero() {
		h.Written = e.clk.Now().UTC()
	}
	hdr, err := EncodeHeader(h)
	if err != nil {
		e.release(d)
		return nil, err
	}
	if c.end+int64(len(hdr))+h.DataLen()+512 > e.capacity {
		e.release(d)
		return nil, fmt.Errorf("%w: %s has %d of %d bytes free", ErrFull, c.volume, e.capacity-c.end, e.capacity)
	}
	if d.off == c.end {
		// Writing on from a synchronising flush: the drive may still be
		// backing up to where it stopped.
		if wait := d.backhitched.Sub(e.clk.Now()); wait > 0 {
			if err := e.spend(ctx, d, &d.stats.Positioning, wait); err != nil {
				e.release(d)
				return nil, err
			}
		}
	}
	if err := e.locate(ctx, d, c.end); err != nil {
		e.release(d)
		return nil, err
	}
	e.mu.Lock()
	bad := c.writeBad
	e.mu.Unlock()
	if bad {
		e.release(d)
		return nil, fmt.Errorf("tape: write %s: %w", c.volume, errWriteInjected)
	}
	final := filepath.Join(c.dir, fileName(h.Seq))
	e.fs.Remove(final + ".partial") // an earlier attempt's, if any
	f, err := e.fs.Create(final+".partial", 0, 0o600)
	if err != nil {
		e.release(d)
		return nil, fmt.Errorf("tape: %s: %w", c.volume, err)
	}
	w := &fileWriter{e: e, d: d, c: c, f: f, behind: fsio.NewWriteBehind(f), final: final, seq: h.Seq, start: c.end, hdrLen: int64(len(hdr)), want: h.DataLen(), ctx: ctx, entries: h.Entries, ecrc: make([]uint32, len(h.Entries)),
		tiled: tiles(h.Entries)}
	w.pace = newPacer(e, d, &d.stats.Transfer)
	if _, err := w.write(hdr); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

type fileWriter struct {
	e      *Emulator
	d      *drive
	c      *cartridge
	f      fsio.File
	behind *fsio.WriteBehind // f streams to the host's disk as a drive streams to tape
	off    int64             // where the next write goes in f
	final  string
	seq    int
	start  int64
	hdrLen int64
	want   int64
	n      int64 // data bytes
	crc    uint32
	pace   *pacer
	ctx    context.Context
	done   bool
	// Per-entry CRCs, for the trailer: entries[i] covers
	// [Offset, Offset+Size) of the data.
	entries []Entry
	ecrc    []uint32
	cur     int
	check   []byte // read-after-write buffer
	// tiled: the entries cover the data end to end, in order, so the
	// data's CRC is theirs combined at close instead of a pass of its own.
	tiled bool
}

// tiles reports whether entries cover [0, their end) one after another.
func tiles(entries []Entry) bool {
	var off int64
	for _, e := range entries {
		if e.Offset != off || e.Size < 0 {
			return false
		}
		off += e.Size
	}
	return true
}

func (w *fileWriter) EntryCRCs() []uint32 { return w.ecrc }

// entryCRC folds data p, at data offset off, into the entries' CRCs.
func (w *fileWriter) entryCRC(p []byte, off int64) {
	end := off + int64(len(p))
	// Data arrives in order: start from the entry the last write reached.
	for i := w.cur; i < len(w.entries) && w.entries[i].Offset < end; i++ {
		e := w.entries[i]
		lo, hi := max(e.Offset, off), min(e.Offset+e.Size, end)
		if lo < hi {
			w.ecrc[i] = crc32.Update(w.ecrc[i], castagnoli, p[lo-off:hi-off])
		}
		if e.Offset+e.Size <= end {
			w.cur = i + 1
		}
	}
}

func (w *fileWriter) Seq() int { return w.seq }

func (w *fileWriter) Start() int64 { return w.start }

func (w *fileWriter) write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("tape: write %s: %w", w.c.volume, err)
	}
	return n, w.pace.moved(w.ctx, int64(n))
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("tape: write after close")
	}
	if w.n+int64(len(p)) > w.want {
		return 0, fmt.Errorf("tape: %s: %d bytes written, header declared %d", w.c.volume, w.n+int64(len(p)), w.want)
	}
	w.e.mu.Lock()
	failed, bad := w.d.failed, w.c.writeBad
	w.e.mu.Unlock()
	if failed {
		return 0, fmt.Errorf("%w: %s", ErrDriveFailed, w.d.id)
	}
	if bad {
		return 0, fmt.Errorf("tape: write %s: %w", w.c.volume, errWriteInjected)
	}
	n, err := w.write(p)
	if err == nil {
		err = w.readAfterWrite(p[:n], w.hdrLen+w.n)
		w.behind.Wrote(w.off) // after the read-back: the window may leave the cache
	}
	if !w.tiled {
		w.crc = crc32.Update(w.crc, castagnoli, p[:n])
	}
	w.entryCRC(p[:n], w.n)
	w.n += int64(n)
	return n, err
}

// readAfterWrite reads back what a write just put at off and compares it,
// as an LTO drive's read head checks each data set behind the write head:
// within the write's own time, not as a second pass over the whole tape
// file at its close (which cost a real-time LTO-9 stream a tenth of its
// rate).
func (w *fileWriter) readAfterWrite(p []byte, off int64) error {
	if len(w.check) < len(p) {
		w.check = make([]byte, len(p))
	}
	got := w.check[:len(p)]
	if _, err := w.f.ReadAt(got, off); err != nil {
		return fmt.Errorf("tape: read after write %s file %d at %d: %w", w.c.volume, w.seq, off, err)
	}
	if !bytes.Equal(got, p) {
		return fmt.Errorf("tape: read after write %s file %d at %d: the data read back differs", w.c.volume, w.seq, off)
	}
	return nil
}

// Close writes the trailer and makes the tape file part of the volume; its
// data was read back as it was written (readAfterWrite).
func (w *fileWriter) Close() error {
	if w.done {
		return nil
	}
	if w.n != w.want {
		w.Abort()
		return fmt.Errorf("tape: %s: tape file %d has %d data bytes, header declared %d", w.c.volume, w.seq, w.n, w.want)
	}
	if w.tiled {
		w.crc = 0
		for i, e := range w.entries {
			w.crc = wire.CombineCRC(w.crc, w.ecrc[i], e.Size)
		}
	}
	tr, err := encodeLabel(trailerMagic, Trailer{DataLen: w.n, DataCRC: w.crc, Entries: w.ecrc})
	if err == nil {
		tr = binary.BigEndian.AppendUint64(tr, uint64(len(tr)))
		_, err = w.write(tr)
	}
	w.behind.Stop()
	if err == nil {
		err = w.f.Close()
		w.f = nil
	}
	if err == nil {
		err = w.e.fs.Rename(w.final+".partial", w.final)
	}
	if err != nil {
		w.Abort()
		return err
	}
	size := w.hdrLen + w.n + int64(len(tr))
	e := w.e
	e.mu.Lock()
	w.c.files = append(w.c.files, tapeFile{start: w.c.end, size: size, hdrLen: w.hdrLen, name: w.final})
	w.c.end += size
	w.d.off = w.c.end
	w.d.pending = append(w.d.pending, w.final)
	w.d.stats.BytesWritten += w.n
	w.d.busy = false
	e.mu.Unlock()
	w.done = true
	return nil
}

func (w *fileWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.behind.Stop()
	if w.f != nil {
		w.f.Close()
	}
	w.e.fs.Remove(w.final + ".partial")
	w.e.mu.Lock()
	w.d.off = -1 // somewhere past the end of data: the next access locates
	w.e.mu.Unlock()
	w.e.release(w.d)
}

// fileAt returns tape file seq of d's cartridge.
func (e *Emulator) fileAt(d *drive, seq int) (tapeFile, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := d.cart
	if c.unreadable {
		c.known = true
		return tapeFile{}, fmt.Errorf("%w: %s", ErrUnreadable, c.volume)
	}
	if seq < 1 || seq > len(c.files) {
		return tapeFile{}, fmt.Errorf("%w: %s has %d tape files, not %d", ErrNoSuchFile, c.volume, len(c.files), seq)
	}
	return c.files[seq-1], nil
}

// openLabels claims drive for reading a label of tape file seq; done
// releases it.
func (e *Emulator) openLabels(driveID string, seq int) (d *drive, tf tapeFile, f fsio.File, done func(), err error) {
	if d, err = e.acquire(driveID, true); err != nil {
		return
	}
	if tf, err = e.fileAt(d, seq); err == nil {
		if f, err = e.fs.Open(tf.name); err != nil {
			err = fmt.Errorf("tape: %s file %d: %w", d.cart.volume, seq, err)
		}
	}
	if err != nil {
		e.release(d)
		return
	}
	return d, tf, f, func() { f.Close(); e.release(d) }, nil
}

// ReadHeader reads the header of tape file seq.
func (e *Emulator) ReadHeader(ctx context.Context, driveID string, seq int) (*Header, error) {
	d, tf, f, done, err := e.openLabels(driveID, seq)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := e.locate(ctx, d, tf.start); err != nil {
		return nil, err
	}
	h, n, err := DecodeHeader(io.NewSectionReader(f, 0, tf.size))
	if err != nil {
		return nil, fmt.Errorf("tape: %s file %d: %w", d.cart.volume, seq, err)
	}
	e.setOff(d, tf.start+n)
	return h, newPacer(e, d, &d.stats.Transfer).moved(ctx, n)
}

// ReadTrailer reads the trailer of tape file seq.
func (e *Emulator) ReadTrailer(ctx context.Context, driveID string, seq int) (*Trailer, error) {
	d, tf, f, done, err := e.openLabels(driveID, seq)
	if err != nil {
		return nil, err
	}
	defer done()
	var tl [8]byte
	if _, err := f.ReadAt(tl[:], tf.size-8); err != nil {
		return nil, fmt.Errorf("tape: %s file %d: %w", d.cart.volume, seq, err)
	}
	n := int64(binary.BigEndian.Uint64(tl[:]))
	if err := e.locate(ctx, d, tf.start+tf.size-8-n); err != nil {
		return nil, err
	}
	var tr Trailer
	if _, err := decodeLabel(io.NewSectionReader(f, tf.size-8-n, n), trailerMagic, &tr); err != nil {
		return nil, fmt.Errorf("tape: %s file %d: %w", d.cart.volume, seq, err)
	}
	e.setOff(d, tf.start+tf.size)
	return &tr, newPacer(e, d, &d.stats.Transfer).moved(ctx, n+8)
}

// ReadThrough moves the head to byte off of tape file seq's data by
// reading on, charging the gap's streaming time to positioning.
func (e *Emulator) ReadThrough(ctx context.Context, driveID string, seq int, off int64) error {
	d, err := e.acquire(driveID, true)
	if err != nil {
		return err
	}
	defer e.release(d)
	tf, err := e.fileAt(d, seq)
	if err != nil {
		return err
	}
	if off < 0 || tf.hdrLen+off > tf.size {
		return fmt.Errorf("tape: %s file %d: offset %d outside its data", d.cart.volume, seq, off)
	}
	to := tf.start + tf.hdrLen + off
	if to < d.off || d.off < 0 {
		return e.locate(ctx, d, to)
	}
	t := e.gen.ReadThroughTime(d.off, to, e.capacity)
	e.mu.Lock()
	if to > d.off {
		d.stats.ReadThroughs++
	}
	d.off = to
	e.mu.Unlock()
	return e.spend(ctx, d, &d.stats.Positioning, t)
}

// ReadData returns a reader of n bytes at off in tape file seq's data.
func (e *Emulator) ReadData(ctx context.Context, driveID string, seq int, off, n int64) (io.ReadCloser, error) {
	d, err := e.acquire(driveID, true)
	if err != nil {
		return nil, err
	}
	tf, err := e.fileAt(d, seq)
	if err == nil && (off < 0 || n < 0 || tf.hdrLen+off+n > tf.size) {
		err = fmt.Errorf("tape: %s file %d: range %d+%d outside its data", d.cart.volume, seq, off, n)
	}
	if err == nil {
		err = e.locate(ctx, d, tf.start+tf.hdrLen+off)
	}
	var f fsio.File
	if err == nil {
		f, err = e.fs.Open(tf.name)
	}
	if err != nil {
		e.release(d)
		return nil, err
	}
	return &dataReader{e: e, d: d, f: f, r: io.NewSectionReader(f, tf.hdrLen+off, n), ctx: ctx, pace: newPacer(e, d, &d.stats.Transfer)}, nil
}

type dataReader struct {
	e    *Emulator
	d    *drive
	f    fsio.File
	r    *io.SectionReader
	ctx  context.Context
	pace *pacer
	done bool
}

func (r *dataReader) Read(p []byte) (int, error) {
	r.e.mu.Lock()
	failed, bad := r.d.failed, r.d.cart.unreadable
	if bad {
		r.d.cart.known = true
	}
	r.e.mu.Unlock()
	switch {
	case failed:
		return 0, fmt.Errorf("%w: %s", ErrDriveFailed, r.d.id)
	case bad:
		return 0, fmt.Errorf("%w: %s", ErrUnreadable, r.d.cart.volume)
	}
	n, err := r.r.Read(p)
	if n > 0 {
		r.e.mu.Lock()
		r.d.off += int64(n)
		r.d.stats.BytesRead += int64(n)
		r.e.mu.Unlock()
		if perr := r.pace.moved(r.ctx, int64(n)); perr != nil {
			return n, perr
		}
	}
	return n, err
}

func (r *dataReader) Close() error {
	if r.done {
		return nil
	}
	r.done = true
	r.f.Close()
	r.e.release(r.d)
	return nil
}

// pacer holds a stream to the drive's native rate on the library's clock,
// and charges the modelled streaming time to a counter.
type pacer struct {
	e       *Emulator
	d       *drive
	counter *time.Duration
	start   time.Time
	n       int64
	charged time.Duration
}

func newPacer(e *Emulator, d *drive, counter *time.Duration) *pacer {
	return &pacer{e: e, d: d, counter: counter, start: e.clk.Now()}
}

// paceSlack is how far a stream may run ahead of its modelled time before
// it waits (timers finer than this cost more than they model).
const paceSlack = 2 * time.Millisecond

func (p *pacer) moved(ctx context.Context, n int64) error {
	p.n += n
	due := p.e.gen.TransferTime(p.n)
	p.e.mu.Lock()
	*p.counter += due - p.charged
	p.e.mu.Unlock()
	p.charged = due
	if ahead := due - p.e.clk.Now().Sub(p.start); ahead > paceSlack {
		return p.e.clk.Sleep(ctx, ahead)
	}
	return ctx.Err()
}
