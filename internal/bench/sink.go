package bench

import (
	"context"
	"errors"
	"os"
)

// sinkTarget writes everything a read phase reads into a local file in
// dir and fsyncs it when the reader closes, as `strata get` does (a
// temporary file, written as the data arrives, synced before the rename):
// a get's time then includes the client's own file system, which a read
// into memory does not see. The file is removed after its fsync.
type sinkTarget struct {
	Target
	dir string
}

func (t *sinkTarget) Describe(ctx context.Context) TargetInfo {
	ti := t.Target.Describe(ctx)
	ti.Sink = t.dir
	return ti
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
	return &sinkReader{Reader: r, f: f}, nil
}

type sinkReader struct {
	Reader
	f *os.File
}

// ReadAt reads and writes what it read at the same offset of the local
// file, so the page cache holds it until Close's fsync.
func (r *sinkReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	if n > 0 {
		if _, werr := r.f.WriteAt(p[:n], off); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (r *sinkReader) Close() error {
	err := r.f.Sync()
	err = errors.Join(err, r.f.Close(), os.Remove(r.f.Name()), r.Reader.Close())
	return err
}
