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
