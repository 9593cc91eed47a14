package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/internal/fsio"
)

// Small objects are made durable together: the group commit of the data
// side. A small object written and fsynced on its own costs the file
// system a journal commit for the file and another for its directory
// entry, each a few device writes and a cache flush; on a virtual disk
// every one of those is a trip through the hypervisor. When many small
// objects arrive at once (a `put` of many files, S3 PUTs, `cp -a` through
// the mount), one syncfs(2) of their file system makes all of them — data,
// inodes and directory entries — durable in one journal commit, with their
// data written back side by side. Writers that arrive while a sync runs
// wait for the next one, so a lone writer pays one sync, as before, and a
// crowd pays one sync per group.
//
// syncfs writes back everything dirty on the file system, Strata's or not,
// so a device should have its file system to itself (as a production disk
// does); on a shared one the sync also carries the others' dirty pages.
// Large objects are written with O_DIRECT and fsynced alone: they leave
// nothing dirty for a neighbour's group sync to carry, and their own fsync
// covers them without waiting on anyone.

// smallObject is the largest object made durable by a group sync: one
// checksum chunk. Larger objects stream with O_DIRECT and their own fsync.
const smallObject = ChunkSize

// fsSyncer runs the group syncs of one file system, shared by every device
// on it that reaches it through the same fsio.FS.
type fsSyncer struct {
	id   syncerKey
	fd   fsio.File // a directory on the file system, for syncfs
	refs int       // devices using it (under syncers.mu)

	// syncfs is fd.SyncFS; tests hold it to watch writers group.
	syncfs func() error
	syncs  atomic.Int64 // syncs run

	mu   sync.Mutex
	next *syncGroup    // writers waiting for a sync not yet started
	kick chan struct{} // wakes the sync goroutine; closed to stop it
	done chan struct{} // closed when the sync goroutine ends
}

// syncGroup is the writers one sync covers.
type syncGroup struct {
	done chan struct{}
	err  error
	n    int // writers in it
}

// syncerKey names a file system as devices reach it: a device whose files
// go through a test's faultfs must have its syncs seen by that FS.
type syncerKey struct {
	fs  fsio.FS
	dev uint64 // the file system's device number
}

var syncers = struct {
	sync.Mutex
	m map[syncerKey]*fsSyncer
}{m: map[syncerKey]*fsSyncer{}}

// fsID returns the number of the file system dir is on.
func fsID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Dev, nil
}

// mountPoint returns the mount point of file system dev, on which dir
// lies, from /proc/self/mountinfo; failing that, its device number.
func mountPoint(dir string, dev uint64) string {
	name := fmt.Sprintf("dev %d:%d", unix.Major(dev), unix.Minor(dev))
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return name
	}
	want := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	best := ""
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mount-point options ...
		f := strings.Fields(line)
		if len(f) < 5 || f[2] != want {
			continue
		}
		mp := unescapeMount(f[4])
		// The longest mount point of that device containing dir: a
		// device mounted twice (bind mounts) has one per place.
		if strings.HasPrefix(dir+"/", strings.TrimSuffix(mp, "/")+"/") && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return name
	}
	return best
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// syncerFor returns the syncer of dir's file system, starting it for the
// first device there.
func syncerFor(fs fsio.FS, dir string) (*fsSyncer, error) {
	dev, err := fsID(dir)
	if err != nil {
		return nil, err
	}
	id := syncerKey{fs, dev}
	syncers.Lock()
	defer syncers.Unlock()
	if s := syncers.m[id]; s != nil {
		s.refs++
		return s, nil
	}
	fd, err := fs.Open(dir)
	if err != nil {
		return nil, err
	}
	s := &fsSyncer{id: id, fd: fd, refs: 1, syncfs: fd.SyncFS, kick: make(chan struct{}, 1), done: make(chan struct{})}
	syncers.m[id] = s
	go s.loop()
	return s, nil
}

// release drops a device's use of the syncer; the last one stops it.
func (s *fsSyncer) release() {
	syncers.Lock()
	defer syncers.Unlock()
	if s.refs--; s.refs > 0 {
		return
	}
	delete(syncers.m, s.id)
	close(s.kick)
	<-s.done
	s.fd.Close()
}

func (s *fsSyncer) loop() {
	defer close(s.done)
	for range s.kick {
		s.mu.Lock()
		g := s.next
		s.next = nil
		s.mu.Unlock()
		if g == nil {
			continue
		}
		s.syncs.Add(1)
		if err := s.syncfs(); err != nil {
			g.err = fmt.Errorf("syncfs: %w", err)
		}
		close(g.done)
	}
}

// queued is how many writers wait for the next sync.
func (s *fsSyncer) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		return 0
	}
	return s.next.n
}

// wait returns once everything the caller wrote before calling it is
// durable: after the next sync to start, which it asks for.
func (s *fsSyncer) wait() error {
	s.mu.Lock()
	if s.next == nil {
		s.next = &syncGroup{done: make(chan struct{})}
	}
	g := s.next
	g.n++
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // a kick is pending: the loop will take this group too
	}
	<-g.done
	return g.err
}
