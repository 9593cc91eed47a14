// Package core owns the control plane: the namespace API, placement of new
// data on devices, the registry of movers, capability tokens, reclaim of
// space no file uses any more, the integrity of stored copies (damage
// verified, repaired from a good copy or reported lost, and scrubbing of
// disk copies; integrity.go, scrub.go), and the requests of the tape tier,
// whose work the HSM engine does (package hsm; hsm.go here is what the
// core checks and lends it).
//
// The core never touches file data. A client asks it for a layout (which
// devices, which objects, signed tokens), streams the stripes to the movers
// itself, and comes back with the movers' receipts to commit. Only then does
// the file appear, in one catalog transaction. Anything that never commits
// (a client that died, a core that crashed) is left pending and reclaimed:
// at start-up for everything from the previous epoch, periodically for
// expired leases.
package core

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/audit"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/hsm"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// COS is a class of service: where new files of that class go, how they
// are striped, and how many copies they keep on tape. The catalog stores
// the ones edited at run time, so it is the catalog's type.
type COS = catalog.COS

// Config configures the core.
type Config struct {
	COS        []COS
	DefaultCOS string
	// TokenTTL bounds a transfer: tokens expire, and a write not committed
	// by then is reclaimed. Default 24h.
	TokenTTL time.Duration
	// ReclaimEvery is the period of the reclaimer. Default 30s.
	ReclaimEvery time.Duration
	// ReclaimGrace keeps the objects of a file removed or replaced this
	// long: a reader that got its layout before (an open file, a GET in
	// flight) goes on reading the version it opened, as POSIX and S3
	// promise. Zero reclaims at the next pass.
	ReclaimGrace time.Duration
	// MoverTimeout marks a remote mover offline when it has not
	// re-registered for this long. Default 30s.
	MoverTimeout time.Duration
	// HSM is the tape tier; without a library there is none.
	HSM hsm.Config
	// SizeRules choose the class of service of a file that names none and
	// whose directories set none: the first rule the size fits.
	SizeRules []SizeRule
	// ListPage is the most entries one list reply carries (default
	// 10,000): a directory of millions is listed page by page, so neither
	// the server nor a client holds all of it at once.
	ListPage int
	// ReadTokenTTL bounds a read's capability tokens (default the
	// smaller of TokenTTL and 1h): a token lives no longer than a
	// transfer needs, and a reader that outlives it opens the file again.
	ReadTokenTTL time.Duration
	// Umask clears mode bits of new entries created without a mode
	// (files 0666, directories 0777 before it). Default 022 (UmaskSet
	// false); set UmaskSet to use 0.
	Umask    uint32
	UmaskSet bool
	// ScrubRate is the pace, in bytes/s, of the background scrubber that
	// verifies every disk copy (0: no background scrub; `strata scrub`
	// still runs on demand). ScrubEvery is the time from the start of one
	// pass to the next (default a week).
	ScrubRate  int64
	ScrubEvery time.Duration
	// AdminGroups are the groups whose members are admins (besides uid
	// 0).
	AdminGroups []uint32
	// MoverTLS verifies movers whose data ports speak TLS, for the core's
	// own transfers (migration, recall, reclaim).
	MoverTLS *tls.Config
	// Audit, when set, receives a record of every request that changes
	// something and of every request refused.
	Audit *audit.Log
	// JWT, when set, accepts federated bearer tokens (WLCG profile).
	JWT *auth.JWTVerifier
}

// SizeRule maps files of at most MaxSize bytes to a class of service.
type SizeRule struct {
	MaxSize int64
	COS     string
}

// Core is the control plane.
type Core struct {
	// xattrSweep is when Reclaim last dropped removed entries'
	// attributes (Unix ns).
	xattrSweep atomic.Int64

	store   catalog.Store
	signer  *token.Signer
	secret  []byte
	epoch   int64
	started time.Time // when New ran (real time: movers register in it)
	cfg     Config
	cos     classStore
	log     *slog.Logger
	pool    *moverconn.Pool
	now     func() time.Time
	dc      dcache

	mu       sync.Mutex
	movers   map[string]*moverState // by mover ID
	devMover map[string]string      // device ID → mover ID
	devFree  map[string]int64       // device ID → free bytes its mover last reported
	devFS    map[string]deviceFS    // device ID → its file system, as its mover last reported
	// held is space promised to recalls in flight, by device: the catalog
	// counts a recalled copy only once it is restored, so without this
	// two recalls (or the scheduler's buffer check) could count the same
	// free bytes twice.
	held     map[string]int64
	inflight map[int64]inflight // pending bitfiles of this epoch
	devs     []catalog.Device   // the device table as place last read it
	devsAt   time.Time          // when
	load     map[string]int     // device → writes in flight
	rr       int                // rotates ties in placement
	local    api.Local          // the control API's Unix socket, if any

	atimes chan catalog.Inode // access-time updates, applied by one goroutine
	tokens tokenCache
	quota  quotas
	audit  *audit.Log

	hsm       *hsm.Engine // nil without a tape library
	integ     integrity
	recallSeq atomic.Int64 // makes the name of each object a recall writes new
}

// inflight is a write in progress: where it is placed, and who started it
// (only they may commit or abort it).
type inflight struct {
	devs    []string
	uid     uint32
	quota   int64           // its quota reservation
	bitfile catalog.Bitfile // as create recorded it (pending)
}

type moverState struct {
	id    string
	ep    moverconn.Endpoint
	local bool // runs in this process: always online
	seen  time.Time
	// lost: the core failed to reach it since it last registered; it is
	// offline until it registers again.
	lost bool
}

// offlineLocked reports whether m is offline: it has not registered for
// MoverTimeout, or the core could not reach it since it last did.
func (c *Core) offlineLocked(m *moverState) bool {
	return !m.local && (m.lost || c.now().Sub(m.seen) > c.cfg.MoverTimeout)
}

// moverLost marks the mover of device offline until it registers again:
// the core could not reach it (see diskUnreachable).
func (c *Core) moverLost(device string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.movers[c.devMover[device]]; m != nil && !m.local {
		m.lost = true
	}
}

// New opens the core on store. It starts a new epoch and kills every write
// left pending by the previous one.
func New(ctx context.Context, store catalog.Store, secret []byte, cfg Config, log *slog.Logger) (*Core, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = 24 * time.Hour
	}
	if cfg.ScrubEvery == 0 {
		cfg.ScrubEvery = 7 * 24 * time.Hour
	}
	if cfg.ReclaimEvery == 0 {
		cfg.ReclaimEvery = 30 * time.Second
	}
	if cfg.MoverTimeout == 0 {
		cfg.MoverTimeout = 30 * time.Second
	}
	if cfg.ListPage <= 0 {
		cfg.ListPage = 10000
	}
	if cfg.ReadTokenTTL == 0 {
		cfg.ReadTokenTTL = min(cfg.TokenTTL, time.Hour)
	}
	if !cfg.UmaskSet {
		cfg.Umask = 0o022
	}
	c := &Core{store: store, signer: token.NewSigner(secret), secret: secret, cfg: cfg, log: log,
		pool: moverconn.NewPool(), now: time.Now, movers: map[string]*moverState{}, devMover: map[string]string{}, devFree: map[string]int64{}, devFS: map[string]deviceFS{}, held: map[string]int64{},
		inflight: map[int64]inflight{}, load: map[string]int{}, atimes: make(chan catalog.Inode, 1024)}
	c.dc.init()
	c.pool.TLS = cfg.MoverTLS
	c.audit = cfg.Audit
	c.tokens.m = map[string]cachedToken{}
	if cfg.HSM.Library != nil && cfg.HSM.Jobs == nil {
		cfg.HSM.Jobs = &tapeserver.Exec{Lib: cfg.HSM.Library, Pool: c.pool} // transfers in this process
	}
	c.hsm = hsm.New(cfg.HSM, hsmCore{c}, store, log)
	if err := c.loadClasses(ctx, cfg.COS); err != nil {
		return nil, err
	}
	for _, r := range cfg.SizeRules {
		if _, ok := c.class(r.COS); !ok {
			return nil, fmt.Errorf("core: size rule for files up to %d bytes: class of service %q is not defined", r.MaxSize, r.COS)
		}
	}
	if _, ok := c.class(cfg.DefaultCOS); !ok {
		return nil, fmt.Errorf("core: default class of service %q is not defined", cfg.DefaultCOS)
	}
	e, err := store.NextEpoch(ctx)
	if err != nil {
		return nil, fmt.Errorf("core: start epoch: %w", err)
	}
	c.epoch, c.started = e, time.Now()
	if err := c.quota.load(ctx, store); err != nil {
		return nil, err
	}
	if err := c.loadLost(ctx); err != nil {
		return nil, err
	}
	n, err := store.ExpirePending(ctx, e, c.now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("core: expire pending writes: %w", err)
	}
	if n > 0 {
		log.Info("core: writes left unfinished by the previous run will be reclaimed", "bitfiles", n)
	}
	return c, nil
}

// Epoch returns the core's epoch.
func (c *Core) Epoch() int64 { return c.epoch }

// Close releases the core's connections (not the store).
func (c *Core) Close() { c.pool.Close() }

// MoverPool is the core's connections to movers, which the tape jobs it
// runs in its process read disk copies through (tests set its options).
func (c *Core) MoverPool() *moverconn.Pool { return c.pool }

// SetLocal announces the Unix socket the control API is also served on
// (see api.Local); clients on this host switch to it.
func (c *Core) SetLocal(l api.Local) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local = l
}

// RegisterLocal registers a mover running in this process.
func (c *Core) RegisterLocal(ctx context.Context, r api.MoverRegistration) error {
	return c.register(ctx, r, true)
}

// proof is the MAC a remote mover presents when it registers.
func proof(secret []byte, r api.MoverRegistration) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "register\x00%s\x00%s\x00%s\x00%s\x00%t", r.ID, r.Addr, r.Socket, r.Host, r.TLS)
	for _, d := range r.Devices {
		fmt.Fprintf(m, "\x00%s\x00%s\x00%d", d.ID, d.Pool, d.Capacity)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Proof is exported for movers: the registration MAC under secret.
func Proof(secret []byte, r api.MoverRegistration) string {
	return proof(secret, r)
}

// RegisterRemote checks a mover's registration and records it.
func (c *Core) RegisterRemote(ctx context.Context, r api.MoverRegistration) (api.MoverRegistered, error) {
	if r.ID == "" || r.Addr == "" {
		return api.MoverRegistered{}, api.Errorf(api.ErrInvalid, "register: mover id and address required")
	}
	if !hmac.Equal([]byte(r.Proof), []byte(proof(c.secret, r))) {
		return api.MoverRegistered{}, api.Errorf(api.ErrDenied, "register mover %s: bad proof (is the cluster secret the same?)", r.ID)
	}
	if err := c.register(ctx, r, false); err != nil {
		return api.MoverRegistered{}, err
	}
	return api.MoverRegistered{Epoch: c.epoch}, nil
}

func (c *Core) register(ctx context.Context, r api.MoverRegistration, local bool) error {
	id, devs := r.ID, r.Devices
	c.mu.Lock()
	m := c.movers[id]
	known := m != nil
	if m == nil {
		m = &moverState{id: id}
		c.movers[id] = m
	}
	m.ep, m.local, m.seen, m.lost = moverconn.Endpoint{Addr: r.Addr, Socket: r.Socket, Host: r.Host, TLS: r.TLS}, local, c.now(), false
	var fresh []api.DeviceInfo
	for _, d := range devs {
		if owner, ok := c.devMover[d.ID]; ok && owner != id {
			c.mu.Unlock()
			return api.Errorf(api.ErrExist, "register mover %s: device %s belongs to mover %s", id, d.ID, owner)
		}
		if _, ok := c.devMover[d.ID]; !ok || !known {
			fresh = append(fresh, d)
		}
		c.devMover[d.ID] = id
		c.devFree[d.ID] = d.Free
		if d.FS != "" {
			c.devFS[d.ID] = deviceFS{key: id + "\x00" + d.FS, name: d.FS, size: d.FSSize, free: d.FSFree}
		}
	}
	c.mu.Unlock()
	for _, d := range fresh {
		if err := c.store.PutDevice(ctx, catalog.Device{ID: d.ID, Pool: d.Pool, Mover: id, Capacity: d.Capacity, Bandwidth: d.Bandwidth}); err != nil {
			return fmt.Errorf("core: register device %s: %w", d.ID, err)
		}
	}
	if len(fresh) > 0 {
		c.forgetDevices()
	}
	if !known {
		c.log.Info("core: mover registered", "mover", id, "addr", r.Addr, "socket", r.Socket, "devices", len(devs))
	}
	return nil
}

// moverFor returns the endpoint of the mover holding device, if online.
func (c *Core) moverFor(device string) (moverconn.Endpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.movers[c.devMover[device]]
	if m == nil {
		return moverconn.Endpoint{}, api.Errorf(api.ErrNotFound, "device %s: no mover has registered it", device)
	}
	if c.offlineLocked(m) {
		return m.ep, fmt.Errorf("device %s: mover %s offline (last heard from %s): %w", device, m.id, m.seen.Format(time.RFC3339), api.ErrInternal)
	}
	return m.ep, nil
}

// awaitMover is moverFor that, in a core just started, waits up to
// registerGrace for the device's mover to register.
func (c *Core) awaitMover(ctx context.Context, device string) (moverconn.Endpoint, error) {
	for {
		ep, err := c.moverFor(device)
		if err == nil || !errors.Is(err, api.ErrNotFound) || time.Since(c.started) >= registerGrace {
			return ep, err
		}
		select {
		case <-ctx.Done():
			return ep, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// moverConn takes a pooled connection to the mover of device (give it
// back with c.pool.Put).
func (c *Core) moverConn(ctx context.Context, device string) (*moverconn.Conn, error) {
	ep, err := c.awaitMover(ctx, device)
	if err != nil {
		return nil, err
	}
	return c.pool.Get(ctx, ep)
}

// target is the part of a stripe target that says where its mover is.
func target(ep moverconn.Endpoint, t api.StripeTarget) api.StripeTarget {
	t.Mover, t.Socket, t.Host, t.TLS = ep.Addr, ep.Socket, ep.Host, ep.TLS
	return t
}

// sign issues a capability for one transfer, bound to the caller who
// asked for it (movers log whom they served) and living ttl.
func (c *Core) sign(who *auth.Identity, op, device, object string, maxLen int64, ttl time.Duration) string {
	cl := token.Claims{Op: op, Device: device, Object: object, MaxLen: maxLen, Epoch: c.epoch, Expires: c.now().Add(ttl).Unix()}
	if who != nil {
		cl.User, cl.UID = who.User, who.UID
	}
	return c.signer.Sign(cl)
}

// stripeLen is how many of size bytes land on stripe k of w with unit u:
// stripe units go round-robin, unit i to stripe i mod w.
func stripeLen(size, unit int64, w, k int) int64 {
	full := size / unit // complete units
	n := (full / int64(w)) * unit
	if rem := full % int64(w); int64(k) < rem {
		n += unit
	} else if int64(k) == rem {
		n += size % unit
	}
	return n
}

type candidate struct {
	dev  catalog.Device
	ep   moverconn.Endpoint
	free int64
	load int
	turn int // rotated position, breaks ties
}

// place picks w devices of pool with need bytes free each (a put sizes need
// by its largest stripe).
// It spreads writes: fewest writes in flight first, then most free space,
// with ties rotated (CASTOR's lesson: spread requests over all servers).
//
// With hold, need bytes stay set aside on each picked device until release.
//
// A core that has just started (a standby taking over) may not have heard
// from the pool's movers yet: then it waits for them, up to registerGrace
// from its start.
func (c *Core) place(ctx context.Context, pool string, w int, need int64, hold bool) ([]candidate, error) {
	for {
		cands, online, err := c.placeOnce(ctx, pool, w, need, hold)
		if err == nil || online > 0 || time.Since(c.started) >= registerGrace {
			return cands, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// registerGrace is how long after start a core waits for movers to
// register before it answers that a pool has none online: movers
// register every 5 s, and every second while no core accepts them.
const registerGrace = 10 * time.Second

// placeOnce is place without waiting; online counts the devices of the
// pool whose mover is online.
func (c *Core) placeOnce(ctx context.Context, pool string, w int, need int64, hold bool) (_ []candidate, online int, _ error) {
	devs, err := c.placeDevices(ctx)
	if err != nil {
		return nil, 0, err
	}
	var cands []candidate
	largest := int64(0)
	inPool := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range devs {
		if d.Pool != pool {
			continue
		}
		inPool++
		m := c.movers[c.devMover[d.ID]]
		if m == nil || c.offlineLocked(m) {
			continue
		}
		online++
		free := c.freeLocked(d)
		largest = max(largest, free)
		if free < need {
			continue
		}
		cands = append(cands, candidate{dev: d, ep: m.ep, free: free, load: c.load[d.ID]})
	}
	if len(cands) == 0 {
		if inPool == 0 {
			return nil, 0, api.Errorf(api.ErrNotFound, "pool %q has no devices", pool)
		}
		return nil, online, api.Errorf(api.ErrNoSpace, "pool %q: no online device has %d bytes free (largest free: %d)", pool, need, max(largest, 0))
	}
	c.rr++
	for i := range cands {
		cands[i].turn = (i + c.rr) % len(cands)
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.load != b.load {
			return a.load < b.load
		}
		// Free space in coarse steps (1/16 of the larger) so that devices
		// of about equal fill count as equal and the rotation spreads them.
		step := max(a.free, b.free)/16 + 1
		if a.free/step != b.free/step {
			return a.free > b.free
		}
		return a.turn < b.turn
	})
	if w > len(cands) {
		w = len(cands)
	}
	picked := cands[:w]
	for _, p := range picked {
		c.load[p.dev.ID]++
		if hold {
			c.held[p.dev.ID] += need
		}
	}
	return picked, online, nil
}

// freeLocked is what a device can still take: its capacity less what the
// catalog has placed on it, and never more than its mover last saw free on
// the file system (devices may share one, and other users fill it too),
// less the space held for recalls in flight.
// deviceFS is the file system under a device: key names it uniquely (its
// mover and mount point), so devices sharing it count it once.
type deviceFS struct {
	key, name  string
	size, free int64
}

// poolFS is what the file systems under a pool's devices hold, each
// counted once.
type poolFS struct {
	n          int
	size, free int64
}

// fsOfPools sums the file systems under each pool's devices (the pools of
// devs).
func (c *Core) fsOfPools(devs []catalog.Device) map[string]poolFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]poolFS{}
	seen := map[string]bool{}
	for _, d := range devs {
		fs, ok := c.devFS[d.ID]
		if !ok || seen[d.Pool+"\x00"+fs.key] {
			continue
		}
		seen[d.Pool+"\x00"+fs.key] = true
		p := out[d.Pool]
		p.n++
		p.size += fs.size
		p.free += fs.free
		out[d.Pool] = p
	}
	return out
}

func (c *Core) freeLocked(d catalog.Device) int64 {
	free := d.Capacity - d.Used
	if f, ok := c.devFree[d.ID]; ok && f < free {
		free = f
	}
	return max(free-c.held[d.ID], 0) // neither count has recalls in flight yet
}

func (c *Core) settle(bitfile int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.inflight[bitfile].devs {
		if c.load[d]--; c.load[d] <= 0 {
			delete(c.load, d)
		}
	}
	delete(c.inflight, bitfile)
}

// devicesFor is how long place works from one reading of the device table.
// Reading it for every create cost a fifth of a small file's time in the
// core. A reading up to this old may count too little used space (the
// commits since); the catalog checks every reservation against its own
// figures and refuses one that does not fit, and the create is placed
// again from a fresh reading (see reserve).
const devicesFor = time.Second

// placeDevices returns the device table as place uses it: a reading at
// most devicesFor old.
func (c *Core) placeDevices(ctx context.Context) ([]catalog.Device, error) {
	c.mu.Lock()
	devs, at := c.devs, c.devsAt
	c.mu.Unlock()
	now := c.now()
	if devs != nil && now.Sub(at) < devicesFor && !now.Before(at) {
		return devs, nil
	}
	devs, err := c.store.Devices(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.devs, c.devsAt = devs, now
	c.mu.Unlock()
	return devs, nil
}

// forgetDevices makes the next placement read the device table afresh.
func (c *Core) forgetDevices() {
	c.mu.Lock()
	c.devs = nil
	c.mu.Unlock()
}

// splitParent splits a path into its parent's components and its name.
func joinPath(comps []string) string { return "/" + strings.Join(comps, "/") }
