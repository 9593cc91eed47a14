// Package client is Strata's public Go API. The CLI, and every other front
// end, is built on it.
//
// A Client talks JSON over HTTP to the core for metadata and layouts, and
// streams file data directly to and from the movers over Strata's framed
// protocol (TCP, or a mover's Unix socket on its host, where files may pass
// instead of streams), one connection per stripe, all stripes in parallel.
// It verifies CRC32C on every frame and every segment, and computes the
// whole-file fixity digest (BLAKE3 by default, or SHA-256) while the data
// moves.
//
// Given several core addresses (an active core and its standbys), it
// sends each request to the one serving and rides over a fail-over
// (failover.go); a read that meets a damaged or unreachable copy has the
// core replace it and reads on (repair.go).
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
)

// Types shared with the server.
type (
	FileInfo   = api.FileInfo
	Layout     = api.Layout
	Segment    = api.Segment
	DeviceInfo = api.DeviceInfo
	PoolInfo   = api.PoolInfo
	DF         = api.DFResponse
	SetAttr    = api.SetAttrRequest
	// Error is an error reported by the server; errors.Is matches it
	// against the sentinels below.
	Error = api.Error
)

// Entry types (FileInfo.Type).
const (
	TypeFile    = api.TypeFile
	TypeDir     = api.TypeDir
	TypeSymlink = api.TypeSymlink
)

// Where a file's data lives (FileInfo.Residency).
const (
	ResidencyDisk    = api.ResidencyDisk
	ResidencyTape    = api.ResidencyTape
	ResidencyBoth    = api.ResidencyBoth
	ResidencyStaging = api.ResidencyStaging
	ResidencyLost    = api.ResidencyLost
)

// Errors every call may return (match with errors.Is).
var (
	ErrNotFound = api.ErrNotFound
	ErrExist    = api.ErrExist
	ErrNotDir   = api.ErrNotDir
	ErrIsDir    = api.ErrIsDir
	ErrNotEmpty = api.ErrNotEmpty
	ErrInvalid  = api.ErrInvalid
	ErrNoSpace  = api.ErrNoSpace
	ErrCorrupt  = api.ErrCorrupt
	ErrDenied   = api.ErrDenied
	// ErrNotOwner: only the owner may (chmod, chown, times); also
	// ErrDenied.
	ErrNotOwner = api.ErrNotOwner
	// ErrUnauthenticated means the server could not tell who is calling:
	// over TCP a request needs a bearer token (SetToken).
	ErrUnauthenticated = api.ErrUnauthenticated
	// ErrOffline means the file is on tape only and was not recalled.
	ErrOffline = api.ErrOffline
	// ErrUnavailable: what the request needs (a tape drive) is out of
	// service for now.
	ErrUnavailable = api.ErrUnavailable
	// ErrRestarted: a write begun under a core that has since stopped (a
	// standby took over) cannot be committed; nothing of it is visible.
	// Put begins again by itself; an Upload's writer must. It is also
	// ErrUnavailable.
	ErrRestarted = api.ErrRestarted
	// ErrUnreachable means the server could not be contacted at all.
	ErrUnreachable = errors.New("server unreachable")
	// ErrSourceChanged means a put's source did not read the same twice
	// (the movers' reading and the fixity hash's): something wrote to it
	// during the put. Nothing was committed; put it again once it is
	// quiet.
	ErrSourceChanged = errors.New("the source changed during the put")
)

// DefaultServer is where clients look when nothing else is said.
const DefaultServer = "http://127.0.0.1:7420"

// Client is safe for concurrent use.
type Client struct {
	// cores are the configured addresses of the core: one, or an
	// active core and its standbys (fail-over.go); cur indexes the one
	// that last answered.
	cores []*coreAddr
	cur   atomic.Int32
	// FailoverWait is how long a request keeps trying the configured
	// cores while none answers, when there is more than one (default
	// 30 s: a standby takes over within 10 s).
	FailoverWait time.Duration
	pool         *moverconn.Pool
	// Retries is how many times a failed stripe transfer is retried on a
	// new connection before the operation fails (default 3).
	Retries int
	// token is the bearer token sent with every control request (the
	// server ignores it on its Unix socket, where the kernel says who
	// the caller is).
	token string
	// Creates and commits made at once go to the core in batches
	// (batch.go); noBatch: the core has no batch routes.
	creates batcher[api.CreateRequest, api.CreateResponse]
	commits batcher[api.CommitRequest, api.FileInfo]
	noBatch atomic.Bool
}

// newClient is a client of the cores given.
func newClient(cores []*coreAddr) *Client {
	c := &Client{cores: cores, pool: moverconn.NewPool(), Retries: 3, FailoverWait: 30 * time.Second}
	c.creates.send = func(qs []api.CreateRequest) ([]api.CreateResponse, []error) {
		return sendBatch(c, "/v1/creates", qs, func(ctx context.Context, q api.CreateRequest) (api.CreateResponse, error) {
			var r api.CreateResponse
			return r, c.do(ctx, "POST", "/v1/create", nil, q, &r)
		})
	}
	c.commits.send = func(qs []api.CommitRequest) ([]api.FileInfo, []error) {
		return sendBatch(c, "/v1/commits", qs, func(ctx context.Context, q api.CommitRequest) (api.FileInfo, error) {
			var fi api.FileInfo
			return fi, c.do(ctx, "POST", "/v1/commit", nil, q, &fi)
		})
	}
	return c
}

// New returns a client for the server at addr: "host:port", an http://
// or https:// URL, or "unix:PATH", the core's Unix socket on this host
// (which needs neither a token nor TLS: the kernel tells the server who
// is calling). A comma-separated list names an active core and its
// standbys: requests go to whichever is serving (see FailoverWait).
func New(addr string) (*Client, error) {
	if addr == "" {
		addr = DefaultServer
	}
	var cores []*coreAddr
	for _, a := range strings.Split(addr, ",") {
		ca, err := parseCore(strings.TrimSpace(a))
		if err != nil {
			return nil, err
		}
		cores = append(cores, ca)
	}
	if len(cores) > 1 {
		// A core whose host is down does not refuse a connection, it
		// never answers: give up on it soon and try its standby (the
		// failover loop comes back to it).
		for _, ca := range cores {
			ca.tr.dialer.Timeout = standbyDialTimeout
		}
	}
	c := newClient(cores)
	for _, ca := range cores {
		if strings.HasPrefix(ca.base, "https://") {
			c.SetTLS(&tls.Config{MinVersion: tls.VersionTLS13}) // the system's roots until told otherwise
			break
		}
	}
	return c, nil
}

// parseCore parses one core address.
func parseCore(addr string) (*coreAddr, error) {
	if sock, ok := strings.CutPrefix(addr, "unix:"); ok {
		if sock == "" {
			return nil, fmt.Errorf("bad server address %q: want unix:PATH", addr)
		}
		tr := newTransport("localhost")
		tr.socket, tr.unixOnly = sock, true
		return &coreAddr{base: "http://localhost", name: addr, tr: tr}, nil
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("bad server address %q: want host:port or http://host:port", addr)
	}
	base := strings.TrimRight(u.String(), "/")
	return &coreAddr{base: base, name: base, prefix: strings.TrimRight(u.EscapedPath(), "/"), tr: newTransport(u.Host)}, nil
}

// TokenFile is where `strata login` keeps a user's bearer token:
// $XDG_CONFIG_HOME/strata/token (~/.config/strata/token), mode 0600.
func TokenFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory for the token: %w", err)
	}
	return filepath.Join(dir, "strata", "token"), nil
}

// DefaultToken is the bearer token a program acting for the user should
// present over TCP: $STRATA_TOKEN, else the file `strata login` wrote,
// else none (fine on the server's host, where the Unix socket says who
// the user is).
func DefaultToken() string {
	if t := os.Getenv("STRATA_TOKEN"); t != "" {
		return t
	}
	p, err := TokenFile()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SetTLS sets how the client verifies the core and the movers over TCP
// (the CA that signed their certificates; a client certificate for mutual
// TLS): see pki.ClientConfig. The core is reached by TLS when the
// server's URL is https://; a mover's data port when the core says it
// speaks TLS.
func (c *Client) SetTLS(cfg *tls.Config) {
	c.pool.TLS = cfg
	for _, ca := range c.cores {
		if t := ca.tr; strings.HasPrefix(ca.base, "https://") {
			t.mu.Lock()
			t.tls = cfg
			t.mu.Unlock()
			t.CloseIdleConnections()
		}
	}
}

// SetToken sets the bearer token the client authenticates with over TCP
// ("strata_…", from `strata token create`). On the core's Unix socket the
// server takes the caller's identity from the kernel instead.
func (c *Client) SetToken(tok string) { c.token = strings.TrimSpace(tok) }

// Handover says whether transfers with a mover on this host may pass
// files instead of streaming through the mover's socket (the default: one
// copy out of the page cache instead of three through a socket). A read
// takes the object's file from the mover and reads and verifies it here
// (devices with a bandwidth cap always stream); a put from an *os.File
// passes the file to the mover, which reads each stripe of 1 MiB or more
// itself.
func (c *Client) Handover(on bool) { c.pool.SetHandles(on) }

// TCPOnly makes the client reach the core and movers over TCP even when
// they run on this host and offer a Unix socket (which is faster; see
// moverconn.Endpoint). Tests and benchmarks of the network path use it.
func (c *Client) TCPOnly(on bool) {
	c.pool.SetTCPOnly(on)
	for _, ca := range c.cores {
		t := ca.tr
		t.mu.Lock()
		t.tcpOnly = on
		t.mu.Unlock()
		// Connections already made keep their kind; start afresh.
		t.CloseIdleConnections()
	}
}

// ControlSocket returns the Unix socket the client reaches the core
// through, or "" while it uses TCP (another host, TCPOnly, an https URL,
// or before the first request).
func (c *Client) ControlSocket() string {
	t := c.core().tr
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tcpOnly || t.socket == noSocket {
		return ""
	}
	return t.socket
}

func endpoint(t api.StripeTarget) moverconn.Endpoint {
	return moverconn.Endpoint{Addr: t.Mover, Socket: t.Socket, Host: t.Host, TLS: t.TLS}
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.pool.Close()
	for _, ca := range c.cores {
		ca.tr.CloseIdleConnections()
	}
	return nil
}

// Server names the core the client talks to (of several, the one that
// last answered) as it was given: its URL, or unix:PATH for its socket.
func (c *Client) Server() string { return c.core().name }

// plainToTLS begins what a TLS server answers a request in plain HTTP
// (net/http's words, which httpserve uses too).
const plainToTLS = "Client sent an HTTP request to an HTTPS server"

// errSpeaksTLS is a plain HTTP request's answer from a TLS server.
var errSpeaksTLS = errors.New(plainToTLS)

// speaksTLS says what to do when server name, at host, answered plain
// HTTP as a TLS server does.
func speaksTLS(name, host string) error {
	return fmt.Errorf("strata server %s speaks TLS: name it https://%s, and give its CA with --ca (or STRATA_CA)", name, host)
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	_, err := c.doHeader(ctx, method, path, q, in, out)
	return err
}

// doHeader is do that also returns the reply's header. With standby
// cores configured, a request no core could take is tried on the next
// (failover.go).
func (c *Client) doHeader(ctx context.Context, method, path string, q url.Values, in, out any) (http.Header, error) {
	if err := validUTF8(in, q); err != nil {
		return nil, err
	}
	var body []byte
	if in != nil {
		b, err := api.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = b
	}
	return c.failover(ctx, method, func(ca *coreAddr) (http.Header, error) {
		return c.send(ctx, ca, method, path, q, body, in != nil, out)
	})
}

// send makes one request of the core at ca.
func (c *Client) send(ctx context.Context, ca *coreAddr, method, path string, q url.Values, in []byte, hasBody bool, out any) (http.Header, error) {
	uri := ca.prefix + path
	if q != nil {
		uri += "?" + q.Encode()
	}
	r := &request{method: method, uri: uri, token: c.token, body: in, hasBody: hasBody}
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		r.actor = a
	}
	resp, body, err := ca.tr.roundTrip(ctx, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var de *dialError
		if errors.As(err, &de) {
			return nil, &unreachable{base: ca.name, err: de.err, unsent: true}
		}
		var op *net.OpError
		if errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || stale(err) {
			return nil, &unreachable{base: ca.name, err: err}
		}
		if errors.Is(err, errSpeaksTLS) {
			return nil, speaksTLS(ca.name, ca.tr.addr)
		}
		return nil, fmt.Errorf("strata server %s: %w", ca.name, err)
	}
	defer body.Close()
	if resp.status != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.body, 64<<10)) // an error is a line
		var e api.Error
		if err := api.NewDecoder(bytes.NewReader(body)).Decode(&e); err != nil || e.Code == "" {
			switch {
			case resp.status == http.StatusNotFound:
				return nil, fmt.Errorf("strata server %s: %s %s: %w", ca.name, method, path, errNoRoute)
			case bytes.HasPrefix(body, []byte(plainToTLS)):
				return nil, speaksTLS(ca.name, ca.tr.addr)
			}
			return nil, fmt.Errorf("strata server %s: %s", ca.name, resp.statusText)
		}
		return nil, &e
	}
	if out == nil {
		io.Copy(io.Discard, resp.body)
		return resp.header, nil
	}
	if raw, ok := out.(*[]byte); ok { // a page that is not JSON (/metrics)
		b, err := io.ReadAll(io.LimitReader(resp.body, maxRawReply))
		if err != nil {
			return nil, fmt.Errorf("strata server %s: reading the reply: %w", ca.name, err)
		}
		*raw = b
		return resp.header, nil
	}
	if err := api.NewDecoder(resp.body).Decode(out); err != nil {
		return nil, fmt.Errorf("strata server %s: bad reply: %w", ca.name, err)
	}
	io.Copy(io.Discard, resp.body) // the encoder's newline: read to EOF so the connection is reused
	return resp.header, nil
}

func pathQuery(p string) url.Values { return url.Values{"path": {p}} }

// Stat describes one entry, with layout and fixity for files.
func (c *Client) Stat(ctx context.Context, p string) (*FileInfo, error) {
	var fi FileInfo
	return &fi, c.do(ctx, "GET", "/v1/stat", pathQuery(p), nil, &fi)
}

// List returns all of a directory's entries sorted by name (a file lists
// itself). For a directory too large to hold, use ListPages.
func (c *Client) List(ctx context.Context, p string) ([]FileInfo, error) {
	var all []FileInfo
	err := c.ListPages(ctx, p, 0, func(page []FileInfo) error {
		all = append(all, page...)
		return nil
	})
	return all, err
}

// ListPages calls fn with each page of p's listing, in name order, one
// request per page; limit is the most entries a page holds (0: the
// server's page size, 10,000 by default). An error from fn stops the
// listing and is returned. Entries created or removed meanwhile may or
// may not be seen, as with readdir; none is seen twice.
func (c *Client) ListPages(ctx context.Context, p string, limit int, fn func([]FileInfo) error) error {
	q := pathQuery(p)
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	for {
		var page []FileInfo
		h, err := c.doHeader(ctx, "GET", "/v1/list", q, nil, &page)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		next := h.Get(api.ListNextHeader)
		if next == "" {
			return nil
		}
		// A cursor must move forward (names are in order), or a faulty
		// server would keep the client asking for the same page forever.
		after, err := url.QueryUnescape(next)
		if err != nil || after == "" || after <= q.Get("after") {
			return fmt.Errorf("strata server %s: bad list cursor %q", c.Server(), next)
		}
		q.Set("after", after)
	}
}

// Mkdir creates a directory; with parents, also its missing ancestors, and
// an existing directory is not an error.
func (c *Client) Mkdir(ctx context.Context, p string, parents bool, mode uint32) (*FileInfo, error) {
	var fi FileInfo
	return &fi, c.do(ctx, "POST", "/v1/mkdir", nil, api.MkdirRequest{Path: p, Parents: parents, Mode: mode}, &fi)
}

type actorKey struct{}

// OnBehalfOf returns ctx for requests a gateway makes for one of its
// callers: the server acts as uid, gid and groups if, and only if, the
// client itself authenticates as an administrator.
func OnBehalfOf(ctx context.Context, uid, gid uint32, groups []uint32) context.Context {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%d:", uid, gid)
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, g)
	}
	return context.WithValue(ctx, actorKey{}, b.String())
}

// ActorOf is the caller a context acts for (OnBehalfOf), "" if none.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// WithActor gives ctx the caller another context acts for (ActorOf).
func WithActor(ctx context.Context, actor string) context.Context {
	if actor == "" {
		return ctx
	}
	return context.WithValue(ctx, actorKey{}, actor)
}

// Symlink creates the symbolic link p pointing at target (stored as
// given; the server never follows it).
func (c *Client) Symlink(ctx context.Context, p, target string) (*FileInfo, error) {
	var fi FileInfo
	return &fi, c.do(ctx, "POST", "/v1/symlink", nil, api.SymlinkRequest{Path: p, Target: target}, &fi)
}

// Xattrs returns the extended attributes of p.
func (c *Client) Xattrs(ctx context.Context, p string) (map[string][]byte, error) {
	var l api.XattrList
	if err := c.do(ctx, "GET", "/v1/xattr", pathQuery(p), nil, &l); err != nil {
		return nil, err
	}
	if l.Attrs == nil {
		l.Attrs = map[string][]byte{}
	}
	return l.Attrs, nil
}

// SetXattr sets one user.* attribute of p; how is "create", "replace" or
// "" (either).
func (c *Client) SetXattr(ctx context.Context, p, name string, value []byte, how string) error {
	return c.do(ctx, "POST", "/v1/xattr", nil, api.XattrRequest{Path: p, Name: name, Value: value, How: how}, nil)
}

// RemoveXattr removes one attribute of p.
func (c *Client) RemoveXattr(ctx context.Context, p, name string) error {
	return c.do(ctx, "POST", "/v1/xattr/remove", nil, api.XattrRequest{Path: p, Name: name}, nil)
}

// Rename moves src to dst; an existing dst is replaced only with overwrite.
func (c *Client) Rename(ctx context.Context, src, dst string, overwrite bool) error {
	return c.do(ctx, "POST", "/v1/rename", nil, api.RenameRequest{Src: src, Dst: dst, Overwrite: overwrite}, nil)
}

// Concat makes path the files sources joined in order and removes them,
// without copying their data (api.ConcatRequest says which files can be
// joined): S3's CompleteMultipartUpload of parts each stored with
// PutOptions.Stripes 1. fixity is the joined file's digest, if the caller
// has it (TreeHash), else "". o's COS, Overwrite, Mode and Xattrs apply.
func (c *Client) Concat(ctx context.Context, path string, sources []string, fixity string, o PutOptions) (*FileInfo, error) {
	var fi FileInfo
	return &fi, c.do(ctx, "POST", "/v1/concat", nil, api.ConcatRequest{Path: path, Sources: sources, COS: o.COS, Overwrite: o.Overwrite, Mode: o.Mode, Xattrs: o.Xattrs, Fixity: fixity}, &fi)
}

// Remove deletes a file or an empty directory; with recursive, a tree.
func (c *Client) Remove(ctx context.Context, p string, recursive bool) error {
	return c.do(ctx, "POST", "/v1/remove", nil, api.RemoveRequest{Path: p, Recursive: recursive}, nil)
}

// SetAttr changes mode, owner or times.
func (c *Client) SetAttr(ctx context.Context, r SetAttr) (*FileInfo, error) {
	var fi FileInfo
	return &fi, c.do(ctx, "POST", "/v1/setattr", nil, r, &fi)
}

// DF reports capacity and use per device and pool.
func (c *Client) DF(ctx context.Context) (*DF, error) {
	var df DF
	return &df, c.do(ctx, "GET", "/v1/df", nil, nil, &df)
}

// WhoAmI returns who the server takes this client to be.
func (c *Client) WhoAmI(ctx context.Context) (*api.WhoAmI, error) {
	var w api.WhoAmI
	return &w, c.do(ctx, "GET", "/v1/whoami", nil, nil, &w)
}

// TokenRequest and TokenInfo are the bearer tokens' vocabulary.
type (
	TokenRequest = api.TokenRequest
	TokenInfo    = api.TokenInfo
)

// CreateToken issues a bearer token (admins only); the reply is the only
// place its secret appears.
func (c *Client) CreateToken(ctx context.Context, r TokenRequest) (*TokenInfo, error) {
	var t TokenInfo
	return &t, c.do(ctx, "POST", "/v1/tokens", nil, r, &t)
}

// Tokens lists the bearer tokens (admins only).
func (c *Client) Tokens(ctx context.Context) ([]TokenInfo, error) {
	var ts []TokenInfo
	return ts, c.do(ctx, "GET", "/v1/tokens", nil, nil, &ts)
}

// S3Key returns an S3 access key with its secret (Token), for a gateway
// that checks Signature V4 (admin only).
func (c *Client) S3Key(ctx context.Context, id string) (*TokenInfo, error) {
	var t TokenInfo
	return &t, c.do(ctx, "GET", "/v1/tokens/s3", pathQuery(id), nil, &t)
}

// RevokeToken revokes a bearer token at once (admins only).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/v1/tokens/revoke", nil, api.RevokeRequest{ID: id}, nil)
}

// QuotaSet and QuotaInfo are the quotas' vocabulary.
type (
	QuotaSet  = api.QuotaSet
	QuotaInfo = api.QuotaInfo
)

// ErrQuota means a file would take its owner or group past a quota.
var ErrQuota = api.ErrQuota

// SetQuota sets a user's or group's limits (admins only); all zero
// removes the quota.
func (c *Client) SetQuota(ctx context.Context, r QuotaSet) (*QuotaInfo, error) {
	var q QuotaInfo
	return &q, c.do(ctx, "POST", "/v1/quota", nil, r, &q)
}

// Quota reports the caller's usage and limits, its user's and its groups'
// (user "": the caller; another user: admins only).
func (c *Client) Quota(ctx context.Context, user string) ([]QuotaInfo, error) {
	var qs []QuotaInfo
	var q url.Values
	if user != "" {
		q = url.Values{"user": {user}}
	}
	return qs, c.do(ctx, "GET", "/v1/quota", q, nil, &qs)
}

// maxRawReply bounds a page read whole (Metrics).
const maxRawReply = 64 << 20

// Metrics returns the core's /metrics page (Prometheus's text format).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	var b []byte
	return b, c.do(ctx, "GET", "/metrics", nil, nil, &b)
}

// Version returns the server's version.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	return v.Version, c.do(ctx, "GET", "/v1/version", nil, nil, &v)
}

// retryable reports whether a failed transfer may succeed on a new
// connection: transport failures are, answers from the server are not.
func retryable(err error) bool {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code == api.CodeExist // a mover still cleaning up a broken attempt
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, api.ErrCorrupt)
}

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(50<<attempt) * time.Millisecond
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// validUTF8 refuses a request whose strings (paths, names) are not valid
// UTF-8: JSON would carry them with U+FFFD in place of the bad bytes, and
// the server would create a name the caller never gave. (The server
// refuses such names in query strings itself.)
func validUTF8(in any, q url.Values) error {
	bad := func(s string) error {
		if utf8.ValidString(s) {
			return nil
		}
		return fmt.Errorf("%q: %w: not valid UTF-8", s, ErrInvalid)
	}
	for _, vs := range q {
		for _, s := range vs {
			if err := bad(s); err != nil {
				return err
			}
		}
	}
	v := reflect.Indirect(reflect.ValueOf(in))
	if v.Kind() != reflect.Struct {
		return nil
	}
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			if err := bad(f.String()); err != nil {
				return err
			}
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			for j := range f.Len() {
				if err := bad(f.Index(j).String()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
