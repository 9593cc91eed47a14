package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// Quotas: limits per user and per group on files, bytes and bytes on
// disk, checked when a file is created. The core is the only writer of
// its catalog, so it keeps every user's and group's usage in memory: read
// once at start (catalog.Store.Usage, one pass), then changed by the
// operations themselves. A create reserves its announced size under the
// quota lock before any data moves, so creates racing for the last bytes
// of a quota never pass it together; the commit turns the reservation
// into usage (the size committed, which may be less), an abort or an
// expired lease releases it. A commit, concat or rename that replaces a
// file says what it replaced (catalog.Inode.Replaced), which is
// subtracted. What the core cannot count exactly as it goes (a tree an
// admin removed in one transaction, a purge or recall changing what is on
// disk) marks the usage stale, and the next reclaim pass reads it again
// from the catalog.

type qkey struct {
	kind string
	id   uint32
}

type reservation struct {
	uid, gid uint32
	bytes    int64
	expires  time.Time
}

type quotas struct {
	mu       sync.Mutex
	limits   map[qkey]catalog.Quota
	used     map[qkey]catalog.Usage
	reserved map[qkey]catalog.Usage // by reservations not yet settled
	pending  map[int64]reservation
	next     int64 // reservation ids
	stale    bool
	swept    time.Time // when expired reservations were last dropped
}

// load reads the limits and the usage from the catalog (at start).
func (q *quotas) load(ctx context.Context, store catalog.Store) error {
	ls, err := store.Quotas(ctx)
	if err != nil {
		return fmt.Errorf("core: quotas: %w", err)
	}
	q.mu.Lock()
	q.limits = map[qkey]catalog.Quota{}
	for _, l := range ls {
		q.limits[qkey{l.Kind, l.ID}] = l
	}
	q.used, q.reserved, q.pending = map[qkey]catalog.Usage{}, map[qkey]catalog.Usage{}, map[int64]reservation{}
	none := len(q.limits) == 0
	if none {
		// Nothing to enforce: the usage is counted when first asked
		// for (a report, the first quota set), not at every start.
		q.stale = true
	}
	q.mu.Unlock()
	if none {
		return nil
	}
	return q.recount(ctx, store)
}

// refresh counts the usage again when it is stale and a quota is set:
// the background's part (a report recounts for itself). Tier moves
// (migration to a tape-only class, purge, recall) make it stale, and a
// count is a pass over every file, so a site without quotas never pays
// it in the background.
func (q *quotas) refresh(ctx context.Context, store catalog.Store) error {
	q.mu.Lock()
	need := q.stale && len(q.limits) > 0
	q.mu.Unlock()
	if !need {
		return nil
	}
	return q.recount(ctx, store)
}

// recount reads the usage again from the catalog. The limits are not
// read: they change only through SetQuota, which sets them here as it
// stores them, and a reading taken before that store could otherwise
// land after it and undo it.
func (q *quotas) recount(ctx context.Context, store catalog.Store) error {
	us, err := store.Usage(ctx)
	if err != nil {
		return fmt.Errorf("core: quotas: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used = map[qkey]catalog.Usage{}
	if q.reserved == nil {
		q.reserved, q.pending = map[qkey]catalog.Usage{}, map[int64]reservation{}
	}
	for _, u := range us {
		q.used[qkey{u.Kind, u.ID}] = u
	}
	q.stale = false
	return nil
}

// keys are the user's and the group's.
func keys(uid, gid uint32) [2]qkey {
	return [2]qkey{{catalog.QuotaUser, uid}, {catalog.QuotaGroup, gid}}
}

// reserve checks that a new file of size bytes fits every quota of its
// owner and group, counting reservations not yet settled, and reserves
// it; the id goes back to settle or release.
func (q *quotas) reserve(uid, gid uint32, size int64, ttl time.Duration, now time.Time) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Sub(q.swept) > time.Second { // leases that ended: their writes were reclaimed
		q.swept = now
		for id, r := range q.pending {
			if now.After(r.expires) {
				q.unreserveLocked(id, r)
			}
		}
	}
	for _, k := range keys(uid, gid) {
		l, ok := q.limits[k]
		if !ok {
			continue
		}
		u, r := q.used[k], q.reserved[k]
		for _, c := range []struct {
			unit         string
			limit, holds int64
			needs        int64
		}{{" files", l.Files, u.Files + r.Files, 1}, {"", l.Bytes, u.Bytes + r.Bytes, size}, {" on disk", l.DiskBytes, u.DiskBytes + r.Bytes, size}} {
			if c.limit > 0 && c.holds+c.needs > c.limit {
				n := func(v int64) string { return amount(v, c.unit != " files") + c.unit }
				return 0, api.Errorf(api.ErrQuota, "%s %s may hold %s, holds %s with writes in progress, this needs %s more",
					k.kind, quotaName(k), n(c.limit), n(c.holds), n(c.needs))
			}
		}
	}
	q.next++
	id := q.next
	r := reservation{uid: uid, gid: gid, bytes: size, expires: now.Add(ttl)}
	q.pending[id] = r
	for _, k := range keys(uid, gid) {
		u := q.reserved[k]
		u.Files++
		u.Bytes += size
		q.reserved[k] = u
	}
	return id, nil
}

func (q *quotas) unreserveLocked(id int64, r reservation) {
	delete(q.pending, id)
	for _, k := range keys(r.uid, r.gid) {
		u := q.reserved[k]
		u.Files--
		u.Bytes -= r.bytes
		if u.Files <= 0 {
			delete(q.reserved, k)
		} else {
			q.reserved[k] = u
		}
	}
}

// release drops a reservation whose file was not created.
func (q *quotas) release(id int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.pending[id]; ok {
		q.unreserveLocked(id, r)
	}
}

// settle turns a reservation into the usage of the file committed.
func (q *quotas) settle(id int64, in catalog.Inode) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.pending[id]; ok {
		q.unreserveLocked(id, r)
	}
	q.addLocked(in.UID, in.GID, 1, in.Size, in.Size)
}

// gone subtracts a file removed or replaced (onDisk: its bytes were on
// disk).
func (q *quotas) gone(in catalog.Inode, onDisk bool) {
	if in.Kind != catalog.KindFile {
		return
	}
	disk := int64(0)
	if onDisk {
		disk = in.Size
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(in.UID, in.GID, -1, -in.Size, -disk)
}

// replaced subtracts the file a commit replaced, if any (in.Replaced).
func (q *quotas) replaced(in catalog.Inode) {
	if r := in.Replaced; r != nil {
		q.gone(catalog.Inode{Kind: catalog.KindFile, UID: r.UID, GID: r.GID, Size: r.Size}, r.OnDisk)
	}
}

func (q *quotas) addLocked(uid, gid uint32, files, bytes, disk int64) {
	for _, k := range keys(uid, gid) {
		u := q.used[k]
		u.Kind, u.ID = k.kind, k.id
		u.Files += files
		u.Bytes += bytes
		u.DiskBytes += disk
		q.used[k] = u
	}
}

// markStale says the usage must be read again from the catalog.
func (q *quotas) markStale() {
	q.mu.Lock()
	q.stale = true
	q.mu.Unlock()
}

func (q *quotas) isStale() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stale
}

// any reports whether a quota is set at all (else nothing needs counting
// that costs a catalog read).
func (q *quotas) any() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.limits) > 0
}

func quotaName(k qkey) string {
	if k.kind == catalog.QuotaUser {
		return auth.NameOf(k.id)
	}
	return "gid:" + strconv.FormatUint(uint64(k.id), 10)
}

func amount(n int64, bytes bool) string {
	if !bytes {
		return strconv.FormatInt(n, 10)
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// SetQuota sets (or, with no limits, removes) a user's or group's quota
// (admin only).
func (c *Core) SetQuota(ctx context.Context, r api.QuotaSet) (api.QuotaInfo, error) {
	if _, err := admin(ctx, "quota set"); err != nil {
		return api.QuotaInfo{}, err
	}
	k, err := quotaKey(r.Kind, r.Name)
	if err != nil {
		return api.QuotaInfo{}, err
	}
	if r.Bytes < 0 || r.Files < 0 || r.DiskBytes < 0 {
		return api.QuotaInfo{}, api.Errorf(api.ErrInvalid, "quota set: negative limit")
	}
	l := catalog.Quota{Kind: k.kind, ID: k.id, Bytes: r.Bytes, Files: r.Files, DiskBytes: r.DiskBytes}
	if err := c.store.PutQuota(ctx, l); err != nil {
		return api.QuotaInfo{}, fmt.Errorf("quota set: %w", err)
	}
	c.quota.mu.Lock()
	first := len(c.quota.limits) == 0
	if l.Bytes == 0 && l.Files == 0 && l.DiskBytes == 0 {
		delete(c.quota.limits, k)
	} else {
		c.quota.limits[k] = l
	}
	c.quota.mu.Unlock()
	if first {
		// Without quotas, removals did not read whether files were on
		// disk: count afresh.
		if err := c.quota.recount(ctx, c.store); err != nil {
			return api.QuotaInfo{}, err
		}
	}
	c.log.Info("core: quota set", "kind", k.kind, "id", k.id, "bytes", l.Bytes, "files", l.Files, "disk_bytes", l.DiskBytes)
	return c.quotaInfo(k), nil
}

// quotaKey reads a user or group given by name or number.
func quotaKey(kind, name string) (qkey, error) {
	switch kind {
	case catalog.QuotaUser:
		if n, err := strconv.ParseUint(name, 10, 32); err == nil {
			return qkey{kind, uint32(n)}, nil
		}
		uid, _, _, err := auth.LookupUser(name)
		if err != nil {
			return qkey{}, api.Errorf(api.ErrInvalid, "quota: %v", err)
		}
		return qkey{kind, uid}, nil
	case catalog.QuotaGroup:
		gid, err := auth.LookupGroup(name)
		if err != nil {
			return qkey{}, api.Errorf(api.ErrInvalid, "quota: %v", err)
		}
		return qkey{kind, gid}, nil
	}
	return qkey{}, api.Errorf(api.ErrInvalid, "quota: kind %q: want user or group", kind)
}

func (c *Core) quotaInfo(k qkey) api.QuotaInfo {
	c.quota.mu.Lock()
	defer c.quota.mu.Unlock()
	l, u, r := c.quota.limits[k], c.quota.used[k], c.quota.reserved[k]
	return api.QuotaInfo{Kind: k.kind, ID: k.id, Name: quotaName(k), Files: u.Files, Bytes: u.Bytes, DiskBytes: u.DiskBytes, PendingBytes: r.Bytes,
		MaxFiles: l.Files, MaxBytes: l.Bytes, MaxDiskBytes: l.DiskBytes}
}

// Quota reports the usage and limits of a user and the groups of the
// caller: its own (anyone), or another user's (admins; who names a user
// or uid). Groups are listed when they have a quota.
func (c *Core) Quota(ctx context.Context, who string) ([]api.QuotaInfo, error) {
	me, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	uid, gids := me.UID, append([]uint32{me.GID}, me.Groups...)
	if who != "" {
		k, err := quotaKey(catalog.QuotaUser, who)
		if err != nil {
			return nil, err
		}
		if k.id != me.UID && !me.Admin {
			return nil, fmt.Errorf("quota %s: %w (only an admin sees another user's)", who, api.ErrDenied)
		}
		if k.id != me.UID {
			uid, gids = k.id, nil
			if _, gid, groups, err := auth.LookupUser(auth.NameOf(k.id)); err == nil {
				gids = append([]uint32{gid}, groups...)
			}
		}
	}
	if c.quota.isStale() {
		c.quota.recount(ctx, c.store)
	}
	out := []api.QuotaInfo{c.quotaInfo(qkey{catalog.QuotaUser, uid})}
	seen := map[uint32]bool{}
	for _, g := range gids {
		k := qkey{catalog.QuotaGroup, g}
		c.quota.mu.Lock()
		_, limited := c.quota.limits[k]
		c.quota.mu.Unlock()
		if limited && !seen[g] {
			seen[g] = true
			out = append(out, c.quotaInfo(k))
		}
	}
	return out, nil
}
