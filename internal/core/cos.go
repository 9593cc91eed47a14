package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-storage/strata/internal/api"
)

// classes is an immutable set of classes of service: edits swap in a new
// one, so readers on every request path take no lock.
type classes struct {
	byName map[string]COS
	list   []COS // configuration order, then classes added at run time
}

func newClasses(list []COS) *classes {
	cs := &classes{byName: map[string]COS{}}
	for _, k := range list {
		cs = cs.with(k)
	}
	return cs
}

// with returns a copy of cs with k added or replaced.
func (cs *classes) with(k COS) *classes {
	out := &classes{byName: make(map[string]COS, len(cs.byName)+1)}
	replaced := false
	for _, o := range cs.list {
		if o.Name == k.Name {
			o, replaced = k, true
		}
		out.list = append(out.list, o)
		out.byName[o.Name] = o
	}
	if !replaced {
		out.list = append(out.list, k)
		out.byName[k.Name] = k
	}
	return out
}

func checkCOS(k COS) error {
	if k.Name == "" || k.StripeWidth < 1 || k.StripeUnit < 1 || k.Pool == "" || k.TapeCopies < 0 || (k.TapeOnly && k.TapeCopies == 0) {
		return api.Errorf(api.ErrInvalid, "class of service %q: needs a name, a pool, stripe width ≥ 1, stripe unit ≥ 1, tape copies ≥ 0 (≥ 1 when tape only)", k.Name)
	}
	return nil
}

// classStore holds the current classes.
type classStore struct {
	cur atomic.Pointer[classes]
	mu  sync.Mutex // serialises edits
}

// class returns the class of service name.
func (c *Core) class(name string) (COS, bool) {
	k, ok := c.cos.cur.Load().byName[name]
	return k, ok
}

// classList returns every class of service.
func (c *Core) classList() []COS { return c.cos.cur.Load().list }

// loadClasses starts from the configuration and applies the classes stored
// in the catalog (edits made at run time win over the file).
func (c *Core) loadClasses(ctx context.Context, list []COS) error {
	for _, k := range list {
		if err := checkCOS(k); err != nil {
			return fmt.Errorf("core: %w", err)
		}
	}
	cs := newClasses(list)
	stored, err := c.store.ClassesOfService(ctx)
	if err != nil {
		return err
	}
	for _, k := range stored {
		cs = cs.with(k)
	}
	c.cos.cur.Store(cs)
	return nil
}

// SetCOS defines or changes a class of service. It is stored in the
// catalog and overrides the configuration's class of that name. A change
// applies to new files at once and to existing ones from then on (their
// migration, for example, adds the tape copies a class now asks for).
// Admin only.
func (c *Core) SetCOS(ctx context.Context, r api.COS) (api.COS, error) {
	if _, err := admin(ctx, "cos set "+r.Name); err != nil {
		return r, err
	}
	k := COS{Name: r.Name, Pool: r.Pool, StripeWidth: r.StripeWidth, StripeUnit: r.StripeUnit, TapeCopies: r.TapeCopies, TapeOnly: r.TapeOnly}
	if err := checkCOS(k); err != nil {
		return r, err
	}
	c.cos.mu.Lock()
	defer c.cos.mu.Unlock()
	if err := c.store.PutCOS(ctx, k); err != nil {
		return r, fmt.Errorf("cos %s: %w", k.Name, err)
	}
	c.cos.cur.Store(c.cos.cur.Load().with(k))
	c.log.Info("core: class of service set", "name", k.Name, "pool", k.Pool, "stripes", k.StripeWidth, "tape_copies", k.TapeCopies, "tape_only", k.TapeOnly)
	r.Default = k.Name == c.cfg.DefaultCOS
	return r, nil
}

// ClassesOfService lists the classes of service in configuration order.
func (c *Core) ClassesOfService() []api.COS {
	var out []api.COS
	for _, k := range c.classList() {
		out = append(out, api.COS{Name: k.Name, Pool: k.Pool, StripeWidth: k.StripeWidth, StripeUnit: k.StripeUnit, TapeCopies: k.TapeCopies, TapeOnly: k.TapeOnly, Default: k.Name == c.cfg.DefaultCOS})
	}
	return out
}

// defaultPool is the disk pool of the default class of service.
func (c *Core) defaultPool() string {
	k, _ := c.class(c.cfg.DefaultCOS)
	return k.Pool
}
