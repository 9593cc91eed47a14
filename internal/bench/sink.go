package bench

import (
	"context"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// sinkTarget writes everything a read phase reads into a local file in
// dir and fsyncs it when the reader closes, as `strata get` does (a
// temporary file, written as the data arrives, synced before the rename):
// a get's time then includes the client's own file system, which a read
// into memory does not see. The file is removed after its fsync.
type sinkTarget struct {
	Target
	dir      string
	prefault bool

	mu     sync.Mutex
	spares []*spare // staged for the phase's readers, one each
}

func (t *sinkTarget) Describe(ctx context.Context) TargetInfo {
	ti := t.Target.Describe(ctx)
	ti.Sink, ti.Prefault = t.dir, t.prefault
	return ti
}

// stage, with --prefault, is a reader's setup before the phase's clock
// starts: n bytes of memory touched, which the reader's sink file then
// takes page by page as the memory is freed just ahead of it. On a
// virtual machine whose host backs guest memory on first touch and takes
// back what stays free a few seconds, a file written into new pages pays
// the host's allocation (~0.4 GB/s on this project's machine, against
// ~5 GB/s into pages just used): a cost of the host, not of the client's
// file system, and one which pages it hits depends on what ran before.
//
// Staging is best effort: memory that cannot be mapped is not staged, and
// the reader writes into whatever pages it gets, as without --prefault.
func (t *sinkTarget) stage(n int64) {
	if !t.prefault || n <= 0 {
		return
	}
	m, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return
	}
	for i := 0; i < len(m); i += 4096 {
		m[i] = 1
	}
	t.mu.Lock()
	t.spares = append(t.spares, &spare{m: m})
	t.mu.Unlock()
}

// unstage releases what a phase staged and no reader took (one that
// failed before its Open).
func (t *sinkTarget) unstage() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spares {
		s.release()
	}
	t.spares = nil
}

func (t *sinkTarget) Open(ctx context.Context, p string) (Reader, error) {
	r, err := t.Target.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(t.dir, "sink-*")
	if err != nil {
		r.Close()
		return nil, err
	}
	sr := &sinkReader{Reader: r, f: f}
	t.mu.Lock()
	if k := len(t.spares); k > 0 {
		sr.spare, t.spares = t.spares[k-1], t.spares[:k-1]
	}
	t.mu.Unlock()
	return sr, nil
}

type sinkReader struct {
	Reader
	f       *os.File
	spare   *spare // --prefault: memory freed as the file grows
	written int64
}

// ReadAt reads and writes what it read at the same offset of the local
// file, so the page cache holds it until Close's fsync.
func (r *sinkReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	if n > 0 {
		r.written += int64(n)
		r.spare.free(r.written)
		if _, werr := r.f.WriteAt(p[:n], off); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (r *sinkReader) Close() error {
	r.spare.release()
	err := r.f.Sync()
	err = errors.Join(err, r.f.Close(), os.Remove(r.f.Name()), r.Reader.Close())
	return err
}

// spare is a reader's staged memory (sinkTarget.stage).
type spare struct {
	m     []byte
	freed int
}

// free gives back the staged pages up to a little ahead of upto bytes of
// sink file, a step at a time (one madvise per 16 MiB, not per request).
func (s *spare) free(upto int64) {
	const step, lead = 16 << 20, 32 << 20
	if s == nil {
		return
	}
	for s.freed < len(s.m) && int64(s.freed) < upto+lead {
		end := min(len(s.m), s.freed+step)
		unix.Madvise(s.m[s.freed:end], unix.MADV_DONTNEED)
		s.freed = end
	}
}

func (s *spare) release() {
	if s != nil && s.m != nil {
		unix.Munmap(s.m)
		s.m = nil
	}
}
