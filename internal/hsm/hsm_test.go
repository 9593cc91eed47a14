package hsm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
	"github.com/strata-storage/strata/internal/sched"
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

// A cartridge a damaged tape file was read from is never chosen for
// writing, says why, keeps its state in the catalog for the next engine (a
// restart, a standby taking over), and is writable again once an admin
// puts it back in service.
func TestReadOnlyCartridge(t *testing.T) {
	ctx := context.Background()
	lib, err := tape.OpenEmulator(t.TempDir(), tape.Options{Drives: 2, Cartridges: 2, Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	carts := lib.Cartridges()
	bad, good := carts[0].Volume, carts[1].Volume
	h := New(Config{Library: lib}, nil, store, nil)
	h.cartridgeDamaged(ctx, bad, errors.New("first"))
	h.cartridgeDamaged(ctx, bad, errors.New("second"))
	for i := range 4 {
		v, err := h.pickVolume(fmt.Sprintf("drive%d", i%2), "", 1<<20, nil)
		if err != nil || v != good {
			t.Fatalf("pick %d: %s, %v (want %s: %s is read-only)", i, v, err, good, bad)
		}
		h.mu.Lock()
		delete(h.reserved, v)
		h.mu.Unlock()
	}
	if _, err := h.pickVolume("drive0", "", 1<<20, map[string]bool{good: true}); err == nil || !strings.Contains(err.Error(), "1 read-only after damage") {
		t.Fatalf("no writable cartridge left: %v", err)
	}

	why := func(h *Engine) string {
		for _, c := range h.Library().Cartridges {
			if c.Volume == bad {
				return c.OutOfService
			}
		}
		return "no cartridge " + bad
	}
	again := New(Config{Library: lib}, nil, store, nil)
	if got := why(again); got != "read-only: 2 damaged tape file(s), the last: second" {
		t.Fatalf("the next engine sees %q", got)
	}
	again.cartridgeDamaged(ctx, bad, errors.New("third"))
	if got := why(again); got != "read-only: 3 damaged tape file(s), the last: third" {
		t.Fatalf("counted on from the catalog: %q", got)
	}
	if err := again.SetService(ctx, api.ServiceChange{Volume: bad, Online: true}); err != nil {
		t.Fatal(err)
	}
	if got := why(New(Config{Library: lib}, nil, store, nil)); got != "" {
		t.Fatalf("put back in service, the next engine sees %q", got)
	}
}

// Migration and recalls never reach for the same cartridge: the one a
// migration stream has chosen for its drive is in that drive to the
// recall scheduler before the mount shows it there, and a writer never
// picks a cartridge a recall batch has (which its drive may still be
// mounting). Either race made the loser's mount fail with "busy" and its
// recalls wait for a retry (bench/hsmbench --parts mixed).
func TestMigrationAndRecallsShareCartridges(t *testing.T) {
	lib, err := tape.OpenEmulator(t.TempDir(), tape.Options{Drives: 2, Cartridges: 3, Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Library: lib}, nil, nil, nil)
	now := h.clk.Now()
	recallOn := func(vol string, id int64) {
		h.sched.Add(sched.Request{ID: id, Key: fmt.Sprint(id), Volume: vol, Offset: 1 << 20, Size: 1 << 20, Priority: 1, Queued: now})
	}

	// A writer on drive1 chooses a cartridge; recalls for it arrive.
	v, err := h.pickVolume("drive1", "", 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.busy["drive1"] = "migrate"
	recallOn(v, 1)
	ds := h.sched.Next(now, h.schedDrivesLocked(lib.Drives()), 1<<40)
	h.mu.Unlock()
	if len(ds) != 0 {
		t.Fatalf("recalls of %s, which drive1 is about to write, decided %+v", v, ds)
	}
	h.releaseDrive("drive1")

	// Now a recall batch takes a cartridge on drive0; a writer choosing
	// next must leave it.
	h.mu.Lock()
	ds = h.sched.Next(now, h.schedDrivesLocked(lib.Drives()), 1<<40)
	h.mu.Unlock()
	if len(ds) != 1 || ds[0].Volume != v {
		t.Fatalf("with drive1 free, the recalls of %s: %+v", v, ds)
	}
	for i := range 2 {
		w, err := h.pickVolume("drive1", "", 1<<20, nil)
		if err != nil || w == v {
			t.Fatalf("pick %d: %s, %v (%s is %s's, for recalls)", i, w, err, v, ds[0].Drive)
		}
		h.mu.Lock()
		delete(h.reserved, w)
		h.mu.Unlock()
	}
}
