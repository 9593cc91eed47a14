package disk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Devices on one file system share one syncer, which stops with the last
// of them; a device on another file system (here /dev/shm, a tmpfs, when
// the test's temporary directory is elsewhere) has its own.
func TestSyncerPerFileSystem(t *testing.T) {
	root := t.TempDir()
	a, err := Open("a", filepath.Join(root, "a"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open("b", filepath.Join(root, "b"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.syncer != b.syncer {
		t.Fatal("two devices on one file system have different syncers")
	}
	s := a.syncer
	a.Close()
	select {
	case <-s.done:
		t.Fatal("the syncer stopped while a device still uses it")
	default:
	}
	put(t, b, "after-a-closed", []byte("still synced"))
	b.Close()
	<-s.done // stopped by the last device
	syncers.Lock()
	_, left := syncers.m[s.id]
	syncers.Unlock()
	if left {
		t.Fatal("a stopped syncer is still registered")
	}
	if id, err := fsID("/dev/shm"); err == nil && id != s.id.dev {
		c, err := Open("c", t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		shm := filepath.Join("/dev/shm", fmt.Sprintf("strata-disk-test-%d", id))
		d, err := Open("d", shm, Options{})
		if err != nil {
			t.Skip("no /dev/shm to open a device on:", err)
		}
		defer d.Close()
		t.Cleanup(func() { os.RemoveAll(shm) })
		if c.syncer == d.syncer {
			t.Fatal("devices on two file systems share a syncer")
		}
	}
}

// Small objects closed while a sync runs wait for the next one, which
// covers them all: here one sync holds while 64 objects close, and two
// syncs make all of them durable. Every object reads back whole; a large
// one keeps its own fsync.
func TestSmallObjectsGroupSync(t *testing.T) {
	d := openDev(t, Options{})
	s := d.syncer
	hold, held := make(chan struct{}), make(chan struct{})
	s.syncfs = func() error {
		if s.syncs.Load() == 1 {
			close(held)
			<-hold // the first sync waits until every writer queued
		}
		return s.fd.SyncFS()
	}
	first := make(chan error, 1)
	go func() { // the first sync, of an object of its own
		w, err := d.Create(context.Background(), "first", 5)
		if err == nil {
			if _, err = w.Write([]byte("first")); err == nil {
				err = w.Close()
			}
		}
		first <- err
	}()
	<-held
	var wg sync.WaitGroup
	const n = 64
	data := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i*97) }
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := data(i)
			w, err := d.Create(context.Background(), fmt.Sprintf("s%d", i), int64(len(p)))
			if err == nil {
				if !w.small || w.direct {
					err = fmt.Errorf("object of %d bytes: small %v, direct %v", len(p), w.small, w.direct)
				} else if _, err = w.Write(p); err == nil {
					err = w.Close()
				}
			}
			errs[i] = err
		}()
	}
	for s.queued() < n {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := s.syncs.Load(); got != 2 {
		t.Fatalf("%d syncs for %d objects closed while one ran, want 2", got, n+1)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		got, err := readAll(d, fmt.Sprintf("s%d", i))
		if err != nil || !bytes.Equal(got, data(i)) {
			t.Fatalf("object %d read back: %d bytes, %v", i, len(got), err)
		}
	}
	w, err := d.Create(context.Background(), "large", smallObject+1)
	if err != nil {
		t.Fatal(err)
	}
	if w.small {
		t.Fatal("an object larger than a chunk is made durable by a group sync")
	}
	w.Abort()
}
