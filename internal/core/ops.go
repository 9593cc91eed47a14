package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/token"
)

func info(path string, in catalog.Inode) api.FileInfo {
	fi := api.FileInfo{Path: path, Name: in.Name, ID: in.ID, Mode: in.Mode, UID: in.UID, GID: in.GID, Size: in.Size,
		Mtime: time.Unix(0, in.Mtime), Ctime: time.Unix(0, in.Ctime), Atime: time.Unix(0, in.Atime), COS: in.COS, Type: api.TypeFile}
	switch in.Kind {
	case catalog.KindDir:
		fi.Type = api.TypeDir
	case catalog.KindSymlink:
		fi.Type, fi.Target = api.TypeSymlink, in.Target
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

// residency is where bitfile's data is, as users see it (r: its copies):
// lost, disk, tape or both, or staging while a recall is queued.
func (c *Core) residency(bitfile int64, r catalog.Residency) string {
	switch {
	case c.lostFile(bitfile) != "":
		return api.ResidencyLost
	case r.OnDisk && r.Tapes > 0:
		return api.ResidencyBoth
	case r.OnDisk:
		return api.ResidencyDisk
	case c.hsm.Staging(bitfile):
		return api.ResidencyStaging
	}
	return api.ResidencyTape
}

func residencyOf(b catalog.Bitfile) catalog.Residency {
	copies := map[int]bool{}
	for _, t := range b.Tapes {
		copies[t.Copy] = true
	}
	return catalog.Residency{OnDisk: b.OnDisk, Tapes: len(copies)}
}

func (c *Core) statPath(ctx context.Context, who *auth.Identity, p string) ([]string, catalog.Inode, error) {
	comps, err := splitPath(p)
	if err != nil {
		return nil, catalog.Inode{}, err
	}
	in, err := c.resolve(ctx, who, comps)
	return comps, in, err
}

// Stat describes one entry, with its layout and fixity for files. It
// needs search on the directories above it, nothing on the entry.
func (c *Core) Stat(ctx context.Context, p string) (api.FileInfo, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.FileInfo{}, err
	}
	if err := scoped(who, auth.ScopeRead, p); err != nil {
		return api.FileInfo{}, err
	}
	comps, in, err := c.statPath(ctx, who, p)
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
		fi.Residency = c.residency(b.ID, residencyOf(b))
		fi.PinnedUntil = pinTime(b.PinnedUntil, c.now())
		fi.Lost = c.lostFile(b.ID)
	}
	return fi, nil
}

// List returns a page of a directory's entries in name order: those named
// after after, at most limit (0 or more than the configured page: a full
// page). more says the page was cut short and the next one starts after its
// last name. A file lists itself, on the first page. Listing a directory
// needs read and search on it.
func (c *Core) List(ctx context.Context, p, after string, limit int) (out []api.FileInfo, more bool, err error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := scoped(who, auth.ScopeRead, p); err != nil {
		return nil, false, err
	}
	comps, in, err := c.statPath(ctx, who, p)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	if in.Kind != catalog.KindDir {
		if after != "" {
			return []api.FileInfo{}, false, nil
		}
		return []api.FileInfo{info(joinPath(comps), in)}, false, nil
	}
	if err := may(who, in, joinPath(comps), joinPath(comps), auth.Read|auth.Exec); err != nil {
		return nil, false, err
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
			out[i].Residency = c.residency(e.Bitfile, r)
		}
	}
	return out, more, nil
}

// newEntry is a new entry's owner and mode: the caller owns it; its group
// is the caller's primary group, or the parent's when the parent has the
// set-group-ID bit (which a new directory then inherits, so a project
// tree stays in the project's group); a mode of 0 means def less the
// configured umask.
func (c *Core) newEntry(who *auth.Identity, parent dentry, mode, def uint32, dir bool) catalog.Inode {
	if mode == 0 {
		mode = def &^ c.cfg.Umask
	}
	in := catalog.Inode{Mode: mode & 0o7777, UID: who.UID, GID: who.GID}
	if parent.mode&0o2000 != 0 {
		in.GID = parent.gid
		if dir {
			in.Mode |= 0o2000
		}
	}
	return in
}

// Mkdir creates a directory (and, with Parents, its missing ancestors).
// Each directory created needs write and search on its parent.
func (c *Core) Mkdir(ctx context.Context, r api.MkdirRequest) (api.FileInfo, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.FileInfo{}, err
	}
	comps, err := splitPath(r.Path)
	if err != nil {
		return api.FileInfo{}, err
	}
	if err := checkMode(r.Mode, "mkdir "+r.Path); err != nil {
		return api.FileInfo{}, err
	}
	if len(comps) == 0 {
		if r.Parents {
			return c.Stat(ctx, "/")
		}
		return api.FileInfo{}, api.Errorf(api.ErrExist, "mkdir /")
	}
	if err := scoped(who, auth.ScopeCreate, joinPath(comps)); err != nil {
		return api.FileInfo{}, err
	}
	if r.COS != "" {
		if _, err := c.cosFor(r.COS); err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", r.Path, err)
		}
	}
	now := c.now().UnixNano()
	last := len(comps) - 1
	mk := func(parent dentry, i int) (catalog.Inode, error) {
		if err := mayDir(who, parent, joinPath(comps[:i]), joinPath(comps[:i+1]), auth.Write|auth.Exec); err != nil {
			return catalog.Inode{}, err
		}
		in := c.newEntry(who, parent, r.Mode, 0o777, true)
		in.Parent, in.Name, in.Mtime, in.Ctime, in.Atime = parent.id, comps[i], now, now, now
		if i == last {
			in.COS = r.COS // the new directory's default for what is created below it
		}
		return c.store.Mkdir(ctx, in)
	}
	if !r.Parents {
		parent, err := c.resolveDirCOS(ctx, who, comps[:last])
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", r.Path, err)
		}
		in, err := mk(parent, last)
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", joinPath(comps), err)
		}
		return info(joinPath(comps), in), nil
	}
	var in catalog.Inode
	for i, name := range comps {
		parent, err := c.resolveDirCOS(ctx, who, comps[:i])
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", joinPath(comps[:i+1]), err)
		}
		in, err = c.store.Lookup(ctx, parent.id, name)
		if errors.Is(err, api.ErrNotFound) {
			in, err = mk(parent, i)
			if errors.Is(err, api.ErrExist) { // lost a race: fine
				in, err = c.store.Lookup(ctx, parent.id, name)
			}
		}
		if err != nil {
			return api.FileInfo{}, fmt.Errorf("mkdir %s: %w", joinPath(comps[:i+1]), err)
		}
		if in.Kind != catalog.KindDir {
			return api.FileInfo{}, api.Errorf(api.ErrNotDir, "mkdir %s", joinPath(comps[:i+1]))
		}
	}
	return info(joinPath(comps), in), nil
}

// Symlink creates a symbolic link, which needs write and search on its
// parent as any new entry does. Its target is stored as given (any text
// up to MaxPathLen bytes without NUL: POSIX lets a link point anywhere) and
// never followed by the server.
func (c *Core) Symlink(ctx context.Context, r api.SymlinkRequest) (api.FileInfo, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.FileInfo{}, err
	}
	comps, err := splitPath(r.Path)
	if err != nil {
		return api.FileInfo{}, err
	}
	if len(comps) == 0 {
		return api.FileInfo{}, api.Errorf(api.ErrExist, "symlink /")
	}
	switch {
	case r.Target == "":
		return api.FileInfo{}, api.Errorf(api.ErrNotFound, "symlink %s: empty target", r.Path)
	case len(r.Target) > MaxPathLen:
		return api.FileInfo{}, api.Errorf(api.ErrInvalid, "symlink %s: target longer than %d bytes", r.Path, MaxPathLen)
	case strings.IndexByte(r.Target, 0) >= 0 || !utf8.ValidString(r.Target):
		return api.FileInfo{}, api.Errorf(api.ErrInvalid, "symlink %s: target %q holds a NUL or is not UTF-8", r.Path, r.Target)
	}
	p := joinPath(comps)
	if err := scoped(who, auth.ScopeCreate, p); err != nil {
		return api.FileInfo{}, err
	}
	last := len(comps) - 1
	parent, err := c.resolveDirCOS(ctx, who, comps[:last])
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("symlink %s: %w", p, err)
	}
	if err := mayDir(who, parent, joinPath(comps[:last]), p, auth.Write|auth.Exec); err != nil {
		return api.FileInfo{}, err
	}
	now := c.now().UnixNano()
	in := catalog.Inode{Parent: parent.id, Name: comps[last], Mode: 0o777, UID: who.UID, GID: who.GID, Mtime: now, Ctime: now, Atime: now, Target: r.Target}
	if parent.mode&0o2000 != 0 {
		in.GID = parent.gid
	}
	in, err = c.store.Symlink(ctx, in)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("symlink %s: %w", p, err)
	}
	return info(p, in), nil
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

// splitParent validates a path a caller sent and splits it into its
// directory's components and its name.
func splitParent(p string) ([]string, string, error) {
	comps, err := splitPath(p)
	if err != nil {
		return nil, "", err
	}
	if len(comps) == 0 {
		return nil, "", api.Errorf(api.ErrInvalid, "%q: the root has no parent", p)
	}
	return comps[:len(comps)-1], comps[len(comps)-1], nil
}

// writableDir resolves the directory a new entry goes in and checks that
// who may create there (write and search), and that a token allows op on
// the entry's path.
func (c *Core) writableDir(ctx context.Context, who *auth.Identity, dirComps []string, path, op string) (dentry, error) {
	if err := scoped(who, op, path); err != nil {
		return dentry{}, err
	}
	dir, err := c.resolveDirCOS(ctx, who, dirComps)
	if err != nil {
		return dentry{}, err
	}
	return dir, mayDir(who, dir, joinPath(dirComps), path, auth.Write|auth.Exec)
}

// fileRequest checks what a request that makes the file p sends: who
// calls, the path, the mode and the attributes.
func fileRequest(ctx context.Context, op, p string, mode uint32, xattrs map[string][]byte) (who *auth.Identity, dirComps []string, name string, err error) {
	if who, err = caller(ctx); err != nil {
		return nil, nil, "", err
	}
	if dirComps, name, err = splitParent(p); err != nil {
		return nil, nil, "", err
	}
	if err = checkMode(mode, op+" "+p); err != nil {
		return nil, nil, "", err
	}
	return who, dirComps, name, validXattrs(xattrs, op+" "+p)
}

// mayReplace checks that who may replace the entry name of dir, if there
// is one (see replaceable), where write on dir is not enough.
func (c *Core) mayReplace(ctx context.Context, who *auth.Identity, dir dentry, dirComps []string, name, path string) error {
	if !mustCheckReplace(who, dir) {
		return nil
	}
	old, err := c.store.Lookup(ctx, dir.id, name)
	if err != nil {
		return nil // nothing to replace
	}
	return replaceable(who, dir, joinPath(dirComps), old, path)
}

// mustCheckReplace says whether replacing an entry of dir needs more than
// the write permission on dir: a sticky directory, or scopes.
func mustCheckReplace(who *auth.Identity, dir dentry) bool {
	return stickyFor(who, dir) || who.Scopes != nil
}

// replaceable checks that who may replace old, an existing entry of dir:
// the sticky rule, and a token's modify scope.
func replaceable(who *auth.Identity, dir dentry, dirPath string, old catalog.Inode, path string) error {
	if err := scoped(who, auth.ScopeModify, path); err != nil {
		return err
	}
	return sticky(who, dir, dirPath, old, path)
}

// writeTarget checks that who may write path and returns its directory.
// A new entry needs write and search on the directory (and the create
// scope). With rewrite, an existing file is written into as write(2)
// does, not replaced as an entry: it needs write permission on the file
// (and the modify scope), not on the directory, and the file is returned
// so that its new version keeps its inode, owner, group, mode and class.
func (c *Core) writeTarget(ctx context.Context, who *auth.Identity, dirComps []string, name, path string, rewrite bool) (dentry, *catalog.Inode, error) {
	if !rewrite {
		dir, err := c.writableDir(ctx, who, dirComps, path, auth.ScopeCreate)
		return dir, nil, err
	}
	dir, err := c.resolveDirCOS(ctx, who, dirComps)
	if err != nil {
		return dentry{}, nil, err
	}
	if err := mayDir(who, dir, joinPath(dirComps), path, auth.Exec); err != nil {
		return dentry{}, nil, err
	}
	old, err := c.store.Lookup(ctx, dir.id, name)
	switch {
	case errors.Is(err, api.ErrNotFound) || err == nil && old.Kind == catalog.KindSymlink:
		dir, err := c.writableDir(ctx, who, dirComps, path, auth.ScopeCreate)
		return dir, nil, err
	case err != nil:
		return dentry{}, nil, err
	case old.Kind == catalog.KindDir:
		return dentry{}, nil, api.Errorf(api.ErrIsDir, "write %s", path)
	}
	if err := scoped(who, auth.ScopeModify, path); err != nil {
		return dentry{}, nil, err
	}
	if err := may(who, old, path, path, auth.Write); err != nil {
		return dentry{}, nil, err
	}
	return dir, &old, nil
}

// rewritten gives in, the new version of old, old's owner, group, mode
// and class; a writer other than the owner clears the set-user-ID and
// set-group-ID bits, as write(2) does.
func rewritten(who *auth.Identity, in *catalog.Inode, old *catalog.Inode) {
	in.UID, in.GID, in.Mode, in.COS = old.UID, old.GID, old.Mode, old.COS
	if !owns(who, *old) {
		in.Mode &^= 0o6000
	}
}

// Create returns a write layout for a new file, or commits it at once when
// it is empty. It needs write and search on the parent directory; with
// Overwrite, an existing file there is replaced as by a rename over it;
// with Rewrite, an existing file is written into (see writeTarget).
func (c *Core) Create(ctx context.Context, r api.CreateRequest) (api.CreateResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.CreateResponse{}, err
	}
	dirComps, name, err := splitParent(r.Path)
	if err != nil {
		return api.CreateResponse{}, err
	}
	if r.Size < 0 {
		return api.CreateResponse{}, api.Errorf(api.ErrInvalid, "create %s: negative size", r.Path)
	}
	if err := checkMode(r.Mode, "create "+r.Path); err != nil {
		return api.CreateResponse{}, err
	}
	if err := validXattrs(r.Xattrs, "create "+r.Path); err != nil {
		return api.CreateResponse{}, err
	}
	path := joinPath(append(dirComps, name))
	dir, old, err := c.writeTarget(ctx, who, dirComps, name, path, r.Rewrite)
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", r.Path, err)
	}
	parent := dir.id
	cos := r.COS
	if old != nil && cos == "" {
		cos = old.COS
	}
	k, err := c.chooseCOS(cos, dir.cos, r.Size)
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", r.Path, err)
	}
	// Fail before any data moves if the name is taken. A small file
	// moves too little to be worth it: the catalog's commit refuses a
	// taken name itself, and the lookup (a catalog read, a good part of a
	// small create's cost) is needed only to check a replacement against
	// the sticky bit or a token's scopes.
	if old == nil && (r.Size > checkTakenAbove || r.Overwrite && mustCheckReplace(who, dir)) {
		old, err := c.store.Lookup(ctx, parent, name)
		switch {
		case errors.Is(err, api.ErrNotFound):
		case err != nil:
			return api.CreateResponse{}, err
		case old.Kind == catalog.KindDir:
			return api.CreateResponse{}, api.Errorf(api.ErrIsDir, "create %s", path)
		case !r.Overwrite:
			return api.CreateResponse{}, api.Errorf(api.ErrExist, "create %s", path)
		default:
			if err := replaceable(who, dir, joinPath(dirComps), old, path); err != nil {
				return api.CreateResponse{}, err
			}
		}
	}
	now := c.now().UnixNano()
	owner := c.newEntry(who, dir, r.Mode, 0o666, false)
	if old != nil {
		rewritten(who, &owner, old) // the owner's quota pays for it
	}
	rid, err := c.quota.reserve(owner.UID, owner.GID, r.Size, c.cfg.TokenTTL, c.now())
	if err != nil {
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", path, err)
	}
	if r.Size == 0 {
		in := owner
		in.Parent, in.Name, in.Mtime, in.Ctime, in.Atime, in.COS = parent, name, now, now, now, k.Name
		in.Xattrs = r.Xattrs
		in, err := c.store.Commit(ctx, in, nil, r.Overwrite || old != nil)
		if err != nil {
			c.quota.release(rid)
			return api.CreateResponse{}, fmt.Errorf("create %s: %w", path, err)
		}
		c.quota.settle(rid, in)
		c.quota.replaced(in)
		fi := info(path, in)
		return api.CreateResponse{File: &fi}, nil
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
		c.quota.release(rid)
		return api.CreateResponse{}, fmt.Errorf("create %s: %w", path, err)
	}
	devs := make([]string, len(picked))
	for i, p := range picked {
		devs[i] = p.dev.ID
	}
	c.mu.Lock()
	c.inflight[b.ID] = inflight{devs: devs, uid: who.UID, quota: rid, bitfile: b}
	c.mu.Unlock()
	resp := api.CreateResponse{Bitfile: b.ID, Epoch: c.epoch, StripeUnit: b.StripeUnit}
	for i, s := range b.Segments {
		resp.Stripes = append(resp.Stripes, target(picked[i].ep, api.StripeTarget{Stripe: s.Stripe, Device: s.Device, Object: s.Object, Length: s.Length,
			Token: c.sign(who, token.OpWrite, s.Device, s.Object, s.Length, c.cfg.TokenTTL)}))
	}
	return resp, nil
}

// checkTakenAbove is the size above which a create checks that its name is
// free before the data is sent (see Create): a mover frame.
const checkTakenAbove = 1 << 20

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
		c.forgetDevices() // placed from a stale reading, perhaps
	}
}

// writer checks that who started pending write bitfile (or is an admin):
// a write belongs to the caller who created it. epoch, when known, is the
// core's that began it.
func (c *Core) writer(who *auth.Identity, bitfile, epoch int64, what string) (inflight, error) {
	c.mu.Lock()
	w, ok := c.inflight[bitfile]
	c.mu.Unlock()
	if !ok && epoch != 0 && epoch < c.epoch {
		return w, api.Errorf(api.ErrRestarted, "%s", what)
	}
	if !ok {
		return w, api.Errorf(api.ErrInvalid, "%s: write %d is not in progress (expired, aborted or committed)", what, bitfile)
	}
	if who.Admin || w.uid == who.UID {
		return w, nil
	}
	return w, fmt.Errorf("%s: %w (write %d belongs to another user)", what, api.ErrDenied, bitfile)
}

// Commit makes a written file visible, after checking every mover receipt.
// The caller must be the one that created the write, and may commit it
// only where it may create a file.
func (c *Core) Commit(ctx context.Context, r api.CommitRequest) (api.FileInfo, error) {
	who, dirComps, name, err := fileRequest(ctx, "commit", r.Path, r.Mode, r.Xattrs)
	if err != nil {
		return api.FileInfo{}, err
	}
	w, err := c.writer(who, r.Bitfile, r.Epoch, "commit "+r.Path)
	if err != nil {
		return api.FileInfo{}, err
	}
	// The layout as create placed it, kept since (not read back from the
	// catalog: a durable create is two catalog round trips, not three).
	// Whether it is still pending is the catalog's to say, in the commit's
	// own transaction.
	b := w.bitfile
	b.Segments = slices.Clone(b.Segments)
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
	path := joinPath(append(dirComps, name))
	dir, old, err := c.writeTarget(ctx, who, dirComps, name, path, r.Rewrite)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	parent := dir.id
	if old == nil && r.Overwrite {
		if err := c.mayReplace(ctx, who, dir, dirComps, name, path); err != nil {
			return api.FileInfo{}, err
		}
	}
	cos := r.COS
	if old != nil && cos == "" {
		cos = old.COS
	}
	k, err := c.chooseCOS(cos, dir.cos, b.Size)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	now := c.now().UnixNano()
	in := c.newEntry(who, dir, r.Mode, 0o666, false)
	if old != nil {
		rewritten(who, &in, old)
	}
	in.Parent, in.Name, in.Mtime, in.Ctime, in.Atime, in.COS = parent, name, now, now, now, k.Name
	in.Xattrs = r.Xattrs
	in, err = c.store.Commit(ctx, in, &b, r.Overwrite || old != nil)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("commit %s: %w", r.Path, err)
	}
	c.settle(b.ID)
	c.quota.settle(w.quota, in)
	c.quota.replaced(in)
	fi := info(path, in)
	fi.Layout, fi.Fixity = layout(b), b.Fixity
	return fi, nil
}

// Abort abandons a pending write; its space is reclaimed. Only the
// write's creator (or an admin) may.
func (c *Core) Abort(ctx context.Context, r api.AbortRequest) error {
	who, err := caller(ctx)
	if err != nil {
		return err
	}
	w, err := c.writer(who, r.Bitfile, 0, "abort")
	if err != nil {
		return err
	}
	err = c.store.Abort(ctx, r.Bitfile)
	c.settle(r.Bitfile)
	c.quota.release(w.quota)
	return err
}

// Open returns a read layout with tokens for every stripe. It needs read
// permission on the file.
func (c *Core) Open(ctx context.Context, p string) (api.OpenResponse, error) {
	who, path, in, err := c.readable(ctx, p, "open")
	if err != nil {
		return api.OpenResponse{}, err
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
	resp.File.Residency = c.residency(b.ID, residencyOf(b))
	resp.File.PinnedUntil = pinTime(b.PinnedUntil, c.now())
	if !b.OnDisk {
		return resp, api.Errorf(api.ErrOffline, "open %s: on tape only; stage it (strata stage %s) or get it and wait", path, path)
	}
	resp.StripeUnit = b.StripeUnit
	for _, s := range b.Segments {
		ep, err := c.awaitMover(ctx, s.Device)
		if err != nil {
			return resp, fmt.Errorf("open %s: stripe %d: %w", path, s.Stripe, err)
		}
		resp.Stripes = append(resp.Stripes, target(ep, api.StripeTarget{Stripe: s.Stripe, Device: s.Device, Object: s.Object, Length: s.Length, CRC32C: s.CRC32C,
			Token: c.sign(who, token.OpRead, s.Device, s.Object, 0, c.cfg.ReadTokenTTL)}))
	}
	c.touch(in)
	return resp, nil
}

// readable resolves p to a file the caller may read (read permission and
// a read scope), for op, which names the operation in errors.
func (c *Core) readable(ctx context.Context, p, op string) (who *auth.Identity, path string, in catalog.Inode, err error) {
	if who, err = caller(ctx); err != nil {
		return nil, "", in, err
	}
	if err := scoped(who, auth.ScopeRead, p); err != nil {
		return nil, "", in, err
	}
	comps, in, err := c.statPath(ctx, who, p)
	if err != nil {
		return nil, "", in, fmt.Errorf("%s: %w", op, err)
	}
	path = joinPath(comps)
	if in.Kind == catalog.KindDir {
		return nil, "", in, api.Errorf(api.ErrIsDir, "%s %s", op, path)
	}
	if in.Kind == catalog.KindSymlink {
		return nil, "", in, api.Errorf(api.ErrInvalid, "%s %s: a symbolic link (to %q), which the server does not follow", op, path, in.Target)
	}
	if err := may(who, in, path, path, auth.Read); err != nil {
		return nil, "", in, err
	}
	return who, path, in, nil
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

// entryIn resolves the directory holding p and checks that who may
// change it (write and search; scope op on p). It reads p's entry only
// when lookup says a further check needs it (a catalog read the
// operation itself would repeat); the entry's Name is set either way.
func (c *Core) entryIn(ctx context.Context, who *auth.Identity, p, op string, lookup func(dentry) bool) (dir dentry, dirPath, path string, in catalog.Inode, err error) {
	dirComps, name, err := splitParent(p)
	if err != nil {
		return dentry{}, "", "", in, err
	}
	dirPath, path = joinPath(dirComps), joinPath(append(dirComps, name))
	if dir, err = c.writableDir(ctx, who, dirComps, path, op); err != nil {
		return dentry{}, "", "", in, err
	}
	in.Name = name
	if lookup(dir) {
		if in, err = c.store.Lookup(ctx, dir.id, name); err != nil {
			return dentry{}, "", "", in, notFoundAt(err, append(dirComps, name))
		}
	}
	return dir, dirPath, path, in, nil
}

// stickyFor reports whether who is held by dir's sticky bit.
func stickyFor(who *auth.Identity, dir dentry) bool { return dir.mode&0o1000 != 0 && !who.Admin }

// Rename moves an entry. It needs write and search on both directories,
// the sticky rule in each (for the entry moved and any it replaces), and
// write on a directory moved to another parent (its ".." changes).
func (c *Core) Rename(ctx context.Context, r api.RenameRequest) error {
	who, err := caller(ctx)
	if err != nil {
		return err
	}
	dComps, dName, err := splitParent(r.Dst)
	if err != nil {
		return err
	}
	dst := joinPath(append(dComps, dName))
	dd, err := c.writableDir(ctx, who, dComps, dst, auth.ScopeCreate)
	if err != nil {
		return fmt.Errorf("rename to %s: %w", r.Dst, err)
	}
	// The entry moved is read when the sticky bit holds the caller, or
	// when it may be a directory changing parents (which needs write on
	// it): a non-admin's move to another directory.
	sd, sDir, src, moving, err := c.entryIn(ctx, who, r.Src, auth.ScopeModify, func(sd dentry) bool {
		return stickyFor(who, sd) || !who.Admin && sd.id != dd.id
	})
	if err != nil {
		return fmt.Errorf("rename %s: %w", r.Src, err)
	}
	if moving.ID != 0 {
		if err := sticky(who, sd, sDir, moving, src); err != nil {
			return err
		}
		if moving.Kind == catalog.KindDir && dd.id != sd.id {
			if err := may(who, moving, src, src, auth.Write); err != nil {
				return err
			}
		}
	}
	if mustCheckReplace(who, dd) {
		if old, err := c.store.Lookup(ctx, dd.id, dName); err == nil {
			if err := replaceable(who, dd, joinPath(dComps), old, dst); err != nil {
				return err
			}
		}
	}
	moved, err := c.store.Rename(ctx, sd.id, moving.Name, dd.id, dName, r.Overwrite, c.now().UnixNano())
	if moved.Kind == catalog.KindDir {
		c.dc.invalidate()
	}
	if err == nil {
		c.quota.replaced(moved)
	}
	if err != nil {
		return fmt.Errorf("rename %s to %s: %w", r.Src, r.Dst, err)
	}
	return nil
}

// Remove deletes an entry. It needs write and search on the parent and
// the sticky rule there. A tree is removed in one transaction for an
// admin; anyone else's recursive remove walks it as rm -r does, each
// entry checked, and stops at the first it may not remove.
func (c *Core) Remove(ctx context.Context, r api.RemoveRequest) error {
	who, err := caller(ctx)
	if err != nil {
		return err
	}
	dir, dirPath, path, in, err := c.entryIn(ctx, who, r.Path, auth.ScopeModify, func(dir dentry) bool {
		return stickyFor(who, dir) || r.Recursive && !who.Admin
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", r.Path, err)
	}
	if in.ID != 0 {
		if err := sticky(who, dir, dirPath, in, path); err != nil {
			return err
		}
		if in.Kind == catalog.KindDir && r.Recursive && !who.Admin {
			if err := c.removeTree(ctx, who, in, path); err != nil {
				return err
			}
		}
	}
	gone, err := c.store.Remove(ctx, dir.id, in.Name, r.Recursive && who.Admin)
	if gone.Kind == catalog.KindDir {
		c.dc.invalidate()
		if r.Recursive && who.Admin {
			c.quota.markStale() // the tree went in one transaction
		}
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", r.Path, err)
	}
	c.uncount(ctx, gone)
	return nil
}

// removeTree empties directory d (at path) for a caller who is not an
// admin, depth first, checking each step as the caller's own rm -r would
// be checked: read, write and search on every directory emptied, the
// sticky rule for every entry.
func (c *Core) removeTree(ctx context.Context, who *auth.Identity, d catalog.Inode, path string) error {
	if err := may(who, d, path, path, auth.Read|auth.Write|auth.Exec); err != nil {
		return err
	}
	de := dentry{id: d.ID, mode: d.Mode, uid: d.UID, gid: d.GID}
	for {
		ents, err := c.store.List(ctx, d.ID, "", 1000)
		if err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		if len(ents) == 0 {
			return nil
		}
		for _, e := range ents {
			p := path + "/" + e.Name
			if err := sticky(who, de, path, e, p); err != nil {
				return err
			}
			if e.Kind == catalog.KindDir {
				if err := c.removeTree(ctx, who, e, p); err != nil {
					return err
				}
			}
			gone, err := c.store.Remove(ctx, d.ID, e.Name, false)
			if gone.Kind == catalog.KindDir {
				c.dc.invalidate()
			}
			if err != nil && !errors.Is(err, api.ErrNotFound) {
				return fmt.Errorf("remove %s: %w", p, err)
			}
			if err == nil {
				c.uncount(ctx, gone)
			}
		}
	}
}

// SetAttr changes attributes. The owner (or an admin) may change mode,
// times and class of service; only an admin may change the owner; the
// owner may change the group to one of its own groups.
func (c *Core) SetAttr(ctx context.Context, r api.SetAttrRequest) (api.FileInfo, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.FileInfo{}, err
	}
	if err := scoped(who, auth.ScopeModify, r.Path); err != nil {
		return api.FileInfo{}, err
	}
	comps, in, err := c.statPath(ctx, who, r.Path)
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("setattr: %w", err)
	}
	path := joinPath(comps)
	notOwner := func(what string) error {
		return &denial{path: path, user: who.User, want: "ownership to change " + what, on: path, notOwner: true}
	}
	if r.Mode != nil {
		if err := checkMode(*r.Mode, "chmod "+path); err != nil {
			return api.FileInfo{}, err
		}
		if !owns(who, in) {
			return api.FileInfo{}, notOwner("its mode")
		}
		gid := in.GID
		if r.GID != nil {
			gid = *r.GID
		}
		if *r.Mode&0o2000 != 0 && !who.Admin && !who.InGroup(gid) {
			// chmod(2): set-group-ID needs membership of the group.
			m := *r.Mode &^ 0o2000
			r.Mode = &m
		}
	}
	if r.Now {
		// utimensat(UTIME_NOW): the owner, or anyone who may write it.
		if r.Mtime != nil || r.Atime != nil {
			return api.FileInfo{}, api.Errorf(api.ErrInvalid, "setattr %s: now and times together", path)
		}
		if !owns(who, in) {
			if err := may(who, in, path, path, auth.Write); err != nil {
				return api.FileInfo{}, err
			}
		}
		t := c.now()
		r.Mtime, r.Atime = &t, &t
	} else if (r.Mtime != nil || r.Atime != nil) && !owns(who, in) {
		return api.FileInfo{}, notOwner("its times")
	}
	if r.COS != nil && !owns(who, in) {
		return api.FileInfo{}, notOwner("its class of service")
	}
	if (r.UID != nil || r.GID != nil) && !owns(who, in) {
		// chown(2) by anyone but the owner, even one that changes
		// nothing (Linux's chown_ok).
		return api.FileInfo{}, notOwner("its owner or group")
	}
	if r.UID != nil && *r.UID != in.UID && !who.Admin {
		return api.FileInfo{}, &denial{path: path, user: who.User, want: "admin rights to give a file away", on: path, notOwner: true}
	}
	if r.GID != nil && *r.GID != in.GID && !who.Admin && (!owns(who, in) || !who.InGroup(*r.GID)) {
		return api.FileInfo{}, &denial{path: path, user: who.User, want: fmt.Sprintf("ownership and membership of group %d", *r.GID), on: path, notOwner: true}
	}
	a := catalog.Attr{Mode: r.Mode, UID: r.UID, GID: r.GID, Ctime: c.now().UnixNano(), COS: r.COS}
	if r.COS != nil && *r.COS != "" {
		if _, err := c.cosFor(*r.COS); err != nil {
			return api.FileInfo{}, fmt.Errorf("setattr %s: %w", r.Path, err)
		}
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
	if in.Kind == catalog.KindFile && (r.UID != nil || r.GID != nil) {
		c.quota.markStale() // its usage moves to another owner or group
	}
	if in.Kind == catalog.KindDir && (r.COS != nil || r.Mode != nil || r.UID != nil || r.GID != nil) {
		c.dc.invalidate() // what the directory hands down, or who may search it, changed
	}
	if err != nil {
		return api.FileInfo{}, fmt.Errorf("setattr %s: %w", r.Path, err)
	}
	return info(path, in), nil
}

// uncount subtracts a removed file from its owner's and group's usage.
// Whether its bytes were on disk takes a catalog read, made only when a
// quota is set (else the usage is read afresh when the first one is).
func (c *Core) uncount(ctx context.Context, gone catalog.Inode) {
	if gone.Kind != catalog.KindFile {
		return
	}
	onDisk := true
	if gone.Bitfile != 0 && c.quota.any() {
		if b, err := c.store.Bitfile(ctx, gone.Bitfile); err == nil {
			onDisk = b.OnDisk
		} else {
			c.quota.markStale()
		}
	}
	c.quota.gone(gone, onDisk)
}

// DF reports capacity and use per device and pool, to any caller, with
// the caller's quotas.
func (c *Core) DF(ctx context.Context) (api.DFResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.DFResponse{}, err
	}
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
		fs := c.devFS[d.ID]
		di := api.DeviceInfo{ID: d.ID, Pool: d.Pool, Mover: ep.Addr, Online: err == nil, Capacity: d.Capacity, Used: d.Used, Free: free, Bandwidth: d.Bandwidth,
			FS: fs.name, FSSize: fs.size, FSFree: fs.free}
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
	fss := c.fsOfPools(devs)
	for _, name := range order {
		p := pools[name]
		fs := fss[name]
		p.FileSystems, p.FSSize, p.FSFree = fs.n, fs.size, fs.free
		out.Pools = append(out.Pools, *p)
	}
	if who.Method != auth.MethodInternal {
		if out.Quotas, err = c.Quota(ctx, ""); err != nil {
			return out, err
		}
	}
	return out, nil
}
