package fsio

import "golang.org/x/sys/unix"

// WriteBehindWindow is how much of a streaming write WriteBehind lets
// gather in the page cache before it starts that window's writeback.
const WriteBehindWindow = 32 << 20

// WriteBehind keeps a file written as a stream from piling up in the page
// cache: each window filled has its writeback started at once
// (sync_file_range), and a retire goroutine waits for it and drops it
// from the cache, at most two windows behind. A mover's data is not read
// back soon, and leaving gigabytes of it cached only made every later
// write pay for reclaiming that memory (measured: 400 MB/s with the cache
// full of old writes, 2.8 GB/s without); waiting in the writer itself
// stalled the stream on the shared disk's writeback. The emulated tape
// drive streams its tape file to the host's disk the same way, as a drive
// streams to tape, so that a flush at the end has little left to sync.
// These are hints: errors are ignored, and the final fsync reports real
// ones.
type WriteBehind struct {
	f       File
	flushed int64         // bytes handed to writeback
	retire  chan [2]int64 // windows to wait for and drop, in order
	retired chan struct{} // closed when the retire goroutine ends
}

// NewWriteBehind watches f, written in order from offset 0.
func NewWriteBehind(f File) *WriteBehind { return &WriteBehind{f: f} }

// Wrote says the file now holds n bytes; a full window starts writeback.
func (w *WriteBehind) Wrote(n int64) {
	if n-w.flushed < WriteBehindWindow {
		return
	}
	fd := int(w.f.OS().Fd())
	unix.SyncFileRange(fd, w.flushed, n-w.flushed, unix.SYNC_FILE_RANGE_WRITE)
	if w.retire == nil {
		w.retire, w.retired = make(chan [2]int64, 2), make(chan struct{})
		go func() {
			defer close(w.retired)
			for r := range w.retire {
				unix.SyncFileRange(fd, r[0], r[1], unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
				unix.Fadvise(fd, r[0], r[1], unix.FADV_DONTNEED)
			}
		}()
	}
	w.retire <- [2]int64{w.flushed, n - w.flushed}
	w.flushed = n
}

// Skip says the first n bytes are not in the page cache (written with
// O_DIRECT): nothing to write back.
func (w *WriteBehind) Skip(n int64) { w.flushed = n }

// Stop waits for the retire goroutine to finish with the file; call it
// before the file is closed.
func (w *WriteBehind) Stop() {
	if w.retire != nil {
		close(w.retire)
		<-w.retired
		w.retire = nil
	}
}
