package core

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
)

func TestStripeLen(t *testing.T) {
	cases := []struct {
		size, unit int64
		w          int
		want       []int64
	}{
		{1, 4, 1, []int64{1}},
		{4, 4, 2, []int64{4, 0}},
		{5, 4, 2, []int64{4, 1}},
		{8, 4, 2, []int64{4, 4}},
		{9, 4, 2, []int64{5, 4}},
		{13, 4, 3, []int64{5, 4, 4}},
		{30, 4, 3, nil},
	}
	// The last case by hand: units (4 bytes) 0..6 are full (28 bytes), unit 7
	// holds 2. Stripe k gets units k, k+3, k+6: stripe 0 = 0,3,6 = 12; stripe 1
	// = 1,4,7 = 4+4+2 = 10; stripe 2 = 2,5 = 8.
	cases[len(cases)-1].want = []int64{12, 10, 8}
	for _, c := range cases {
		var sum int64
		for k := 0; k < c.w; k++ {
			got := stripeLen(c.size, c.unit, c.w, k)
			if got != c.want[k] {
				t.Errorf("stripeLen(%d, %d, %d, %d) = %d, want %d", c.size, c.unit, c.w, k, got, c.want[k])
			}
			sum += got
		}
		if sum != c.size {
			t.Errorf("size %d unit %d width %d: stripes hold %d bytes", c.size, c.unit, c.w, sum)
		}
	}
	// Exhaustively: lengths always add up.
	for size := int64(0); size < 200; size++ {
		for w := 1; w <= 5; w++ {
			var sum int64
			for k := 0; k < w; k++ {
				sum += stripeLen(size, 7, w, k)
			}
			if sum != size {
				t.Fatalf("size %d width %d: %d", size, w, sum)
			}
		}
	}
}

// Space placed for a recall stays held until the recall ends, so that
// recalls in flight, which the catalog does not count yet, cannot be
// promised the same free bytes twice.
func TestRecallPlacementHoldsSpace(t *testing.T) {
	// Either limit can bind: the catalog's capacity less use, or what the
	// mover last saw free on the file system.
	for _, lim := range []struct {
		name           string
		capacity, free int64
	}{
		{"capacity", 1500, 1 << 30},
		{"file system", 1 << 30, 1500},
	} {
		t.Run(lim.name, func(t *testing.T) {
			ctx := auth.With(context.Background(), auth.Root)
			c, _ := newTestCore(t, nil, api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: lim.capacity, Free: lim.free})
			steps := []struct {
				name    string
				need    int64
				hold    bool
				release int64 // release this much held space on d0 first
				fails   bool
			}{
				{"first recall", 1000, true, 0, false},
				{"second recall: 500 left", 1000, true, 0, true},
				{"a put that fits beside it", 500, false, 0, false},
				{"recall after the first ended", 1000, true, 1000, false},
			}
			for _, s := range steps {
				if s.release > 0 {
					c.release("d0", s.release)
				}
				_, err := c.place(ctx, "disk", 1, s.need, s.hold)
				if s.fails != (err != nil) {
					t.Fatalf("%s: %v", s.name, err)
				}
				if s.fails && !errors.Is(err, api.ErrNoSpace) {
					t.Fatalf("%s: %v, want no space", s.name, err)
				}
			}
			if got := c.held["d0"]; got != 1000 {
				t.Fatalf("held %d bytes, want 1000", got)
			}
		})
	}
}

// Creates racing for the last free space never reserve more than a device
// holds, whatever view of the devices each was placed from: the catalog
// refuses a reservation past capacity and the core places the file again
// on what is left. After the race, exactly as many files as fit were
// reserved (with three 300-byte files to a 1000-byte device). The store's
// device listing is slowed so that most creates place from a view that
// others' reservations have made stale.
func TestCreatesRacingForSpace(t *testing.T) {
	ctx := auth.With(context.Background(), auth.Root)
	c, store := newTestCore(t, func(s catalog.Store) catalog.Store { return staleDevices{s} },
		api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1000, Free: 1 << 30}, api.DeviceInfo{ID: "d1", Pool: "disk", Capacity: 1000, Free: 1 << 30})
	var wg sync.WaitGroup
	var mu sync.Mutex
	reserved := 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Create(ctx, api.CreateRequest{Path: fmt.Sprintf("/race%d", i), Size: 300})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				reserved++
			case !errors.Is(err, api.ErrNoSpace):
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	for i := 0; ; i++ {
		if _, err := c.Create(ctx, api.CreateRequest{Path: fmt.Sprintf("/after%d", i), Size: 300}); err != nil {
			if !errors.Is(err, api.ErrNoSpace) {
				t.Fatal(err)
			}
			break
		}
		reserved++
	}
	if reserved != 6 {
		t.Errorf("%d files reserved, want 6", reserved)
	}
	devs, err := store.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Used != 900 {
			t.Errorf("device %s: %d bytes reserved of %d, want 900", d.ID, d.Used, d.Capacity)
		}
	}
	if len(c.held) != 0 {
		t.Errorf("space still held after every create returned: %v", c.held)
	}
}

// A create the catalog refuses for lack of space is placed again, on a
// device with room: here its first placement saw d0 empty, as it was
// before another create filled it.
func TestCreatePlacedAgainWhenRefused(t *testing.T) {
	ctx := auth.With(context.Background(), auth.Root)
	var store *snapshotDevices
	c, db := newTestCore(t, func(s catalog.Store) catalog.Store { store = &snapshotDevices{Store: s}; return store },
		api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1000, Free: 1 << 30}, api.DeviceInfo{ID: "d1", Pool: "disk", Capacity: 900, Free: 1 << 30})
	var err error
	if store.snap, err = db.Devices(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreatePending(ctx, catalog.Bitfile{Size: 1000, StripeWidth: 1, StripeUnit: 1 << 20, Lease: 1 << 62,
		Segments: []catalog.Segment{{Device: "d0", Length: 1000}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Create(ctx, api.CreateRequest{Path: "/f", Size: 600})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Stripes) != 1 || resp.Stripes[0].Device != "d1" {
		t.Fatalf("placed on %+v, want d1", resp.Stripes)
	}
	if store.stale != 1 {
		t.Fatalf("%d stale answers, want the first only", store.stale)
	}
}

// newTestCore starts a core on a new SQLite catalog (seen through wrap,
// if given) with one class of service, "default": one stripe on pool
// "disk", whose devices devs are served by a local mover.
func newTestCore(t *testing.T, wrap func(catalog.Store) catalog.Store, devs ...api.DeviceInfo) (*Core, catalog.Store) {
	t.Helper()
	ctx := auth.With(context.Background(), auth.Root)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"), sqlite.Options{Sync: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var store catalog.Store = db
	if wrap != nil {
		store = wrap(db)
	}
	c, err := New(ctx, store, []byte("secret"), Config{COS: []COS{{Name: "default", Pool: "disk", StripeWidth: 1, StripeUnit: 1 << 20}}, DefaultCOS: "default"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.RegisterLocal(ctx, api.MoverRegistration{ID: "m0", Addr: "127.0.0.1:1", Devices: devs}); err != nil {
		t.Fatal(err)
	}
	return c, db
}

// staleDevices answers Devices as the catalog stood a moment ago.
type staleDevices struct{ catalog.Store }

func (s staleDevices) Devices(ctx context.Context) ([]catalog.Device, error) {
	d, err := s.Store.Devices(ctx)
	time.Sleep(2 * time.Millisecond)
	return d, err
}

// snapshotDevices answers its first Devices after snap is set with snap.
type snapshotDevices struct {
	catalog.Store
	snap  []catalog.Device
	stale int
}

func (s *snapshotDevices) Devices(ctx context.Context) ([]catalog.Device, error) {
	if s.snap != nil && s.stale == 0 {
		s.stale++
		return s.snap, nil
	}
	return s.Store.Devices(ctx)
}
