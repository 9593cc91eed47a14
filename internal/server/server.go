// Package server assembles running processes from the parts: `strata serve`
// (catalog + core + an embedded mover with its devices, one process) and
// `strata mover` (a standalone mover that registers with a remote core,
// or with whichever of several is active). It also owns fail-over's
// process side: a standby's wait for the catalog before it opens anything
// (openCatalog) and the active core's watch on its hold (holdCatalog).
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/audit"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
	"github.com/strata-storage/strata/internal/catalog/postgres"
	"github.com/strata-storage/strata/internal/catalog/sqlite"
	"github.com/strata-storage/strata/internal/catalog/sqlstore"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/core"
	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/hsm"
	"github.com/strata-storage/strata/internal/httpserve"
	"github.com/strata-storage/strata/internal/metrics"
	"github.com/strata-storage/strata/internal/mover"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/s3"
	"github.com/strata-storage/strata/internal/sched"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tapeserver"
	"github.com/strata-storage/strata/internal/token"
)

// Server is a running `strata serve`.
type Server struct {
	Cfg   config.Config
	Store catalog.Store
	Core  *core.Core
	Mover *mover.Mover
	// Library is the emulated tape library (nil when there is none); tests
	// inject faults through it.
	Library *tape.Emulator

	lock      *os.File
	closeOnce sync.Once
	devs      []*disk.Device
	httpSrv   *httpserve.Server
	s3Srv     *http.Server
	s3Addr    string
	ctlAddr   string
	dataLn    net.Listener
	tls       bool // the TCP listeners speak TLS
	audit     *audit.Log
	lost      chan error // holdCatalog's report
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// LoadSecret reads the cluster secret, creating it when create is set and
// the file does not exist.
func LoadSecret(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		raw := make([]byte, 32)
		rand.Read(raw)
		b = []byte(hex.EncodeToString(raw) + "\n")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		return bytes.TrimSpace(b), nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("secret %s: too short (want at least 16 bytes)", path)
	}
	return b, nil
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("data directory %s does not exist (set data_dir, or --data)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another strata process", dir)
	}
	return f, nil
}

// defaultCapacities shares each file system among the devices on it that
// have no configured capacity, so that directories standing for disks on
// one laptop do not each claim the whole disk. It also returns how many
// devices share each device's file system.
func defaultCapacities(cfg config.Config) (map[string]int64, map[string]int, error) {
	type fsinfo struct {
		total int64
		n     int64
	}
	byFS := map[uint64]*fsinfo{}  // all devices per file system
	unsized := map[uint64]int64{} // devices without a configured capacity
	devFS := map[string]uint64{}
	for _, d := range cfg.Devices {
		if err := os.MkdirAll(d.Path, 0o700); err != nil {
			return nil, nil, fmt.Errorf("device %s: %w", d.ID, err)
		}
		var st syscall.Stat_t
		var sfs syscall.Statfs_t
		if err := syscall.Stat(d.Path, &st); err != nil {
			return nil, nil, fmt.Errorf("device %s: %w", d.ID, err)
		}
		if err := syscall.Statfs(d.Path, &sfs); err != nil {
			return nil, nil, fmt.Errorf("device %s: %w", d.ID, err)
		}
		f := byFS[st.Dev]
		if f == nil {
			f = &fsinfo{total: int64(sfs.Blocks) * sfs.Bsize}
			byFS[st.Dev] = f
		}
		f.n++
		if d.Capacity == 0 {
			unsized[st.Dev]++
		}
		devFS[d.ID] = st.Dev
	}
	caps, sharing := map[string]int64{}, map[string]int{}
	for _, d := range cfg.Devices {
		dev := devFS[d.ID]
		sharing[d.ID] = int(byFS[dev].n)
		if d.Capacity == 0 {
			caps[d.ID] = byFS[dev].total / unsized[dev]
		}
	}
	return caps, sharing, nil
}

func openDevices(cfg config.Config, fs fsio.FS) ([]*disk.Device, error) {
	caps, sharing, err := defaultCapacities(cfg)
	if err != nil {
		return nil, err
	}
	var devs []*disk.Device
	for _, d := range cfg.Devices {
		capacity := int64(d.Capacity)
		if capacity == 0 {
			capacity = caps[d.ID]
		}
		dev, err := disk.Open(d.ID, d.Path, disk.Options{Capacity: capacity, Bandwidth: int64(d.Bandwidth), Sharing: sharing[d.ID], FS: fs})
		if err != nil {
			for _, o := range devs {
				o.Close()
			}
			return nil, err
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

func poolOf(cfg config.Config) func(string) string {
	return func(id string) string {
		for _, d := range cfg.Devices {
			if d.ID == id {
				return d.Pool
			}
		}
		return ""
	}
}

func parseDur(s, what string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("config: %s %q is not a positive duration (e.g. 30s, 24h)", what, s)
	}
	return d, nil
}

// listenAddr is the address to advertise for ln: the configured one, with
// the real port when the configuration asked for port 0.
func listenAddr(want string, ln net.Listener) string {
	host, port, err := net.SplitHostPort(want)
	if err != nil || port != "0" {
		return want
	}
	_, real, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, real)
}

// hsmConfig opens the tape library and reads the HSM policy.
// With [library] remote, the drives are on tape servers (secret and trust
// are what they are checked and called with) and there is no emulator
// here.
func hsmConfig(cfg config.Config, fs fsio.FS, secret []byte, trust *tls.Config, log *slog.Logger) (hsm.Config, *tape.Emulator, error) {
	l, hc := cfg.Library, cfg.HSM
	var h hsm.Config
	if (l.Enabled != nil && !*l.Enabled) || (l.Drives <= 0 && !l.Remote) {
		return h, nil, nil
	}
	gen, err := tape.LookupGeneration(l.Generation)
	if err != nil {
		return h, nil, fmt.Errorf("config: library: %w", err)
	}
	clk, err := clock.Parse(l.TimeScale)
	if err != nil {
		return h, nil, fmt.Errorf("config: library: %w", err)
	}
	var lib *tape.Emulator
	var tl tape.Library
	var jobs tapeserver.Jobs
	if l.Remote {
		if secret == nil {
			return h, nil, errors.New("config: library: its drives are remote (remote = true); read the cartridges on a host that sees them, with remote = false")
		}
		r := tapeserver.NewLibrary(tapeserver.LibraryOptions{Generation: gen, Capacity: int64(l.Capacity), Clock: clk, Secret: secret, TLS: trust, Log: log})
		tl, jobs = r, r
	} else {
		if lib, err = tape.OpenEmulator(l.Path, tape.Options{Generation: gen, Drives: l.Drives, Cartridges: l.Cartridges, Capacity: int64(l.Capacity), Clock: clk, Log: log, FS: fs}); err != nil {
			return h, nil, err
		}
		tl = lib
	}
	h = hsm.Config{Library: tl, Jobs: jobs, Clock: clk, TimeScale: l.TimeScale, MigrateDrives: hc.MigrateDrives, Aggregate: int64(hc.Aggregate), StripeMin: int64(hc.StripeMin),
		HighWater: hc.HighWater, LowWater: hc.LowWater,
		Rules: sched.Rules{MinFiles: hc.RecallMinFiles, MinBytes: int64(hc.RecallMinBytes), Drives: hc.RecallDrives}}
	if h.Rules.LocateEveryFile, err = sched.ParseGaps(hc.RecallGaps); err != nil {
		return h, nil, fmt.Errorf("config: hsm: %w", err)
	}
	for _, d := range []struct {
		s    string
		name string
		to   *time.Duration
	}{{hc.MigrateAfter, "migrate_after", &h.MigrateAfter}, {hc.MigrateEvery, "migrate_every", &h.MigrateEvery},
		{hc.PurgeEvery, "purge_every", &h.PurgeEvery}, {hc.RecallMaxAge, "recall_max_age", &h.Rules.MaxAge},
		{hc.RecallLinger, "recall_linger", &h.Rules.Linger}, {hc.MountRetry, "mount_retry", &h.MountRetry}} {
		if d.s == "" {
			continue
		}
		if d.name == "recall_linger" && (d.s == "0" || d.s == "0s") {
			*d.to = 0 // drives let their cartridge go at once
			continue
		}
		if *d.to, err = parseDur(d.s, "hsm "+d.name); err != nil {
			return h, nil, err
		}
	}
	return h, lib, nil
}

// moverNet is where a mover listens: TCP for everyone, and a Unix socket
// for clients on the same host (see moverconn.Endpoint).
type moverNet struct {
	tcp, unix net.Listener
	adv       string // the TCP address clients dial
	socket    string // "" when there is no socket
	tls       bool   // the TCP listener speaks TLS
}

// listenTCP listens on addr with moverconn's keepalive and user timeout:
// a client whose host dies mid-transfer is noticed in seconds, and what
// it held (a mover's reservation, a handler) is let go.
func listenTCP(addr string) (net.Listener, error) {
	lc := moverconn.ListenConfig()
	return lc.Listen(context.Background(), "tcp", addr)
}

// maxSocketPath is the longest path a Unix socket address holds.
const maxSocketPath = 107

func listenMover(cfg config.Config, tc *tls.Config, log *slog.Logger) (*moverNet, error) {
	ln, err := listenTCP(cfg.Mover.Listen)
	if err != nil {
		return nil, fmt.Errorf("mover: %w", err)
	}
	mn := &moverNet{tcp: ln, adv: listenAddr(cfg.Mover.Advertise, ln), tls: tc != nil}
	if tc != nil {
		mn.tcp = pki.NewDataListener(ln, tc)
	}
	if p := cfg.Mover.Socket; p != "" {
		if len(p) > maxSocketPath {
			log.Warn("mover: socket path too long, local clients will use TCP", "socket", p)
			return mn, nil
		}
		if _, err := os.Stat(filepath.Dir(p)); err != nil {
			// A standalone mover need not have a data directory.
			log.Info("mover: no directory for the socket, local clients will use TCP", "socket", p)
			return mn, nil
		}
		ul, err := listenUnix(p)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("mover: socket: %w", err)
		}
		mn.unix, mn.socket = ul, p
	}
	return mn, nil
}

// listenUnix listens on a Unix socket at p. A socket file left by an
// earlier run is ours to replace: the data directory (or the configured
// path) belongs to this server.
func listenUnix(p string) (net.Listener, error) {
	if fi, err := os.Lstat(p); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(p)
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	// Anyone on the host may connect, as to the TCP listener beside it;
	// without this only the server's user could (connecting needs write
	// permission), and everyone else would silently take the slower path.
	if err := os.Chmod(p, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// serve serves m on every listener; m.Close stops them.
func (mn *moverNet) serve(m *mover.Mover, wg *sync.WaitGroup) {
	for _, ln := range []net.Listener{mn.tcp, mn.unix} {
		if ln != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.Serve(ln) }()
		}
	}
}

func (mn *moverNet) registration(cfg config.Config, m *mover.Mover) api.MoverRegistration {
	r := api.MoverRegistration{ID: cfg.Mover.ID, Addr: mn.adv, TLS: mn.tls, Devices: m.Devices(poolOf(cfg), mn.adv)}
	if mn.socket != "" {
		r.Socket, r.Host = mn.socket, moverconn.HostID()
	}
	return r
}

// Options are what a server takes beyond its configuration.
type Options struct {
	Log *slog.Logger // nil: discard
	// FS is what the devices' and the emulated library's files go
	// through; nil means fsio.OS. Tests inject faults and crashes with
	// faultfs.
	FS fsio.FS
}

// Start brings up a single-node server and returns once it is serving.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	return StartWith(ctx, cfg, Options{Log: log})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, cfg config.Config, o Options) (s *Server, err error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := privateDataDir(cfg); err != nil {
		return nil, err
	}
	built := &Server{Cfg: cfg}
	s = built
	defer func() {
		// Undo a half-built server. Not s: "return nil, err" has set it
		// to nil by the time this runs.
		if err != nil {
			built.Close()
		}
	}()
	if s.lock, err = lockDir(cfg.DataDir); err != nil {
		return nil, err
	}
	secret, err := LoadSecret(cfg.SecretFile, true)
	if err != nil {
		return nil, err
	}
	tlsc, err := setupTLS(cfg, []string{cfg.Listen, cfg.Mover.Listen, cfg.S3.Listen}, true)
	if err != nil {
		return nil, err
	}
	s.tls = tlsc.server != nil
	ttl, err := parseDur(cfg.TokenTTL, "token_ttl")
	if err != nil {
		return nil, err
	}
	every, err := parseDur(cfg.ReclaimEvery, "reclaim_every")
	if err != nil {
		return nil, err
	}
	grace, err := time.ParseDuration(cfg.ReclaimGrace)
	if cfg.ReclaimGrace == "" {
		grace, err = 0, nil
	}
	if err != nil || grace < 0 {
		return nil, fmt.Errorf("config: reclaim_grace %q is not a duration (e.g. 10m, 0s)", cfg.ReclaimGrace)
	}
	if s.Store, err = openCatalog(ctx, cfg.Catalog, log); err != nil {
		return nil, err
	}
	if p, ok := s.Store.(catalog.PriorityWriter); ok {
		if err := p.WriterPriority(); err != nil {
			log.Info("catalog writer runs at default priority (metadata writes slower under load)", "why", err)
		}
	}
	scrubEvery, err := parseDur(cfg.Integrity.ScrubEvery, "integrity scrub_every")
	if err != nil {
		return nil, err
	}
	if cfg.Integrity.ScrubRate < 0 {
		return nil, fmt.Errorf("config: integrity scrub_rate must not be negative (0: no background scrub)")
	}
	cc := core.Config{DefaultCOS: cfg.DefaultCOS, TokenTTL: ttl, ReclaimEvery: every, ReclaimGrace: grace, ListPage: cfg.ListPage, MoverTLS: tlsc.trust,
		ScrubRate: int64(cfg.Integrity.ScrubRate), ScrubEvery: scrubEvery}
	if cfg.Audit.Path != "" {
		if s.audit, err = audit.Open(cfg.Audit.Path, int64(cfg.Audit.MaxSize), cfg.Audit.Keep, func(err error) { log.Error("audit log", "err", err) }); err != nil {
			return nil, err
		}
		cc.Audit = s.audit
	}
	if err := authConfig(cfg.Auth, &cc); err != nil {
		return nil, err
	}
	for _, k := range cfg.COS {
		cc.COS = append(cc.COS, core.COS{Name: k.Name, Pool: k.Pool, StripeWidth: k.StripeWidth, StripeUnit: int64(k.StripeUnit), TapeCopies: k.TapeCopies, TapeOnly: k.TapeOnly})
	}
	for _, r := range cfg.SizeRules {
		cc.SizeRules = append(cc.SizeRules, core.SizeRule{MaxSize: int64(r.MaxSize), COS: r.COS})
	}
	if cc.HSM, s.Library, err = hsmConfig(cfg, o.FS, secret, tlsc.trust, log); err != nil {
		return nil, err
	}
	if s.Core, err = core.New(ctx, s.Store, secret, cc, log); err != nil {
		return nil, err
	}
	if s.devs, err = openDevices(cfg, o.FS); err != nil {
		return nil, err
	}
	s.Mover = mover.New(cfg.Mover.ID, s.devs, token.NewSigner(secret), log)
	s.Mover.SetEpoch(s.Core.Epoch())
	mn, err := listenMover(cfg, tlsc.server, log)
	if err != nil {
		return nil, err
	}
	s.dataLn = mn.tcp
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	mn.serve(s.Mover, &s.wg)
	if err := s.Core.RegisterLocal(ctx, mn.registration(cfg, s.Mover)); err != nil {
		return nil, err
	}
	ctlLn, err := listenTCP(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("control API: %w", err)
	}
	s.ctlAddr = ctlLn.Addr().String()
	if tlsc.server != nil {
		ctlLn = tls.NewListener(ctlLn, tlsc.server)
	}
	s.httpSrv = &httpserve.Server{Handler: s.controlHandler(), HeaderTimeout: 10 * time.Second, Log: log, ConnContext: s.connIdentity(log)}
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.httpSrv.Serve(ctlLn) }()
	ctlSock := ""
	if p := cfg.Socket; p != "" {
		// Clients on this host learn of it from /v1/local and skip the
		// loopback TCP stack: a metadata round trip costs a third less.
		if len(p) > maxSocketPath {
			log.Warn("control socket path too long, local clients will use TCP", "socket", p)
		} else if ul, err := listenUnix(p); err != nil {
			log.Warn("control socket unavailable, local clients will use TCP", "socket", p, "err", err)
		} else {
			ctlSock = p
			s.Core.SetLocal(api.Local{Socket: p, Host: moverconn.HostID()})
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.httpSrv.Serve(ul) }()
		}
	}
	if cfg.S3.Listen != "" {
		if err := s.serveS3(ctx, ctlSock, tlsc.server, log); err != nil {
			return nil, err
		}
	}
	go func() { defer s.wg.Done(); s.Core.Run(runCtx) }()
	if p, ok := s.Store.(catalog.Pinger); ok && cfg.Catalog.Standby {
		s.lost = make(chan error, 1)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.holdCatalog(runCtx, p, log) }()
	}
	go func() {
		// Keep the core's view of free space current, as remote movers do
		// by re-registering.
		defer s.wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				s.Core.RegisterLocal(runCtx, mn.registration(cfg, s.Mover))
			}
		}
	}()
	log.Info("strata serving", "control", s.URL(), "control_socket", ctlSock, "data", mn.adv, "socket", mn.socket, "data_dir", cfg.DataDir, "devices", len(s.devs), "epoch", s.Core.Epoch())
	return s, nil
}

// serveS3 starts the S3 gateway on cfg.S3.Listen. It reaches the core
// through the core's own Unix socket, where it is the server's user and
// so an administrator: it checks each request's signature and then acts
// for the key's user.
func (s *Server) serveS3(ctx context.Context, ctlSock string, tc *tls.Config, log *slog.Logger) error {
	if ctlSock == "" {
		return errors.New("s3: the gateway reaches the core through its Unix socket, which is off or unavailable; run `strata s3` as a separate process instead")
	}
	c, err := client.New("unix:" + ctlSock)
	if err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	ka, err := parseDur(s.Cfg.S3.KeepAlive, "s3 keep_alive")
	if err != nil {
		return err
	}
	g := s3.New(c, s3.Config{Root: s.Cfg.S3.Root, Region: s.Cfg.S3.Region, Classes: s.Cfg.S3.Classes, KeepAlive: ka, Log: log})
	if err := g.Init(ctx); err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	ln, err := net.Listen("tcp", s.Cfg.S3.Listen)
	if err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	s.s3Addr = ln.Addr().String()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	s.s3Srv = s3.NewServer(g, log)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.s3Srv.Serve(ln) }()
	log.Info("s3 gateway serving", "url", s.S3URL(), "root", g.Root())
	return nil
}

// S3URL is the S3 gateway's endpoint, "" if it is off.
func (s *Server) S3URL() string {
	switch {
	case s.s3Addr == "":
		return ""
	case s.tls:
		return "https://" + s.s3Addr
	}
	return "http://" + s.s3Addr
}

// authConfig reads the [auth] settings into the core's.
func authConfig(a config.Auth, cc *core.Config) error {
	if len(a.Issuers) > 0 {
		var ics []auth.IssuerConfig
		for _, is := range a.Issuers {
			ic := auth.IssuerConfig{Issuer: is.Issuer, JWKS: is.JWKS, Audience: is.Audience, BasePath: is.BasePath, UserClaim: is.UserClaim, DefaultUser: is.DefaultUser, Groups: map[string]uint32{}}
			for claim, g := range is.Groups {
				gid, err := auth.LookupGroup(g)
				if err != nil {
					return fmt.Errorf("config: auth issuer %s: groups: %w", is.Issuer, err)
				}
				ic.Groups[claim] = gid
			}
			ics = append(ics, ic)
		}
		v, err := auth.NewJWTVerifier(ics)
		if err != nil {
			return fmt.Errorf("config: auth: %w", err)
		}
		cc.JWT = v
	}
	for _, g := range a.AdminGroups {
		gid, err := auth.LookupGroup(g)
		if err != nil {
			return fmt.Errorf("config: auth admin_groups: %w", err)
		}
		cc.AdminGroups = append(cc.AdminGroups, gid)
	}
	if a.Umask != "" {
		m, err := strconv.ParseUint(a.Umask, 8, 32)
		if err != nil || m > 0o777 {
			return fmt.Errorf("config: auth umask %q is not an octal mask like \"022\"", a.Umask)
		}
		cc.Umask, cc.UmaskSet = uint32(m), true
	}
	return nil
}

// privateDataDir creates the data directory, or tightens an existing one,
// so that only the server's user can list or read it: it holds the
// catalog, the cluster secret, every device's objects and the tapes. It
// stays searchable (0711) so that local users reach the two Unix sockets
// in it by name; everything else in it is 0700 or 0600.
func privateDataDir(cfg config.Config) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := os.Chmod(cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	for _, p := range []string{cfg.SecretFile, filepath.Join(cfg.DataDir, "lock")} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	return nil
}

// internal is the context of the server's own reads of its state.
func internal(ctx context.Context) context.Context { return auth.With(ctx, auth.Root) }

// controlHandler is the control API with /metrics beside it, every API
// request counted and timed.
func (s *Server) controlHandler() http.Handler {
	src := metrics.Sources{DF: func(ctx context.Context) (api.DFResponse, error) { return s.Core.DF(internal(ctx)) },
		Library: func(ctx context.Context) (api.Library, error) { return s.Core.Library(internal(ctx)) }, Mover: func() (int64, int64, int64) {
			st := s.Mover.Stats()
			return st.FilesHanded, st.FilesRead, st.RingWrites
		}, Integrity: s.Core.Integrity}
	if g, ok := s.Store.(catalog.GroupCounter); ok {
		src.Groups = g.Groups
	}
	if g, ok := s.Store.(catalog.CacheReporter); ok {
		src.Cache = g.CacheStats
	}
	reg := metrics.New(src)
	if o, ok := s.Store.(catalog.GroupObserver); ok {
		o.ObserveGroups(reg.ObserveGroup)
	}
	h := reg.Handler(s.Core.Handler())
	if s.Cfg.Auth.PublicMetrics == nil || *s.Cfg.Auth.PublicMetrics {
		return h
	}
	// /metrics for authenticated callers only (the API authenticates its
	// own routes).
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if _, err := s.Core.Identify(r); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// DataAddr is the address the embedded mover listens on (which may differ
// from the one it advertises to clients).
func (s *Server) DataAddr() string { return s.dataLn.Addr().String() }

// URL is the control API's base URL (https:// when it speaks TLS).
func (s *Server) URL() string {
	if s.tls {
		return "https://" + s.ctlAddr
	}
	return "http://" + s.ctlAddr
}

// CA is the file of the certificate authority clients should trust (the
// generated one unless configured).
func (s *Server) CA() string {
	if s.Cfg.TLS.CA != "" {
		return s.Cfg.TLS.CA
	}
	return tlsFiles(s.Cfg).CA
}

// Close stops serving and releases everything.
func (s *Server) Close() error {
	s.closeOnce.Do(s.close)
	return nil
}

// close stops the server; Close runs it once, however often it is called
// (a test that stops a server early and its cleanup).
func (s *Server) close() {
	if s.s3Srv != nil {
		s.s3Srv.Close()
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.httpSrv.Shutdown(ctx)
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.Mover != nil {
		s.Mover.Close()
	}
	s.wg.Wait()
	if s.Core != nil {
		s.Core.Close()
	}
	for _, d := range s.devs {
		d.Close()
	}
	if s.Store != nil {
		s.Store.Close()
	}
	if s.audit != nil {
		s.audit.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// RunMover runs a standalone mover until ctx ends: it serves its devices
// and registers with the core named in cfg.Mover.Core every few seconds
// (which is also its heartbeat), learning the core's epoch each time.
func RunMover(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.Mover.Core == "" {
		return errors.New("mover: no core to register with (set [mover] core or --core)")
	}
	secret, err := LoadSecret(cfg.SecretFile, false)
	if err != nil {
		return fmt.Errorf("mover: %w (copy the core's secret file)", err)
	}
	tlsc, err := setupTLS(cfg, []string{cfg.Mover.Listen}, false)
	if err != nil {
		return fmt.Errorf("mover: %w", err)
	}
	devs, err := openDevices(cfg, nil)
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	m := mover.New(cfg.Mover.ID, devs, token.NewSigner(secret), log)
	mn, err := listenMover(cfg, tlsc.server, log)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	mn.serve(m, &wg)
	defer wg.Wait()
	defer m.Close()
	adv := mn.adv
	var registered atomic.Bool
	var lastEpoch, failures atomic.Int64
	if cfg.Mover.Metrics != "" {
		stop, err := serveMoverMetrics(cfg, devs, m, log, func() (bool, int64, int64) {
			return registered.Load(), lastEpoch.Load(), failures.Load()
		})
		if err != nil {
			return err
		}
		defer stop()
	}
	hc := registrationClient(tlsc.trust)
	keepRegistered(ctx, "mover", cfg.Mover.Core, log, func(ctx context.Context, coreURL string) (int64, error) {
		reg := mn.registration(cfg, m)
		reg.Proof = core.Proof(secret, reg)
		return register(ctx, hc, coreURL+"/v1/movers/register", reg)
	}, func(first bool, epoch int64, coreURL string) {
		if first {
			log.Info("mover registered", "core", coreURL, "data", adv, "epoch", epoch)
		}
		m.SetEpoch(epoch)
		lastEpoch.Store(epoch)
	}, &registered, &failures)
	return nil
}

// registrationClient is how movers and tape servers register: a
// registration is one small request, so a core that has not answered it
// in 3 s is taken as gone (its host down, say), and the next one of the
// list is tried, so that a standby that took over hears from them within
// a registration period or two.
func registrationClient(trust *tls.Config) *http.Client {
	d := moverconn.Dialer()
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: trust}}
}

// keepRegistered registers with a core every 5 s until ctx ends (which is
// also the heartbeat). cores is a comma-separated list: an active core
// and its standbys. Registering goes to the one that last accepted, else
// round the list; while no core accepts, it tries every second, so that
// the process is back in service soon after a standby takes over. ok runs
// after every accepted registration, saying whether it is the first since
// a failure or a new epoch.
func keepRegistered(ctx context.Context, what, cores string, log *slog.Logger, send func(context.Context, string) (int64, error),
	ok func(first bool, epoch int64, core string), registered *atomic.Bool, failures *atomic.Int64) {
	var list []string
	for _, u := range strings.Split(cores, ",") {
		list = append(list, strings.TrimRight(strings.TrimSpace(u), "/"))
	}
	cur := 0
	var last int64
	for {
		var epoch int64
		var err error
		for i := range list {
			if epoch, err = send(ctx, list[cur]); err == nil || ctx.Err() != nil {
				break
			}
			if i < len(list)-1 {
				cur = (cur + 1) % len(list)
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if registered.Load() || failures.Load()%30 == 0 {
				log.Warn(what+": cannot register with core", "core", cores, "err", err)
			}
			registered.Store(false)
			failures.Add(1)
		default:
			first := !registered.Load() || epoch != last
			registered.Store(true)
			last = epoch
			ok(first, epoch, list[cur])
		}
		wait := 5 * time.Second
		if err != nil {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// serveMoverMetrics serves a standalone mover's /metrics on
// cfg.Mover.Metrics until the returned stop is called.
func serveMoverMetrics(cfg config.Config, devs []*disk.Device, m *mover.Mover, log *slog.Logger, reg func() (bool, int64, int64)) (stop func(), err error) {
	pool := poolOf(cfg)
	h, _ := metrics.MoverHandler(metrics.MoverSources{
		Devices: func() []metrics.MoverDevice {
			out := make([]metrics.MoverDevice, 0, len(devs))
			for _, d := range devs {
				c, u, f := d.Usage()
				out = append(out, metrics.MoverDevice{ID: d.ID(), Pool: pool(d.ID()), Capacity: c, Used: u, Free: f})
			}
			return out
		},
		Stats: func() (int64, int64, int64) {
			st := m.Stats()
			return st.FilesHanded, st.FilesRead, st.RingWrites
		},
		Registration: reg,
	})
	return serveMetrics(cfg.Mover.Metrics, "mover", h, log)
}

// serveMetrics serves h (a process's /metrics) on addr until the returned
// stop is called.
func serveMetrics(addr, what string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: metrics: %w", what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info(what+" metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { srv.Close() }, nil
}

// register sends one registration to url and returns the core's epoch.
func register(ctx context.Context, hc *http.Client, url string, reg any) (int64, error) {
	b, _ := json.Marshal(reg)
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		return 0, fmt.Errorf("%s: %s", resp.Status, e.Msg)
	}
	var r api.MoverRegistered
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	return r.Epoch, nil
}

// openCatalog opens the configured catalog: the embedded SQLite file or a
// PostgreSQL database. A standby (catalog standby = true) that finds
// another server holding the catalog, or cannot reach the database, waits
// here, before it opens a device or a port, until it can take over.
func openCatalog(ctx context.Context, c config.Catalog, log *slog.Logger) (catalog.Store, error) {
	open := func() (*sqlstore.Store, error) { return sqlite.Open(c.Path, sqlite.Options{Sync: c.Sync}) }
	if c.Driver == "postgres" {
		o := postgres.Options{Sync: c.Sync}
		if c.Standby {
			o.LockWait = time.Second // then look at ctx again
		}
		open = func() (*sqlstore.Store, error) { return postgres.Open(c.DSN, o) }
	}
	s, err := open()
	var said time.Time
	for c.Standby && err != nil && !errors.Is(err, postgres.ErrNotNew) {
		switch {
		case said.IsZero() && errors.Is(err, postgres.ErrLocked):
			log.Info("standing by: another strata server holds the catalog; taking over when it stops", "catalog", Redacted(c.DSN))
			said = time.Now()
		case !errors.Is(err, postgres.ErrLocked) && time.Since(said) > 30*time.Second:
			log.Warn("standing by: cannot open the catalog", "err", err)
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		s, err = open()
	}
	if err != nil {
		return nil, err // not a nil *Store in a non-nil interface
	}
	if !said.IsZero() {
		log.Info("taking over: this server now holds the catalog")
	}
	if c.CacheEntries > 0 {
		s.SetCacheSize(c.CacheEntries)
	}
	return s, nil
}

// holdCheck and holdLease pace an active core with standbys: it checks
// its hold on the catalog every holdCheck and stops when it has not
// confirmed it for holdLease. The database ends the session of a writer
// that vanished after about 5 s (see postgres.Open), freeing the lock for
// a standby; by then the old core has stopped writing tapes and handing
// out layouts. (Movers fence it too: a new core's epoch makes them refuse
// the old one's tokens.)
const (
	holdCheck = time.Second
	holdLease = 3 * time.Second
)

// holdCatalog watches the catalog's lock while ctx lives and reports on
// s.lost when it could not confirm it for holdLease.
func (s *Server) holdCatalog(ctx context.Context, p catalog.Pinger, log *slog.Logger) {
	t := time.NewTicker(holdCheck)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, holdCheck)
		err := p.Ping(pctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			last = time.Now()
			continue
		}
		if time.Since(last) >= holdLease {
			log.Error("lost the catalog: stopping so that a standby can take over", "err", err)
			s.lost <- fmt.Errorf("lost the catalog for %s (%v): stopped so that a standby can take over", time.Since(last).Round(time.Second), err)
			return
		}
	}
}

// Lost reports, for a server with standbys, that it lost its hold on the
// catalog and must stop (nil for a server without standbys).
func (s *Server) Lost() <-chan error { return s.lost }

// RebuildCatalog writes a new catalog at out from the tape library alone
// (see hsm.Rebuild): a new SQLite file, or, when out is a postgres:// or
// postgresql:// URL, the empty (or missing) PostgreSQL schema it names. It
// takes the data directory's lock: the server must not be running.
func RebuildCatalog(ctx context.Context, cfg config.Config, out string, log *slog.Logger) (hsm.RebuildResult, error) {
	var res hsm.RebuildResult
	pg := IsPostgresURL(out)
	if _, err := os.Stat(out); err == nil && !pg {
		return res, fmt.Errorf("rebuild: %s exists", out)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return res, err
	}
	defer lock.Close()
	hc, _, err := hsmConfig(cfg, nil, nil, nil, log)
	if err != nil {
		return res, err
	}
	if hc.Library == nil {
		return res, errors.New("rebuild: no tape library configured")
	}
	var store *sqlstore.Store
	if pg {
		store, err = postgres.Open(out, postgres.Options{Sync: cfg.Catalog.Sync, New: true})
	} else {
		store, err = sqlite.Open(out, sqlite.Options{Sync: cfg.Catalog.Sync})
	}
	if err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	defer store.Close()
	return hsm.Rebuild(ctx, hc.Library, store, log)
}

// IsPostgresURL says whether a catalog named on the command line is a
// PostgreSQL database rather than a SQLite file.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Redacted is a catalog's name fit to print: a URL's password hidden.
func Redacted(s string) string {
	if u, err := url.Parse(s); err == nil && IsPostgresURL(s) {
		return u.Redacted()
	}
	return s
}
