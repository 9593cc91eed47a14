package tape_test

import (
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/fsio/faultfs"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tape/tapetest"
)

// The emulator passes the library conformance suite, its cartridges'
// files going through a faultfs so that the suite can crash it.
func TestEmulatorConformance(t *testing.T) {
	var mu sync.Mutex
	fss := map[string]*faultfs.FS{} // one per library directory
	fsFor := func(dir string) *faultfs.FS {
		mu.Lock()
		defer mu.Unlock()
		if fss[dir] == nil {
			fss[dir] = faultfs.New(fsio.OS)
		}
		return fss[dir]
	}
	tapetest.Run(t, tapetest.Harness{
		Open: func(t *testing.T, dir string, o tapetest.Options) tape.Library {
			e, err := tape.OpenEmulator(dir, tape.Options{Drives: o.Drives, Cartridges: o.Cartridges, Capacity: o.Capacity,
				Clock: clock.NewInstant(time.Time{}), FS: fsFor(dir)})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Crash: func(t *testing.T, dir string) {
			fs := fsFor(dir)
			fs.Crash()
			if err := fs.Restore(); err != nil {
				t.Fatal(err)
			}
		},
		Faults: func(l tape.Library) tapetest.Faults { return emulatorFaults{l.(*tape.Emulator)} },
	})
}

type emulatorFaults struct{ e *tape.Emulator }

func (f emulatorFaults) FailDrive(drive string, failed bool)   { f.e.FailDrive(drive, failed) }
func (f emulatorFaults) SetUnreadable(volume string, bad bool) { f.e.SetUnreadable(volume, bad) }
func (f emulatorFaults) FailRobot(n int)                       { f.e.FailRobot(n) }
