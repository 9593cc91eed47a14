package tapetest

import (
	"sync"
	"testing"

	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
	"github.com/strata-storage/strata/internal/tape"
)

// Disks keeps one crashable file system per library directory, for
// harnesses whose libraries keep cartridges in files: Open takes For(dir)
// and Harness.Crash is Crash.
type Disks struct {
	mu  sync.Mutex
	fss map[string]*faultfs.FS
}

// For is dir's file system.
func (d *Disks) For(dir string) *faultfs.FS {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fss == nil {
		d.fss = map[string]*faultfs.FS{}
	}
	if d.fss[dir] == nil {
		d.fss[dir] = faultfs.New(fsio.OS)
	}
	return d.fss[dir]
}

// Crash drops what dir's file system had not synced.
func (d *Disks) Crash(t *testing.T, dir string) {
	fs := d.For(dir)
	fs.Crash()
	if err := fs.Restore(); err != nil {
		t.Fatal(err)
	}
}

// FaultsOf is the suite's Faults of a library that takes injected ones.
func FaultsOf(fi tape.FaultInjector) Faults { return injector{fi} }

type injector struct{ fi tape.FaultInjector }

func (f injector) FailDrive(drive string, failed bool)    { f.fi.FailDrive(drive, failed) }
func (f injector) SetUnreadable(volume string, bad bool)  { f.fi.SetUnreadable(volume, bad) }
func (f injector) SetWriteErrors(volume string, bad bool) { f.fi.SetWriteErrors(volume, bad) }
func (f injector) FailRobot(n int)                        { f.fi.FailRobot(n) }
