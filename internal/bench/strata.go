package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/pki"
)

// stratat is a Strata server through the public client: control calls to
// the core, data straight to and from the movers.
type stratat struct {
	spec string
	c    *client.Client
	cos  string
	host string
}

// openStrata opens strata://HOST:PORT[?cos=CLASS].
func openStrata(ctx context.Context, spec string) (*stratat, error) {
	rest := strings.TrimPrefix(strings.TrimPrefix(spec, "strata:"), "//")
	hostport, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", spec, err)
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("target %s: want strata://HOST:PORT: %w", spec, err)
	}
	// The user's credentials, as the CLI takes them: a token, and the CA
	// (and client certificate) of a server speaking TLS.
	scheme, ca := "http://", os.Getenv("STRATA_CA")
	if ca != "" {
		scheme = "https://"
	}
	c, err := client.New(scheme + hostport)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", spec, err)
	}
	c.SetToken(client.DefaultToken())
	if ca != "" {
		tc, err := pki.ClientConfig(ca, os.Getenv("STRATA_CERT"), os.Getenv("STRATA_KEY"))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("target %s: %w", spec, err)
		}
		c.SetTLS(tc)
	}
	if _, err := c.Version(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("target %s: %w", spec, err)
	}
	return &stratat{spec: spec, c: c, cos: q.Get("cos"), host: host}, nil
}

func (t *stratat) String() string { return t.spec }

func (t *stratat) local() bool {
	ip := net.ParseIP(t.host)
	return t.host == "localhost" || (ip != nil && ip.IsLoopback())
}

func (t *stratat) Describe(ctx context.Context) TargetInfo {
	ti := TargetInfo{Spec: t.spec, Kind: "strata", Server: t.c.Server(),
		Durability:     "every stripe fsynced by its mover and the file committed in the catalog before Close returns",
		Cache:          "none on the client (it keeps no data cache)",
		MetaDurability: "each create committed to the catalog (fsynced) before it returns"}
	if v, err := t.c.Version(ctx); err == nil {
		ti.Server += " (strata " + v + ")"
	}
	if t.local() {
		ti.Cache = "sync + drop_caches (host-wide; the server is on this host) before each read phase"
		if dropCaches() != nil {
			ti.Cache = "none: the server is on this host but dropping its caches needs root"
		}
	}
	cos := t.cos
	if classes, err := t.c.ClassesOfService(ctx); err == nil {
		for _, k := range classes {
			if (cos == "" && k.Default) || k.Name == cos {
				ti.StripeUnit = k.StripeUnit
				ti.Notes = fmt.Sprintf("class of service %s: pool %s, stripe width %d, unit %d", k.Name, k.Pool, k.StripeWidth, k.StripeUnit)
				if df, err := t.c.DF(ctx); err == nil {
					alike := true
					for _, d := range df.Devices {
						if d.Pool == k.Pool && d.Online {
							if ti.Devices++; ti.Devices == 1 {
								ti.DeviceBandwidth = d.Bandwidth
							}
							alike = alike && d.Bandwidth == ti.DeviceBandwidth
						}
					}
					if !alike {
						ti.DeviceBandwidth = 0
					}
					ti.Uncapped = ti.Devices > 0 && alike && ti.DeviceBandwidth == 0
				}
			}
		}
	}
	return ti
}

func abs(p string) string { return "/" + strings.TrimPrefix(p, "/") }

func (t *stratat) Mkdir(ctx context.Context, p string) error {
	_, err := t.c.Mkdir(ctx, abs(p), true, 0)
	return err
}

func (t *stratat) Create(ctx context.Context, p string, size int64, stripes int) (Writer, error) {
	u, err := t.c.Create(ctx, abs(p), size, client.PutOptions{COS: t.cos, Overwrite: true, Stripes: stripes})
	if err != nil {
		return nil, err
	}
	return &uploadWriter{u: u, ctx: ctx}, nil
}

type uploadWriter struct {
	u   *client.Upload
	ctx context.Context
}

func (w *uploadWriter) Write(p []byte) (int, error) { return w.u.Write(p) }
func (w *uploadWriter) Close() error {
	_, err := w.u.Commit(w.ctx)
	return err
}
func (w *uploadWriter) Abort() { w.u.Abort() }

// CreateShared lays the file out with one stripe per writer and the
// writers' block as stripe unit, so each writer streams its own stripe to
// its mover: HPSS's parallel transfer. It needs a device per writer.
func (t *stratat) CreateShared(ctx context.Context, p string, size int64, writers int, block int64) (Shared, error) {
	u, err := t.c.Create(ctx, abs(p), size, client.PutOptions{COS: t.cos, Overwrite: true, Stripes: writers, StripeUnit: block, NoFixity: true})
	if err != nil {
		return nil, err
	}
	want := int(min(int64(writers), (size+block-1)/block))
	if u.Stripes() != want {
		u.Abort()
		return nil, fmt.Errorf("%d writers to one shared file need %d devices (one stripe each); the server offered %d: %w", writers, want, u.Stripes(), ErrUnsupported)
	}
	return &stratashared{u: u, ctx: ctx}, nil
}

type stratashared struct {
	u   *client.Upload
	ctx context.Context
}

func (s *stratashared) Part(k int) (Writer, error) {
	if k >= s.u.Stripes() { // the file is too small to reach this writer
		return nopWriter{}, nil
	}
	w, err := s.u.Stripe(k)
	if err != nil {
		return nil, err
	}
	return stripeWriter{w}, nil
}

func (s *stratashared) Close() error {
	_, err := s.u.Commit(s.ctx)
	return err
}
func (s *stratashared) Abort() { s.u.Abort() }

// stripeWriter is one writer's stripe: it ends when the whole file commits.
type stripeWriter struct{ io.Writer }

func (stripeWriter) Close() error { return nil }
func (stripeWriter) Abort()       {}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) {
	return 0, fmt.Errorf("write past the shared file's end")
}
func (nopWriter) Close() error { return nil }
func (nopWriter) Abort()       {}

func (t *stratat) Open(ctx context.Context, p string) (Reader, error) {
	r, err := t.c.Open(ctx, abs(p), client.GetOptions{})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (t *stratat) OpenRW(ctx context.Context, p string) (ReadWriter, error) {
	return nil, fmt.Errorf("in-place writes: Strata files are written once (as in dCache and CTA): %w", ErrUnsupported)
}

func (t *stratat) Touch(ctx context.Context, p string, data []byte) error {
	_, err := t.c.Put(ctx, abs(p), bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: t.cos, NoFixity: len(data) == 0})
	return err
}

func (t *stratat) Stat(ctx context.Context, p string) error {
	_, err := t.c.Stat(ctx, abs(p))
	return err
}

func (t *stratat) ReadDir(ctx context.Context, p string) ([]DirEntry, error) {
	l, err := t.c.List(ctx, abs(p))
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(l))
	for i, fi := range l {
		out[i] = DirEntry{Name: fi.Name, IsDir: fi.Type == "dir"}
	}
	return out, nil
}

func (t *stratat) Remove(ctx context.Context, p string) error {
	return t.c.Remove(ctx, abs(p), false)
}

func (t *stratat) RemoveAll(ctx context.Context, p string) error {
	return t.c.Remove(ctx, abs(p), true)
}

func (t *stratat) DropCache(ctx context.Context, p string) string {
	if t.local() && dropCaches() == nil {
		return "drop_caches"
	}
	return "none"
}

func (t *stratat) Close() error { return t.c.Close() }

// ServerStats reads the core's counters so far from its /metrics: its
// CPU (strata_process_cpu_seconds_total, to the microsecond: the core's
// process, with its embedded mover; movers on other hosts are not in it;
// a core without that counter gives process_cpu_seconds_total's 10 ms
// ticks) and its catalog writer's group commits.
func (t *stratat) ServerStats(ctx context.Context) (ServerStats, error) {
	b, err := t.c.Metrics(ctx)
	if err != nil {
		return ServerStats{}, err
	}
	var st ServerStats
	if st.CPU, err = metricSeconds(b, "strata_process_cpu_seconds_total"); err != nil {
		if st.CPU, err = metricSeconds(b, "process_cpu_seconds_total"); err != nil {
			return ServerStats{}, err
		}
	}
	// a core on a catalog without group commits has none of these
	n, err1 := metricValue(b, "strata_catalog_group_operations_count")
	ops, err2 := metricValue(b, "strata_catalog_group_operations_sum")
	secs, err3 := metricSeconds(b, "strata_catalog_group_duration_seconds_sum")
	if err1 == nil && err2 == nil && err3 == nil {
		st.Groups, st.GroupOps, st.GroupTime = int64(n), int64(ops), secs
	}
	return st, nil
}

// metricSeconds finds an unlabelled metric's value, in seconds, in a
// Prometheus text page.
func metricSeconds(page []byte, name string) (time.Duration, error) {
	f, err := metricValue(page, name)
	if err != nil || f*1e9 >= math.MaxInt64 {
		return 0, fmt.Errorf("metrics: %s: %v seconds", name, f)
	}
	return time.Duration(f * 1e9), nil
}

// metricValue finds an unlabelled metric's value, ≥ 0, in a Prometheus
// text page.
func metricValue(page []byte, name string) (float64, error) {
	prefix := []byte(name + " ")
	for line := range bytes.Lines(page) {
		v, ok := bytes.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		if err != nil || !(f >= 0 && !math.IsInf(f, 0)) { // NaN fails too
			return 0, fmt.Errorf("metrics: %s %q", name, bytes.TrimSpace(v))
		}
		return f, nil
	}
	return 0, fmt.Errorf("metrics: no %s", name)
}
