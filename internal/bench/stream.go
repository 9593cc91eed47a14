package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// file is one file of a data phase: its path and the seed of its content.
type file struct {
	path string
	seed int64
}

// files names n files in dir, seeded apart.
func files(dir string, n int, prefix string) []file {
	out := make([]file, n)
	for i := range out {
		out[i] = file{path: fmt.Sprintf("%s/%s.%d", dir, prefix, i), seed: int64(len(dir)*7919 + i*104729 + len(prefix))}
	}
	return out
}

// seqWrite has worker k write fs[k] sequentially in records of rec bytes,
// size bytes at most, stopping at the deadline (with wear-out). It returns
// the records each worker wrote, which the read phase replays.
func (r *Run) seqWrite(name string, fs []file, size, rec int64, deadline time.Duration, role func(int) string, readers []file) ([]Phase, []int64) {
	return r.seqWriteStriped(name, fs, size, rec, deadline, role, readers, 0)
}

// seqWriteStriped is seqWrite with files striped over stripes devices.
func (r *Run) seqWriteStriped(name string, fs []file, size, rec int64, deadline time.Duration, role func(int) string, readers []file, stripes int) ([]Phase, []int64) {
	planned := (size + rec - 1) / rec
	r.pat.reserve(int(rec))
	work := func(w *Worker) error {
		if w.ID >= len(fs) {
			return r.seqReadWorker(w, readers[w.ID-len(fs)], size, rec, planned)
		}
		f := fs[w.ID]
		wr, err := r.T.Create(w.Ctx(), f.path, size, stripes)
		if err != nil {
			return fmt.Errorf("create %s: %w", f.path, err)
		}
		var i int64
		for ; w.More(i, planned); i++ {
			off := i * rec
			n := min(rec, size-off)
			t0 := now()
			if _, err := wr.Write(r.pat.at(f.seed, off, int(n))); err != nil {
				wr.Abort()
				return fmt.Errorf("write %s at %d: %w", f.path, off, err)
			}
			w.Op(t0, n)
		}
		w.Finish(i)
		if err := wr.Close(); err != nil {
			return fmt.Errorf("close %s: %w", f.path, err)
		}
		return nil
	}
	n := len(fs) + len(readers)
	read := readBuffer(rec)
	setup := func(w *Worker) {
		if w.ID >= len(fs) { // a reader beside the writers
			read(w)
		}
	}
	phs := r.runRoles(PhaseSpec{Name: name, Workers: n, Deadline: deadline, Setup: setup, Work: work, Role: role})
	for i := range phs {
		if !strings.HasPrefix(phs[i].Name, "read") {
			phs[i].Durability = r.info.Durability
		}
	}
	counts := make([]int64, len(fs))
	if phs[0].steps != nil {
		copy(counts, phs[0].steps)
	}
	return phs, counts
}

// seqRead has worker k read fs[(k+shift) % len] (a shifted reader never
// reads what it wrote, as IOR's -C) for counts records of rec bytes,
// verifying inline when asked.
func (r *Run) seqRead(name string, fs []file, counts []int64, size, rec int64, shift int) Phase {
	cache := r.T.DropCache(r.ctx, r.dir(r.cur.Scenario))
	ph := r.runPhase(PhaseSpec{Name: name, Workers: len(fs), Setup: readBuffer(rec), Work: func(w *Worker) error {
		k := (w.ID + shift) % len(fs)
		return r.seqReadWorker(w, fs[k], size, rec, counts[k])
	}})
	ph.Cache, ph.Verify = cache, r.verifyMode()
	r.verifyAfter(&ph, fs, counts, size, rec)
	return ph
}

func (r *Run) seqReadWorker(w *Worker, f file, size, rec, count int64) error {
	rd, err := r.T.Open(w.Ctx(), f.path)
	if err != nil {
		return fmt.Errorf("open %s: %w", f.path, err)
	}
	defer rd.Close()
	buf := w.buf
	for i := int64(0); i < count && w.Ctx().Err() == nil; i++ {
		off := i * rec
		n := min(rec, size-off)
		t0 := now()
		if _, err := rd.ReadAt(buf[:n], off); err != nil {
			return fmt.Errorf("read %s at %d: %w", f.path, off, err)
		}
		w.Op(t0, n)
		if r.Verify == "inline" && !r.pat.check(f.seed, off, buf[:n]) {
			return &verifyError{path: f.path, off: off, n: n}
		}
	}
	return nil
}

// readBuffer gives each worker a read buffer of n bytes with every page
// touched, as fio and IOR allocate theirs before the clock starts: fresh
// pages faulted in inside a timed read would be charged to the target
// (on a VM whose host backs a page on first touch, at ~0.4 GB/s here).
func readBuffer(n int64) func(*Worker) {
	return func(w *Worker) {
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 0xa5
		}
		w.buf = b
	}
}

type verifyError struct {
	path   string
	off, n int64
}

func (e *verifyError) Error() string {
	return fmt.Sprintf("data check: %s: %d bytes at offset %d differ from what was written", e.path, e.n, e.off)
}

func (r *Run) verifyMode() string {
	switch r.Verify {
	case "inline":
		return "every byte compared inside the timed read (IOR -R)"
	case "after":
		return "every byte compared in an untimed re-read after the phase (IOR -W)"
	}
	return "off"
}

// verifyAfter re-reads and checks the files, untimed, in "after" mode;
// a mismatch in either mode is counted in the phase.
func (r *Run) verifyAfter(ph *Phase, fs []file, counts []int64, size, rec int64) {
	if containsVerify(ph.Error) {
		ph.VerifyErrors++
	}
	if r.Verify != "after" || ph.Error != "" || r.rank() > 0 {
		return
	}
	buf := make([]byte, rec)
	for k, f := range fs {
		rd, err := r.T.Open(r.ctx, f.path)
		if err != nil {
			ph.Error = err.Error()
			return
		}
		for i := int64(0); i < counts[k]; i++ {
			off := i * rec
			n := min(rec, size-off)
			if _, err := rd.ReadAt(buf[:n], off); err != nil || !r.pat.check(f.seed, off, buf[:n]) {
				ph.VerifyErrors++
				ph.Error = (&verifyError{path: f.path, off: off, n: n}).Error()
				break
			}
		}
		rd.Close()
	}
}

// sharedWrite fills one file from all workers: worker k writes blocks k,
// k+N, k+2N … (block bytes each, in transfers of xfer), blocks per worker
// at most. The deadline counts whole blocks, so the file stays contiguous.
func (r *Run) sharedWrite(name string, f file, workers int, block, xfer, blocks int64, deadline time.Duration) (Phase, int64) {
	size := int64(workers) * blocks * block
	r.pat.reserve(int(xfer))
	if r.procs() > 1 && !canJoin(r.T) {
		return Phase{Name: name, Skipped: "a shared file here is one client's upload: its writers cannot be spread over processes"}, 0
	}
	sh, err := r.T.CreateShared(r.ctx, f.path, size, workers, block)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return Phase{Name: name, Skipped: err.Error()}, 0
		}
		return Phase{Name: name, Error: err.Error()}, 0
	}
	ph := r.runPhase(PhaseSpec{Name: name, Workers: workers, Deadline: deadline, Work: func(w *Worker) error {
		part, err := sh.Part(w.ID)
		if err != nil {
			return err
		}
		var j int64
		for ; w.More(j, blocks); j++ {
			base := (j*int64(workers) + int64(w.ID)) * block
			for o := int64(0); o < block; o += xfer {
				n := min(xfer, block-o)
				t0 := now()
				if _, err := part.Write(r.pat.at(f.seed, base+o, int(n))); err != nil {
					part.Abort()
					return fmt.Errorf("write %s at %d: %w", f.path, base+o, err)
				}
				w.Op(t0, n)
			}
		}
		w.Finish(j)
		return part.Close()
	}})
	// Completing the shared file (Strata: the commit) is part of the
	// write: the data is not durable and visible before it.
	t0 := time.Now()
	if err := sh.Close(); err != nil && ph.Error == "" {
		ph.Error = fmt.Sprintf("complete %s: %v", f.path, err)
	}
	ph.Seconds += time.Since(t0).Seconds()
	ph.rates()
	ph.Durability = r.info.Durability
	// The create preceded the barrier, as rank 0's create of a shared
	// file does in IOR.
	var done int64
	for _, c := range ph.steps {
		done = max(done, c)
	}
	return ph, done
}

// sharedRead reads the shared file back: worker k reads the blocks worker
// k+shift wrote.
func (r *Run) sharedRead(name string, f file, workers int, block, xfer, blocks int64, shift int) Phase {
	cache := r.T.DropCache(r.ctx, r.dir(r.cur.Scenario))
	ph := r.runPhase(PhaseSpec{Name: name, Workers: workers, Setup: readBuffer(xfer), Work: func(w *Worker) error {
		owner := int64((w.ID + shift) % workers)
		rd, err := r.T.Open(w.Ctx(), f.path)
		if err != nil {
			return fmt.Errorf("open %s: %w", f.path, err)
		}
		defer rd.Close()
		buf := w.buf
		for j := int64(0); j < blocks && w.Ctx().Err() == nil; j++ {
			base := (j*int64(workers) + owner) * block
			for o := int64(0); o < block; o += xfer {
				n := min(xfer, block-o)
				t0 := now()
				if _, err := rd.ReadAt(buf[:n], base+o); err != nil {
					return fmt.Errorf("read %s at %d: %w", f.path, base+o, err)
				}
				w.Op(t0, n)
				if r.Verify != "off" && !r.pat.check(f.seed, base+o, buf[:n]) {
					return &verifyError{path: f.path, off: base + o, n: n}
				}
			}
		}
		return nil
	}})
	ph.Cache = cache
	ph.Verify = r.verifyMode()
	if r.Verify == "after" {
		ph.Verify = "every byte compared inside the timed read (shared files are checked inline)"
	}
	if ph.Error != "" && containsVerify(ph.Error) {
		ph.VerifyErrors++
	}
	return ph
}

func containsVerify(s string) bool { return strings.Contains(s, "data check:") }

// randomIO runs small-block random writes (where the target can write in
// place) and then random reads over fs, which are first filled
// sequentially (untimed). With shared, all workers work on fs[0].
func (r *Run) randomIO(res *Result, fs []file, size, bs int64, shared bool) {
	label := sizeStr(bs)
	// Prefill, untimed, with a writer per file.
	pre, _ := r.seqWrite("prefill", fs, size, min(size, 4<<20), 0, nil, nil)
	if pre[0].Error != "" {
		r.add(res, Phase{Name: "prefill", Error: pre[0].Error})
		return
	}
	blocks := size / bs
	// Random phases are time-based (fio's time_based, IOR's -D): they run
	// to the deadline, however fast the device, so start-up costs vanish.
	const steps = math.MaxInt64
	pick := func(w *Worker) (file, *rand.Rand) {
		f := fs[0]
		if !shared {
			f = fs[w.ID]
		}
		return f, rand.New(rand.NewPCG(uint64(w.ID)+1, uint64(bs)))
	}
	rw, err := r.T.OpenRW(r.ctx, fs[0].path)
	if err == nil {
		rw.Close()
		// The timed writes must not inherit the prefill's page cache:
		// the large folios its 4 MiB writes leave make every later 4 KiB
		// write walk a folio's worth of buffer heads (4× slower on ext4
		// with Linux 6.18). fio starts each job with the file's cache
		// invalidated for the same reason.
		cache := r.T.DropCache(r.ctx, r.dir(r.cur.Scenario))
		ph := r.runPhase(PhaseSpec{Name: "randwrite " + label, Workers: r.Workers, Deadline: r.S.Deadline, Work: func(w *Worker) error {
			f, rng := pick(w)
			h, err := r.T.OpenRW(w.Ctx(), f.path)
			if err != nil {
				return err
			}
			var i int64
			for ; w.More(i, steps); i++ {
				off := rng.Int64N(blocks) * bs
				t0 := now()
				if _, err := h.WriteAt(r.pat.at(f.seed, off, int(bs)), off); err != nil {
					h.Close()
					return err
				}
				w.Op(t0, bs)
			}
			w.Finish(i)
			return h.Close()
		}})
		ph.Durability = "fsync before close, inside the timed region"
		ph.Cache = cache
		ph.Series, ph.X = "randwrite", float64(bs)
		r.add(res, ph)
	} else {
		r.add(res, Phase{Name: "randwrite " + label, Skipped: err.Error()})
	}
	cache := r.T.DropCache(r.ctx, r.dir(r.cur.Scenario))
	ph := r.runPhase(PhaseSpec{Name: "randread " + label, Workers: r.Workers, Deadline: r.S.Deadline, Setup: readBuffer(bs), Work: func(w *Worker) error {
		f, rng := pick(w)
		h, err := r.T.Open(w.Ctx(), f.path)
		if err != nil {
			return err
		}
		defer h.Close()
		buf := w.buf
		var i int64
		for ; w.More(i, steps); i++ {
			off := rng.Int64N(blocks) * bs
			t0 := now()
			if _, err := h.ReadAt(buf, off); err != nil {
				return fmt.Errorf("read %s at %d: %w", f.path, off, err)
			}
			w.Op(t0, bs)
			if r.Verify != "off" && !r.pat.check(f.seed, off, buf) {
				return &verifyError{path: f.path, off: off, n: bs}
			}
		}
		w.Finish(i)
		return nil
	}})
	ph.Cache, ph.Verify = cache, "every block compared inside the timed read"
	if r.Verify == "off" {
		ph.Verify = "off"
	}
	if containsVerify(ph.Error) {
		ph.VerifyErrors++
	}
	ph.Series, ph.X = "randread", float64(bs)
	r.add(res, ph)
}
