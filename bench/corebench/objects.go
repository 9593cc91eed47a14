package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// objectsMain compares two ways a mover could store many small objects
// durably, on the same file system in one run: a file per object (what
// internal/disk does: create, write, close; one syncfs per group of
// writers) and one pack file (each object at a 4 KiB-aligned offset, one
// fdatasync per group). 16 writers; the machine's CPU per object comes
// from /proc/stat, so the kernel's writeback threads count too. Each way
// writes into a new directory under dir: a directory just emptied would
// charge the file per object ext4's slow allocation of freed inodes.
//
//	corebench objects DIR COUNT SIZE
func objectsMain(dir string, count, size int) error {
	for _, mode := range []string{"files", "pack", "files", "pack"} {
		d := filepath.Join(dir, fmt.Sprintf("objects-%s-%d", mode, time.Now().UnixNano()))
		rate, us, err := storeObjects(mode, d, count, size)
		if err != nil {
			return err
		}
		fmt.Printf("%-5s %d × %d B: %.0f objects/s, %.1f µs of the machine's CPU an object\n", mode, count, size, rate, us)
	}
	return nil
}

func storeObjects(mode, dir string, count, size int) (rate, us float64, err error) {
	const writers, fanout = 16, 256
	for i := range fanout {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("%02x", i)), 0o755); err != nil {
			return 0, 0, err
		}
	}
	root, err := os.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	defer root.Close()
	var pack *os.File
	if mode == "pack" {
		if pack, err = os.OpenFile(filepath.Join(dir, "pack"), os.O_CREATE|os.O_RDWR, 0o600); err != nil {
			return 0, 0, err
		}
		defer pack.Close()
	}
	buf := make([]byte, size)
	record := int64(size+64+4095) &^ 4095 // the object and a header, aligned
	var next, end atomic.Int64
	g := groupSync{sync: func() error {
		if pack != nil {
			return unix.Fdatasync(int(pack.Fd()))
		}
		return unix.Syncfs(int(root.Fd()))
	}}
	g.cond = sync.NewCond(&g.mu)
	b0 := machineBusy()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(count); i = next.Add(1) {
				if pack != nil {
					off := end.Add(record) - record
					if _, err := pack.WriteAt(buf, off); err != nil {
						errs[w] = err
						return
					}
				} else {
					f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%02x", i%fanout), strconv.FormatInt(i, 10)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
					if err == nil {
						_, err = f.Write(buf)
						if cerr := f.Close(); err == nil {
							err = cerr
						}
					}
					if err != nil {
						errs[w] = err
						return
					}
				}
				if err := g.wait(); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	el := time.Since(t0).Seconds()
	return float64(count) / el, float64(machineBusy()-b0) * 1e6 / 100 / float64(count), nil
}

// groupSync makes a writer wait for a sync that starts after it asks:
// one writer syncs for every writer that asked meanwhile.
type groupSync struct {
	sync    func() error
	mu      sync.Mutex
	cond    *sync.Cond
	started int64 // syncs begun
	done    int64 // syncs ended
	running bool
	err     error
}

func (g *groupSync) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := g.started + 1 // a sync begun after this call
	for g.done < want {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := g.sync()
		g.mu.Lock()
		g.running, g.done = false, n
		if err != nil {
			g.err = err
		}
		g.cond.Broadcast()
	}
	return g.err
}

// machineBusy is the CPU time all CPUs spent busy, in clock ticks (1/100 s).
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var t int64
	for i, x := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(x, 10, 64)
		t += v
	}
	return t
}
