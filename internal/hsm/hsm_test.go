package hsm

import (
	"fmt"
	"sync"
	"testing"

	"github.com/strata-storage/strata/internal/tape"
)

// Drives choosing a cartridge at the same moment each get a different one
// and none fails: the choice and the reservation are one step (a check
// followed by a separate reservation once let two drives settle on the same
// cartridge and the loser's migration fail with "busy").
func TestPickVolumeConcurrent(t *testing.T) {
	const drives = 8
	lib, err := tape.OpenEmulator(t.TempDir(), tape.Options{Drives: drives, Cartridges: drives, Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 50; round++ {
		h := New(Config{Library: lib}, nil, nil, nil)
		got := make([]string, drives)
		errs := make([]error, drives)
		var wg sync.WaitGroup
		for i := range drives {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = h.pickVolume(fmt.Sprintf("drive%d", i), "", 1<<20, nil)
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		for i := range drives {
			if errs[i] != nil {
				t.Fatalf("round %d: drive%d: %v", round, i, errs[i])
			}
			if j, ok := seen[got[i]]; ok {
				t.Fatalf("round %d: drive%d and drive%d both got %s", round, j, i, got[i])
			}
			seen[got[i]] = i
		}
	}
}
