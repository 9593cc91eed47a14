package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/token"
)

func info(path string, in catalog.Inode) api.FileInfo {
	fi := api.FileInfo{Path: path, Name: in.Name, ID: in.ID, Mode: in.Mode, UID: in.UID, GID: in.GID, Size: in.Size,
		Mtime: time.Unix(0, in.Mtime), Ctime: time.Unix(0, in.Ctime), Atime: time.Unix(0, in.Atime), COS: in.COS, Type: api.TypeFile}
	if in.Kind == catalog.KindDir {
		fi.Type = api.TypeDir
	}
	if in.ID == catalog.RootID {
		fi.Name = "/"
	}
	return fi
}

func layout(b catalog.Bitfile) *api.Layout {
	l := &api.Layout{StripeWidth: b.StripeWidth, StripeUnit: b.StripeUnit}
	for _, s := range b.Segments {
		l.Segments = append(l.Segments, api.Segment{Copy: s.Copy, Stripe: s.Stripe, Device: s.Device, Object: s.Object, Length: s.Length, CRC32C: s.CRC32C})
	}
	for _, t := range b.Tapes {
		l.Tapes = append(l.Tapes, api.TapeCopy{Copy: t.Copy, Stripe: t.Stripe, Volume: t.Volume, Seq: t.Seq, Position: t.Position, Offset: t.Offset, Length: t.Length, CRC32C: t.CRC32C})
	}
	return l
}

// residency says where a file's data is; staging when a recall is queued.
func residency(r catalog.Residency, staging bool) string {
	switch {
	case r.OnDisk && r.Tapes > 0:
		return api.ResidencyBoth
	case r.OnDisk:
		return api.ResidencyDisk
	case staging:
		return api.ResidencyStaging
	default:
		return api.ResidencyTape
	}
}

func residencyOf(b catalog.Bitfile) catalog.Residency {
	copies := map[int]bool{}
	for _, t := range b.Tapes {
		copies[t.Copy] = true
	}
	return catalog.Residency{OnDisk: b.OnDisk, Tapes: len(copies)}
}

func (c *Core) statPath(ctx context.Context, p string) ([]string, catalog.Inode, error) {
	comps, err := catalog.SplitPath(p)
	if err != nil {
		return nil, catalog.Inode{}, err
	}
	in, err := c.resolve(ctx, comps)
	return comps, in, err
}

// Stat describes one entry, with its layout and fixity for files.
func (c *Core) Stat(ctx context.Context, p string) (api.FileInfo, error) {
	comps, in, err := c.statPath(ctx, p)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("stat: %w", err)
	}
	fi := info(joinPath(comps), in)
	if in.Bitfile != 0 {
		b, err := c.store.Bitfile(ctx, in.Bitfile)
		if err != nil {
			return fi, fmt.Errorf("stat %s: %w", fi.Path, err)
		}
		fi.Layout, fi.Fixity = layout(b), b.Fixity
		fi.Residency = residency(residencyOf(b), c.hsm.staging(b.ID))
	}
	return fi, nil
}

// List returns a page of a directory's entries in name order: those named
// after after, at most limit (0 or more than the configured page: a full
// page). more says the page was cut short and the next one starts after its
// last name. A file lists itself, on the first page.
func (c *Core) List(ctx context.Context, p, after string, limit int) (out []api.FileInfo, more bool, err error) {
	comps, in, err := c.statPath(ctx, p)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	if in.Kind != catalog.KindDir {
		if after != "" {
			return []api.FileInfo{}, false, nil
		}
		return []api.FileInfo{info(joinPath(comps), in)}, false, nil
	}
	if limit <= 0 || limit > c.cfg.ListPage {
		limit = c.cfg.ListPage
	}
	// One more than the page, to know whether another follows.
	ents, err := c.store.List(ctx, in.ID, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(ents) > limit {
		ents, more = ents[:limit], true
	}
	out = make([]api.FileInfo, len(ents))
	var ids []int64
	for i, e := range ents {
		out[i] = info(joinPath(append(comps[:len(comps):len(comps)], e.Name)), e)
		if e.Bitfile != 0 {
			ids = append(ids, e.Bitfile)
		}
	}
	// Where the data lives is part of a long listing (HSM users need it
	// to decide what to stage): one query for the whole page.
	res, err := c.store.Residency(ctx, ids)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", joinPath(comps), err)
	}
	for i, e := range ents {
		if r, ok := res[e.Bitfile]; ok && e.Bitfile != 0 {
			out[i].Residency = residency(r, c.hsm.staging(e.Bitfile))
		}
	}
	return out, more, nil
}

// Mkdir creates a directory (and, with Parents, its missing ancestors).
func (c *Core) Mkdir(ctx context.Context, r api.MkdirRequest) (api.FileInfo, error) {
	comps, err := catalog.SplitPath(r.Path)
	if err != nil {
		return api.FileInfo{}, err
	}
	if len(comps) == 0 {
		if r.Parents {
			return c.Stat(ctx, "/")
		}
		return api.FileInfo{}, api.Errorf(api.ErrExist, "mkdir /")
	}
	mode := r.Mode
	if mode == 0 {
		mode = 0o755
	}
	if r.COS != "" {
		if _, err := c.cosFor(r.COS); err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", r.Path, err)
		}
	}
	now := c.now().UnixNano()
	last := comps[len(comps)-1]
	mk := func(parent int64, name string) (catalog.Inode, error) {
		in := catalog.Inode{Parent: parent, Name: name, Mode: mode, UID: r.UID, GID: r.GID, Mtime: now, Ctime: now, Atime: now}
		if name == last {
			in.COS = r.COS // the new directory's default for what is created below it
		}
		return c.store.Mkdir(ctx, in)
	}
	if !r.Parents {
		parent, err := c.resolveDir(ctx, comps[:len(comps)-1])
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", r.Path, err)
		}
		in, err := mk(parent, comps[len(comps)-1])
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", joinPath(comps), err)
		}
		return info(joinPath(comps), in), nil
	}
	var in catalog.Inode
	parent := catalog.RootID
	for i, name := range comps {
		in, err = c.store.Lookup(ctx, parent, name)
		if errors.Is(err, api.ErrNotFound) {
			in, err = mk(parent, name)
			if errors.Is(err, api.ErrExist) { // lost a race: fine
				in, err = c.store.Lookup(ctx, parent, name)
			}
		}
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", joinPath(comps[:i+1]), err)
		}
		if in.Kind != catalog.KindDir {
			return api.FileInfo{}, api.Errorf(api.ErrNotDir, "mkdir %s", joinPath(comps[:i+1]))
		}
		parent = in.ID
	}
	return info(joinPath(comps), in), nil
}

// maxStripeUnit bounds a client's stripe unit override (a unit is the most
// one stripe holds before the next takes over; beyond this it means no
// striping at all, which a width of 1 says better).
const maxStripeUnit = 1 << 34

// chooseCOS picks a new file's class of service: the one asked for, else
// the one its directory inherited (the nearest ancestor directory's
// default), else the first size rule the file fits, else the server's
// default.
func (c *Core) chooseCOS(asked, inherited string, size int64) (COS, error) {
	if asked != "" {
		return c.cosFor(asked)
	}
	if inherited != "" {
		return c.cosFor(inherited)
	}
	for _, r := range c.cfg.SizeRules {
		if size <= r.MaxSize {
			return c.cosFor(r.COS)
		}
	}
	return c.cosFor("")
}

func (c *Core) cosFor(name string) (COS, error) {
	if name == "" {
		name = c.cfg.DefaultCOS
	}
	k, ok := c.class(name)
	if !ok {
		return k, api.Errorf(api.ErrInvalid, "no class of service %q", name)
	}
	return k, nil
}

func fileMode(m uint32) uint32 {
	if m == 0 {
		return 0o644
	}
	return m & 0o7777
}

// Create returns a write layout for a new file, or commits it at once when
// it is empty.
func (c *Core) Create(ctx context.Context, r api.CreateRequest) (api.CreateResponse, error) {
	dirComps, name, err := splitParent(r.Path)
	if err != nil {
		return api.CreateResponse{}, err
	}
	if r.Size < 0 {
		return api.CreateResponse{}, api.Errorf(api.ErrInvalid, "create %s: negative size", r.Path)
	}
	dir, err := c.resolveDirCOS(ctx, dirComps)
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", r.Path, err)
	}
	parent := dir.id
	k, err := c.chooseCOS(r.COS, dir.cos, r.Size)
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", r.Path, err)
	}
	path := joinPath(append(dirComps, name))
	now := c.now().UnixNano()
	in := catalog.Inode{Parent: parent, Name: name, Mode: fileMode(r.Mode), UID: r.UID, GID: r.GID, Mtime: now, Ctime: now, Atime: now, COS: k.Name}
	if r.Size == 0 {
		in, err := c.store.Commit(ctx, in, nil, r.Overwrite)
		if err != nil {
			return api.CreateResponse{}, fmt.Errorf("create %s: %w", path, err)
		}
		fi := info(path, in)
		return api.CreateResponse{File: &fi}, nil
	}
	// Fail before any data moves if the name is taken.
	if old, err := c.store.Lookup(ctx, parent, name); err == nil {
		if old.Kind == catalog.KindDir {
			return api.CreateResponse{}, api.Errorf(api.ErrIsDir, "create %s", path)
		}
		if !r.Overwrite {
			return api.CreateResponse{}, api.Errorf(api.ErrExist, "create %s", path)
		}
	} else if !errors.Is(err, api.ErrNotFound) {
		return api.CreateResponse{}, err
	}
	w := k.StripeWidth
	if r.Stripes > 0 {
		w = r.Stripes
	}
	if r.StripeUnit < 0 || r.StripeUnit > maxStripeUnit {
		return api.CreateResponse{}, api.Errorf(api.ErrInvalid, "create %s: stripe unit %d outside 1…%d", path, r.StripeUnit, int64(maxStripeUnit))
	}
	if r.StripeUnit > 0 {
		k.StripeUnit = r.StripeUnit
	}
	units := (r.Size + k.StripeUnit - 1) / k.StripeUnit
	b, picked, err := c.reserve(ctx, k, int(min(int64(w), units)), r.Size)
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", path, err)
	}
	devs := make([]string, len(picked))
	for i, p := range picked {
		devs[i] = p.dev.ID
	}
	c.mu.Lock()
	c.inflight[b.ID] = devs
	c.mu.Unlock()
	resp := api.CreateResponse{Bitfile: b.ID, StripeUnit: b.StripeUnit}
	for i, s := range b.Segments {
		resp.Stripes = append(resp.Stripes, target(picked[i].ep, api.StripeTarget{Stripe: s.Stripe, Device: s.Device, Object: s.Object, Length: s.Length,
			Token: c.sign(token.OpWrite, s.Device, s.Object, s.Length)}))
	}
	return resp, nil
}

// placeAttempts bounds how often a create is placed again after the
// catalog refused its reservation.
const placeAttempts = 3

// reserve places a new file of size bytes w stripes wide and records it
// as pending. The placement holds its bytes on the picked devices until
// the catalog has them, so concurrent creates see each other; the catalog
// has the last word (a create placed from a view of the devices read just
// before another's reservation committed), and when it refuses for lack of
// space the file is placed again on what is left.
func (c *Core) reserve(ctx context.Context, k COS, w int, size int64) (catalog.Bitfile, []candidate, error) {
	need := stripeLen(size, k.StripeUnit, w, 0)
	for attempt := 1; ; attempt++ {
		picked, err := c.place(ctx, k.Pool, w, need, true)
		if err != nil {
			return catalog.Bitfile{}, nil, err
		}
		n := len(picked) // fewer devices online than asked: stripe narrower
		b := catalog.Bitfile{Size: size, StripeWidth: n, StripeUnit: k.StripeUnit, Epoch: c.epoch, Lease: c.now().Add(c.cfg.TokenTTL).UnixNano()}
		for i, p := range picked {
			b.Segments = append(b.Segments, catalog.Segment{Stripe: i, Device: p.dev.ID, Length: stripeLen(size, k.StripeUnit, n, i)})
		}
		b, err = c.store.CreatePending(ctx, b)
		c.mu.Lock()
		for _, p := range picked {
			if c.held[p.dev.ID] -= need; c.held[p.dev.ID] <= 0 {
				delete(c.held, p.dev.ID)
			}
			if err != nil {
				if c.load[p.dev.ID]--; c.load[p.dev.ID] <= 0 {
					delete(c.load, p.dev.ID)
				}
			}
		}
		c.mu.Unlock()
		if err == nil || !errors.Is(err, api.ErrNoSpace) || attempt == placeAttempts {
			return b, picked, err
		}
	}
}

// Commit makes a written file visible, after checking every mover receipt.
func (c *Core) Commit(ctx context.Context, r api.CommitRequest) (api.FileInfo, error) {
	dirComps, name, err := splitParent(r.Path)
	if err != nil {
		return api.FileInfo{}, err
	}
	b, err := c.store.Bitfile(ctx, r.Bitfile)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	if b.State != catalog.Pending {
		return api.FileInfo{}, api.Errorf(api.ErrInvalid, "commit %s: write %d is no longer pending (expired or aborted)", r.Path, b.ID)
	}
	// The size at create reserved space and fixed the layout; a writer
	// that streamed less (a stonewalled benchmark, a stream that ended
	// early) commits what it wrote, laid out the same way.
	if r.Size < 0 || r.Size > b.Size || len(r.Segments) != len(b.Segments) {
		return api.FileInfo{}, api.Errorf(api.ErrInvalid, "commit %s: %d bytes in %d segments, layout has room for %d in %d", r.Path, r.Size, len(r.Segments), b.Size, len(b.Segments))
	}
	for i, got := range r.Segments {
		want := &b.Segments[i]
		if l := stripeLen(r.Size, b.StripeUnit, b.StripeWidth, i); got.Stripe != want.Stripe || got.Length != l {
			return api.FileInfo{}, api.Errorf(api.ErrInvalid, "commit %s: stripe %d has %d bytes, a file of %d bytes puts %d there", r.Path, got.Stripe, got.Length, r.Size, l)
		}
		want.Length = got.Length
		if !c.signer.CheckReceipt(got.Receipt, want.Device, want.Object, got.Length, got.CRC32C) {
			return api.FileInfo{}, api.Errorf(api.ErrDenied, "commit %s: stripe %d: no valid receipt from the mover of %s", r.Path, got.Stripe, want.Device)
		}
		want.CRC32C = got.CRC32C
	}
	b.Size, b.Fixity = r.Size, r.Fixity
	dir, err := c.resolveDirCOS(ctx, dirComps)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	parent := dir.id
	k, err := c.chooseCOS(r.COS, dir.cos, b.Size)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	now := c.now().UnixNano()
	in := catalog.Inode{Parent: parent, Name: name, Mode: fileMode(r.Mode), UID: r.UID, GID: r.GID, Mtime: now, Ctime: now, Atime: now, COS: k.Name}
	in, err = c.store.Commit(ctx, in, &b, r.Overwrite)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	c.settle(b.ID)
	fi := info(joinPath(append(dirComps, name)), in)
	fi.Layout, fi.Fixity = layout(b), b.Fixity
	return fi, nil
}

// Abort abandons a pending write; its space is reclaimed.
func (c *Core) Abort(ctx context.Context, r api.AbortRequest) error {
	err := c.store.Abort(ctx, r.Bitfile)
	c.settle(r.Bitfile)
	return err
}

// Open returns a read layout with tokens for every stripe.
func (c *Core) Open(ctx context.Context, p string) (api.OpenResponse, error) {
	comps, in, err := c.statPath(ctx, p)
	if err != nil {
		return api.OpenResponse{}, fmt.Errorf("open: %w", err)
	}
	path := joinPath(comps)
	if in.Kind == catalog.KindDir {
		return api.OpenResponse{}, api.Errorf(api.ErrIsDir, "open %s", path)
	}
	resp := api.OpenResponse{File: info(path, in)}
	if in.Bitfile == 0 {
		return resp, nil
	}
	b, err := c.store.Bitfile(ctx, in.Bitfile)
	if err != nil {
		return resp, fmt.Errorf("open %s: %w", path, err)
	}
	resp.File.Layout, resp.File.Fixity = layout(b), b.Fixity
	resp.File.Residency = residency(residencyOf(b), c.hsm.staging(b.ID))
	if !b.OnDisk {
		return resp, api.Errorf(api.ErrOffline, "open %s: on tape only; stage it (strata stage %s) or get it and wait", path, path)
	}
	resp.StripeUnit = b.StripeUnit
	for _, s := range b.Segments {
		ep, err := c.moverFor(s.Device)
		if err != nil {
			return resp, fmt.Errorf("open %s: stripe %d: %w", path, s.Stripe, err)
		}
		resp.Stripes = append(resp.Stripes, target(ep, api.StripeTarget{Stripe: s.Stripe, Device: s.Device, Object: s.Object, Length: s.Length, CRC32C: s.CRC32C,
			Token: c.sign(token.OpRead, s.Device, s.Object, 0)}))
	}
	c.touch(in)
	return resp, nil
}

// touch records an access, relatime-style: at most once a day unless the
// file changed since, so reads do not turn into a stream of catalog writes.
// Purge policies (least recently used first) read this. Updates are queued
// for Run's goroutine; under a flood of opens the excess is dropped (an
// access time is a hint, not data).
func (c *Core) touch(in catalog.Inode) {
	if in.Atime > in.Mtime && c.now().UnixNano()-in.Atime < int64(24*time.Hour) {
		return
	}
	select {
	case c.atimes <- in:
	default:
	}
}

// parentOf resolves the directory holding p and returns it with p's name;
// errors name the operation and the path.
func (c *Core) parentOf(ctx context.Context, op, p string) (int64, string, error) {
	dir, name, err := splitParent(p)
	if err != nil {
		return 0, "", err
	}
	parent, err := c.resolveDir(ctx, dir)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", op, p, err)
	}
	return parent, name, nil
}

// Rename moves an entry.
func (c *Core) Rename(ctx context.Context, r api.RenameRequest) error {
	sp, sName, err := c.parentOf(ctx, "rename", r.Src)
	if err != nil {
		return err
	}
	dp, dName, err := c.parentOf(ctx, "rename to", r.Dst)
	if err != nil {
		return err
	}
	moved, err := c.store.Rename(ctx, sp, sName, dp, dName, r.Overwrite, c.now().UnixNano())
	if moved.Kind == catalog.KindDir {
		c.dc.invalidate()
	}
	if err != nil {
		return fmt.Errorf("rename %s to %s: %w", r.Src, r.Dst, err)
	}
	return nil
}

// Remove deletes an entry.
func (c *Core) Remove(ctx context.Context, r api.RemoveRequest) error {
	parent, name, err := c.parentOf(ctx, "remove", r.Path)
	if err != nil {
		return err
	}
	gone, err := c.store.Remove(ctx, parent, name, r.Recursive)
	if gone.Kind == catalog.KindDir {
		c.dc.invalidate()
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", r.Path, err)
	}
	return nil
}

// SetAttr changes attributes.
func (c *Core) SetAttr(ctx context.Context, r api.SetAttrRequest) (api.FileInfo, error) {
	comps, in, err := c.statPath(ctx, r.Path)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("setattr: %w", err)
	}
	a := catalog.Attr{Mode: r.Mode, UID: r.UID, GID: r.GID, Ctime: c.now().UnixNano(), COS: r.COS}
	if r.COS != nil && *r.COS != "" {
		if _, err := c.cosFor(*r.COS); err != nil {
			return api.FileInfo{}, fmt.Errorf("setattr %s: %w", r.Path, err)
		}
	}
	if r.Mode != nil {
		m := *r.Mode & 0o7777
		a.Mode = &m
	}
	if r.Mtime != nil {
		t := r.Mtime.UnixNano()
		a.Mtime = &t
	}
	if r.Atime != nil {
		t := r.Atime.UnixNano()
		a.Atime = &t
	}
	in, err = c.store.SetAttr(ctx, in.ID, a)
	if in.Kind == catalog.KindDir && r.COS != nil {
		c.dc.invalidate() // what the directory hands down changed
	}
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("setattr %s: %w", r.Path, err)
	}
	return info(joinPath(comps), in), nil
}

// DF reports capacity and use per device and pool.
func (c *Core) DF(ctx context.Context) (api.DFResponse, error) {
	devs, err := c.store.Devices(ctx)
	if err != nil {
		return api.DFResponse{}, err
	}
	var out api.DFResponse
	pools := map[string]*api.PoolInfo{}
	var order []string
	for _, d := range devs {
		ep, err := c.moverFor(d.ID)
		c.mu.Lock()
		free := c.freeLocked(d)
		c.mu.Unlock()
		di := api.DeviceInfo{ID: d.ID, Pool: d.Pool, Mover: ep.Addr, Online: err == nil, Capacity: d.Capacity, Used: d.Used, Free: free, Bandwidth: d.Bandwidth}
		out.Devices = append(out.Devices, di)
		p := pools[d.Pool]
		if p == nil {
			p = &api.PoolInfo{Name: d.Pool}
			pools[d.Pool] = p
			order = append(order, d.Pool)
		}
		p.Devices++
		p.Capacity += di.Capacity
		p.Used += di.Used
		p.Free += di.Free
	}
	for _, name := range order {
		out.Pools = append(out.Pools, *pools[name])
	}
	return out, nil
}
