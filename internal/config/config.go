// Package config owns Strata's configuration: the TOML file that `strata
// serve` and `strata mover` read, its defaults (a laptop needs none), and
// size and rate parsing ("4MiB", "200MB/s").
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Size is a byte count written as "4MiB", "1.5G", "200MB" or plain bytes.
type Size int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	*s = Size(v)
	return err
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

var units = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"p", 1 << 50},
	{"b", 1},
}

// ParseSize parses a byte count. Binary suffixes (KiB, MiB, K, M) are powers
// of 1024; decimal ones (kB, MB) powers of 1000, as disk vendors use them. A
// trailing "/s" is accepted so rates read naturally.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "/s")
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// Written so that NaN (which ParseFloat accepts) fails too.
	if err != nil || !(v >= 0 && v*mult <= 1<<62) {
		return 0, fmt.Errorf("bad size %q (want e.g. 4MiB, 200MB, 1.5G)", s)
	}
	return int64(v * mult), nil
}

// Device is one disk device.
type Device struct {
	ID        string `toml:"id"`
	Path      string `toml:"path"`      // default <data_dir>/devices/<id>
	Pool      string `toml:"pool"`      // default "disk"
	Capacity  Size   `toml:"capacity"`  // 0: the file system's size
	Bandwidth Size   `toml:"bandwidth"` // bytes/s cap, 0: none
}

// COS is a class of service.
type COS struct {
	Name        string `toml:"name"`
	Pool        string `toml:"pool"`
	StripeWidth int    `toml:"stripe_width"`
	StripeUnit  Size   `toml:"stripe_unit"`
	TapeCopies  int    `toml:"tape_copies"` // copies on tape; 0: disk only
	TapeOnly    bool   `toml:"tape_only"`   // drop the disk copy once on tape
}

// SizeRule sends files of at most MaxSize bytes to a class of service,
// when neither the writer nor a directory chose one.
type SizeRule struct {
	MaxSize Size   `toml:"max_size"`
	COS     string `toml:"cos"`
}

// Library configures the emulated tape library.
type Library struct {
	Enabled    *bool  `toml:"enabled"`    // default true
	Generation string `toml:"generation"` // LTO-1 … LTO-9
	Drives     int    `toml:"drives"`
	Cartridges int    `toml:"cartridges"`
	Capacity   Size   `toml:"capacity"`   // per cartridge; default the generation's
	TimeScale  string `toml:"time_scale"` // real, instant, or a speed-up like x100
	Path       string `toml:"path"`       // default <data_dir>/tapes
	// Remote puts the drives on tape servers (strata tape-server), which
	// register with the core; the core keeps the robot and the schedule.
	// Drives is then unused here.
	Remote bool `toml:"remote"`
}

// TapeServer configures strata tape-server: drives of the library (its
// [library] section: path, generation, time_scale, cartridges,
// capacity) on this host, serving the core named in core.
type TapeServer struct {
	ID        string `toml:"id"`
	Listen    string `toml:"listen"`    // default 127.0.0.1:7440
	Advertise string `toml:"advertise"` // URL the core calls; default from listen
	// Core is the core's URL, or a comma-separated list of an active
	// core and its standbys.
	Core   string `toml:"core"`
	Drives int    `toml:"drives"` // default 1; named <id>-drive<i>
	// Metrics is where the tape server serves /metrics (host:port);
	// default none.
	Metrics string `toml:"metrics"`
}

// HSM configures migration, purge and recall.
type HSM struct {
	MigrateAfter   string  `toml:"migrate_after"` // policy age
	MigrateEvery   string  `toml:"migrate_every"`
	MigrateDrives  int     `toml:"migrate_drives"`
	Aggregate      Size    `toml:"aggregate"`       // tape file size small files are packed into
	StripeMin      Size    `toml:"tape_stripe_min"` // from this size, striped files stay striped on tape
	HighWater      float64 `toml:"high_water"`
	LowWater       float64 `toml:"low_water"`
	PurgeEvery     string  `toml:"purge_every"`
	RecallMinFiles int     `toml:"recall_min_files"`
	RecallMinBytes Size    `toml:"recall_min_bytes"`
	RecallMaxAge   string  `toml:"recall_max_age"`
	RecallDrives   int     `toml:"recall_drives"`
	RecallLinger   string  `toml:"recall_linger"` // a drive keeps its cartridge this long for follow-up recalls
	// RecallGaps is "read" (default: a batch reads on through a gap when
	// that is quicker than locating) or "locate" (locate before every file).
	RecallGaps string `toml:"recall_gaps"`
	// MountRetry is the pause before a cartridge the robot failed to
	// mount is tried again, doubling at each failed round (default 10s).
	MountRetry string `toml:"mount_retry"`
}

// Catalog selects the catalog database.
type Catalog struct {
	Driver string `toml:"driver"` // "sqlite" (default) or "postgres"
	Path   string `toml:"path"`   // sqlite: default <data_dir>/catalog.db
	// DSN is the PostgreSQL connection string or URL (driver "postgres"),
	// e.g. "postgres://strata@db1/strata". What it leaves out comes from
	// the PG* environment variables and ~/.pgpass, as for psql.
	DSN  string `toml:"dsn"`
	Sync string `toml:"sync"` // "full" (default) or "normal"
	// CacheEntries caps the core's inode cache (stat and lookup answered
	// from memory, about 0.3 KB an entry); 0 means the default, 262144.
	CacheEntries int `toml:"cache_entries"`
	// Standby makes a server that finds another holding the catalog wait
	// and take over when that one stops or loses the database, instead
	// of refusing to start (PostgreSQL only; see docs/DEPLOYMENT.md).
	// The active server then also stops itself should it lose its hold
	// on the catalog, so that a standby can take over safely.
	Standby bool `toml:"standby"`
}

// Mover configures the data mover.
type Mover struct {
	ID        string `toml:"id"`
	Listen    string `toml:"listen"`
	Advertise string `toml:"advertise"` // address clients dial; default Listen
	// Socket is a Unix socket that clients on this host use instead of
	// TCP (faster); default data_dir/mover.sock, "off" for none.
	Socket string `toml:"socket"`
	// Core is, for standalone movers, the core's URL, or a
	// comma-separated list of an active core and its standbys.
	Core string `toml:"core"`
	// Metrics is where a standalone mover serves /metrics (host:port);
	// default none. (strata serve's are on its control listener.)
	Metrics string `toml:"metrics"`
}

// Config is the whole file.
type Config struct {
	Listen string `toml:"listen"`
	// Socket is a Unix socket serving the control API to clients on this
	// host (faster than loopback TCP); default data_dir/strata.sock, "off"
	// for none. Clients find it by asking the TCP address (/v1/local).
	Socket       string `toml:"socket"`
	DataDir      string `toml:"data_dir"`
	SecretFile   string `toml:"secret_file"`
	DefaultCOS   string `toml:"default_cos"`
	TokenTTL     string `toml:"token_ttl"`
	ReclaimEvery string `toml:"reclaim_every"`
	// ReclaimGrace is how long the data of a file removed or replaced
	// stays on its devices for those who opened it before ("0s": none).
	ReclaimGrace string `toml:"reclaim_grace"`
	// ListPage is the most entries one list reply carries; clients ask
	// for the next page until the directory is done.
	ListPage   int        `toml:"list_page"`
	Catalog    Catalog    `toml:"catalog"`
	Mover      Mover      `toml:"mover"`
	Library    Library    `toml:"library"`
	TapeServer TapeServer `toml:"tape_server"`
	HSM        HSM        `toml:"hsm"`
	Devices    []Device   `toml:"device"`
	COS        []COS      `toml:"cos"`
	SizeRules  []SizeRule `toml:"cos_rule"`
	Auth       Auth       `toml:"auth"`
	TLS        TLS        `toml:"tls"`
	Audit      Audit      `toml:"audit"`
	S3         S3         `toml:"s3"`
	Integrity  Integrity  `toml:"integrity"`
}

// Integrity configures the background scrubber, which reads every disk
// copy on its mover and checks it against its checksums, repairing what is
// damaged from a good copy (see docs/INTEGRITY.md).
type Integrity struct {
	// ScrubRate is how fast, in bytes/s, it reads ("0", the default: no
	// background scrub; `strata scrub` runs on demand).
	ScrubRate Size `toml:"scrub_rate"`
	// ScrubEvery is the time from the start of one pass over the
	// namespace to the next (default 168h, a week).
	ScrubEvery string `toml:"scrub_every"`
}

// S3 configures the S3 gateway strata serve runs beside the control API
// (see docs/S3.md).
type S3 struct {
	// Listen is its address ("" for no gateway), TLS as the control
	// port's.
	Listen string `toml:"listen"`
	// Root is the directory whose subdirectories are the buckets
	// (default /s3).
	Root string `toml:"root"`
	// Region is the region reported to clients (default us-east-1).
	Region string `toml:"region"`
	// Classes maps storage classes to classes of service ("" for the
	// default class); default STANDARD = "", GLACIER and DEEP_ARCHIVE =
	// "archive".
	Classes map[string]string `toml:"storage_classes"`
	// KeepAlive is how long a CompleteMultipartUpload or a copy runs
	// before its 200 is sent and a space every keep_alive keeps the
	// connection alive until the answer (default 10s).
	KeepAlive string `toml:"keep_alive"`
}

// Audit configures the audit log: a JSON line for every request that
// changes something and every request refused.
type Audit struct {
	Path    string `toml:"path"`     // default <data_dir>/audit.log; "off" for none
	MaxSize Size   `toml:"max_size"` // rotate past this (default 100MiB)
	Keep    int    `toml:"keep"`     // rotated files kept (default 5)
}

// TLS configures encryption of the control API and the movers' data
// ports (see docs/SECURITY.md).
type TLS struct {
	// Enabled is "auto" (the default: TLS when a listener is not on a
	// loopback address), "on" or "off".
	Enabled string `toml:"enabled"`
	// Cert and Key are the server's certificate and key (PEM); default
	// <data_dir>/tls/server.pem, issued by the CA strata serve creates
	// in <data_dir>/tls on first start.
	Cert string `toml:"cert"`
	Key  string `toml:"key"`
	// CA is what clients and the core trust for the movers; default
	// <data_dir>/tls/ca.pem.
	CA string `toml:"ca"`
	// ClientCA, when set, lets clients authenticate with certificates it
	// signed (mutual TLS): the subject's common name is the user.
	ClientCA string `toml:"client_ca"`
	// Hosts are extra names and addresses for the generated certificate
	// (the listeners' own, the host name and loopback are always in it).
	Hosts []string `toml:"hosts"`
	// Insecure allows plain TCP on an address other than loopback
	// (strata serve --insecure): tokens and data then cross the network
	// in the clear.
	Insecure bool `toml:"insecure"`
}

// Auth configures who may do what (see docs/SECURITY.md).
type Auth struct {
	// AdminGroups name the groups (of this host, by name or gid) whose
	// members are admins, besides root.
	AdminGroups []string `toml:"admin_groups"`
	// Umask clears mode bits of entries created without a mode, as a
	// process umask does (octal; default "022").
	Umask string `toml:"umask"`
	// PublicMetrics leaves /metrics open to callers without credentials
	// (default true: it names devices and counts, no paths or users).
	PublicMetrics *bool `toml:"public_metrics"`
	// Issuers are the JWT issuers whose tokens are accepted ([[auth.issuer]]).
	Issuers []Issuer `toml:"issuer"`
}

// Issuer is a trusted JWT issuer (WLCG token profile).
type Issuer struct {
	Issuer   string   `toml:"issuer"`    // the iss claim
	JWKS     string   `toml:"jwks"`      // its keys: a file or a URL
	Audience []string `toml:"audience"`  // accepted aud values
	BasePath string   `toml:"base_path"` // where storage.*:/path scopes are rooted (default /)
	// UserClaim holds the user, a user of this host (default "sub");
	// DefaultUser stands for subjects the host does not know.
	UserClaim   string `toml:"user_claim"`
	DefaultUser string `toml:"default_user"`
	// Groups maps wlcg.groups values to groups of this host: "/cms" = "cms".
	Groups map[string]string `toml:"groups"`
}

// Default returns the built-in configuration: one node on 127.0.0.1, data
// under ./strata-data, a SQLite catalog, four disk devices and three
// classes of service.
func Default() Config {
	c := Config{Listen: "127.0.0.1:7420", DataDir: "strata-data", DefaultCOS: "default", TokenTTL: "24h", ReclaimEvery: "30s", ReclaimGrace: "10m", ListPage: 10000,
		Catalog:    Catalog{Driver: "sqlite", Sync: "full"},
		Mover:      Mover{ID: "mover0", Listen: "127.0.0.1:7421"},
		TapeServer: TapeServer{ID: "tape0", Listen: "127.0.0.1:7440", Drives: 1},
		// An emulated LTO-9 library, 100 times faster than real time so a
		// mount takes a quarter of a second.
		Library: Library{Generation: "LTO-9", Drives: 4, Cartridges: 20, TimeScale: "x100"},
		Auth:    Auth{Umask: "022"},
		TLS:     TLS{Enabled: "auto"},
		HSM: HSM{MigrateAfter: "15m", MigrateEvery: "30s", MigrateDrives: 2, Aggregate: 1 << 30, StripeMin: 16 << 30, HighWater: 0.9, LowWater: 0.7,
			PurgeEvery: "30s", RecallMinFiles: 100, RecallMinBytes: 8 << 30, RecallMaxAge: "2m", RecallLinger: "10s"},
		COS: []COS{
			{Name: "default", Pool: "disk", StripeWidth: 4, StripeUnit: 4 << 20, TapeCopies: 1},
			{Name: "single", Pool: "disk", StripeWidth: 1, StripeUnit: 4 << 20, TapeCopies: 1},
			{Name: "wide", Pool: "disk", StripeWidth: 8, StripeUnit: 4 << 20, TapeCopies: 1},
			{Name: "disk", Pool: "disk", StripeWidth: 4, StripeUnit: 4 << 20},
			{Name: "dual", Pool: "disk", StripeWidth: 4, StripeUnit: 4 << 20, TapeCopies: 2},
			{Name: "archive", Pool: "disk", StripeWidth: 1, StripeUnit: 4 << 20, TapeCopies: 1, TapeOnly: true},
		}}
	for i := 0; i < 4; i++ {
		c.Devices = append(c.Devices, Device{ID: fmt.Sprintf("disk%d", i), Pool: "disk"})
	}
	return c
}

// Load reads path over the defaults. Unknown keys are errors: a typo in a
// storage configuration must not pass silently. Lists given in the file
// (devices, classes of service) replace the defaults whole.
//
// edits run after the file is merged and before derived defaults are
// filled, so a command-line override of data_dir moves every path under it.
func Load(path string, edits ...func(*Config)) (Config, error) {
	c := Default()
	if path == "" {
		for _, e := range edits {
			e(&c)
		}
		return c, c.Complete()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	var fileCfg Config
	if err := DecodeStrict(b, &fileCfg); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	merge(&c, fileCfg)
	for _, e := range edits {
		e(&c)
	}
	return c, c.Complete()
}

func merge(c *Config, f Config) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Listen, f.Listen)
	set(&c.Socket, f.Socket)
	set(&c.DataDir, f.DataDir)
	set(&c.SecretFile, f.SecretFile)
	set(&c.DefaultCOS, f.DefaultCOS)
	set(&c.TokenTTL, f.TokenTTL)
	set(&c.ReclaimEvery, f.ReclaimEvery)
	set(&c.ReclaimGrace, f.ReclaimGrace)
	if f.ListPage != 0 {
		c.ListPage = f.ListPage
	}
	set(&c.Catalog.Driver, f.Catalog.Driver)
	set(&c.Catalog.Path, f.Catalog.Path)
	set(&c.Catalog.DSN, f.Catalog.DSN)
	set(&c.Catalog.Sync, f.Catalog.Sync)
	if f.Catalog.CacheEntries != 0 {
		c.Catalog.CacheEntries = f.Catalog.CacheEntries
	}
	c.Catalog.Standby = c.Catalog.Standby || f.Catalog.Standby
	set(&c.Mover.ID, f.Mover.ID)
	set(&c.Mover.Listen, f.Mover.Listen)
	set(&c.Mover.Advertise, f.Mover.Advertise)
	set(&c.Mover.Socket, f.Mover.Socket)
	set(&c.Mover.Core, f.Mover.Core)
	set(&c.Mover.Metrics, f.Mover.Metrics)
	mergeFields(&c.Library, f.Library)
	mergeFields(&c.TapeServer, f.TapeServer)
	mergeFields(&c.HSM, f.HSM)
	mergeFields(&c.Auth, f.Auth)
	mergeFields(&c.TLS, f.TLS)
	mergeFields(&c.Integrity, f.Integrity)
	mergeFields(&c.Audit, f.Audit)
	mergeFields(&c.S3, f.S3)
	if f.Devices != nil {
		c.Devices = f.Devices
	}
	if f.COS != nil {
		c.COS = f.COS
	}
	if f.SizeRules != nil {
		c.SizeRules = f.SizeRules
	}
}

// mergeFields copies the fields of src that are set (not zero) over dst.
func mergeFields[T any](dst *T, src T) {
	d, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for i := 0; i < sv.NumField(); i++ {
		if f := sv.Field(i); !f.IsZero() {
			d.Field(i).Set(f)
		}
	}
}

// Complete fills the defaults derived from other settings (paths under
// data_dir, the advertised address) and checks the result. Load calls it;
// code that builds a Config itself calls it before use.
func (c *Config) Complete() error {
	if c.Catalog.CacheEntries < 0 {
		return fmt.Errorf("config: catalog cache_entries must not be negative (0 for the default)")
	}
	if c.Catalog.Path == "" {
		c.Catalog.Path = filepath.Join(c.DataDir, "catalog.db")
	}
	if c.SecretFile == "" {
		c.SecretFile = filepath.Join(c.DataDir, "secret")
	}
	switch c.Audit.Path {
	case "off":
		c.Audit.Path = ""
	case "":
		c.Audit.Path = filepath.Join(c.DataDir, "audit.log")
	}
	switch c.TLS.Enabled {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("config: tls enabled = %q: want \"auto\", \"on\" or \"off\"", c.TLS.Enabled)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return fmt.Errorf("config: tls: cert and key go together")
	}
	for _, sk := range []struct {
		p    *string
		def  string
		what string
	}{{&c.Socket, "strata.sock", "socket"}, {&c.Mover.Socket, "mover.sock", "mover socket"}} {
		switch *sk.p {
		case "off":
			*sk.p = ""
		case "":
			*sk.p = filepath.Join(c.DataDir, sk.def)
		}
		if *sk.p != "" {
			// Clients dial the path from wherever they run.
			abs, err := filepath.Abs(*sk.p)
			if err != nil {
				return fmt.Errorf("config: %s: %w", sk.what, err)
			}
			*sk.p = abs
		}
	}
	if c.Library.Path == "" {
		c.Library.Path = filepath.Join(c.DataDir, "tapes")
	}
	if c.Mover.Advertise == "" {
		c.Mover.Advertise = c.Mover.Listen
	}
	if c.ListPage < 1 {
		return fmt.Errorf("config: list_page must be at least 1, not %d", c.ListPage)
	}
	switch c.Catalog.Driver {
	case "sqlite":
		if c.Catalog.Standby {
			return errors.New(`config: catalog standby needs driver "postgres" (the cores share one catalog there)`)
		}
	case "postgres":
		if c.Catalog.DSN == "" {
			return errors.New(`config: catalog driver "postgres" needs a dsn (e.g. dsn = "postgres://strata@localhost/strata")`)
		}
	default:
		return fmt.Errorf("config: catalog driver %q not supported (use sqlite or postgres)", c.Catalog.Driver)
	}
	seen := map[string]bool{}
	for i := range c.Devices {
		d := &c.Devices[i]
		if d.ID == "" {
			return fmt.Errorf("config: device %d has no id", i)
		}
		if seen[d.ID] {
			return fmt.Errorf("config: device %q defined twice", d.ID)
		}
		seen[d.ID] = true
		if d.Path == "" {
			d.Path = filepath.Join(c.DataDir, "devices", d.ID)
		}
		if d.Pool == "" {
			d.Pool = "disk"
		}
	}
	for _, k := range c.COS {
		if k.Name == "" || k.Pool == "" || k.StripeWidth < 1 || k.StripeUnit < 1 {
			return fmt.Errorf("config: class of service %q needs name, pool, stripe_width ≥ 1 and stripe_unit", k.Name)
		}
	}
	return nil
}

// typeMismatch is go-toml's "cannot decode TOML integer into struct field
// config.Config.Listen of type string", whose Go names mean nothing to the
// file's author.
var typeMismatch = regexp.MustCompile(`^(cannot decode TOML \S+) into struct field .+ of type (.+)$`)

// DecodeStrict decodes the TOML document b into v, refusing keys v has no
// field for (a typo must not silently leave a default), with an error of
// one line that names where and what: "line 3: unknown key
// catalog.spin_us", "line 1, column 8: cannot decode TOML integer into
// string (key name)". go-toml's own renderings quote the document
// over several lines.
func DecodeStrict(b []byte, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	// A StrictMissingError unwraps to its DecodeErrors: ask for it first.
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		msgs := make([]string, len(sm.Errors))
		for i := range sm.Errors {
			row, _ := sm.Errors[i].Position()
			msgs[i] = fmt.Sprintf("line %d: unknown key %s", row, strings.Join(sm.Errors[i].Key(), "."))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := typeMismatch.ReplaceAllString(strings.TrimPrefix(de.Error(), "toml: "), "$1 into $2")
		if k := de.Key(); len(k) > 0 {
			msg += " (key " + strings.Join(k, ".") + ")"
		}
		return fmt.Errorf("line %d, column %d: %s", row, col, msg)
	}
	return err
}
