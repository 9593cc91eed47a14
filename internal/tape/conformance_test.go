package tape_test

import (
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tape/tapetest"
)

// The emulator passes the library conformance suite, its cartridges'
// files going through a faultfs so that the suite can crash it.
func TestEmulatorConformance(t *testing.T) {
	var disks tapetest.Disks
	tapetest.Run(t, tapetest.Harness{
		Open: func(t *testing.T, dir string, o tapetest.Options) tape.Library {
			e, err := tape.OpenEmulator(dir, tape.Options{Drives: o.Drives, Cartridges: o.Cartridges, Capacity: o.Capacity,
				Clock: clock.NewInstant(time.Time{}), FS: disks.For(dir)})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Crash:  disks.Crash,
		Faults: func(l tape.Library) tapetest.Faults { return tapetest.FaultsOf(l.(*tape.Emulator)) },
	})
}
