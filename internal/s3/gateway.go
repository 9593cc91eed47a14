// Package s3 is Strata's S3 front end: an HTTP handler that speaks the S3
// REST API (Signature V4, including presigned URLs and aws-chunked
// bodies) on the public client package, with AWS's Glacier semantics for
// files on tape.
//
// Buckets are the top-level directories of a root in the namespace
// (/s3 by default) and keys with '/' are paths below them, so one file is
// the same through S3, the CLI, the mount and NFS. An access key belongs
// to a Strata user (strata s3 keys create); the gateway, an administrator
// of the core, checks each request's signature and then acts for that
// user (client.OnBehalfOf), so the core's own permission checks decide
// what a key may do. Object metadata (ETag, Content-Type, x-amz-meta-*,
// checksums) are the file's user.s3.* attributes, committed with the data
// in one catalog transaction: an object is never visible without them.
//
// The handlers are Strata's own rather than versitygw's front end behind a
// Strata backend: versitygw v1.8.0's go.mod requires 81 modules (33
// directly: the AWS and Azure SDKs, fiber and fasthttp, Kafka, NATS,
// RabbitMQ, Vault and LDAP clients) for what is here a few thousand lines
// on net/http and the standard library's hashes. The conformance suites
// (boto3, the aws cli, ceph's s3-tests) decide that the handlers are right.
package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// Config configures a gateway.
type Config struct {
	// Root is the directory whose subdirectories are the buckets
	// (default /s3).
	Root string
	// Region is the region reported to clients (default us-east-1);
	// requests signed for any region are accepted.
	Region string
	// Classes maps S3 storage classes to classes of service; "" is the
	// server's default class. Default: STANDARD → "", GLACIER and
	// DEEP_ARCHIVE → "archive".
	Classes map[string]string
	// KeyCache is how long a looked-up access key is trusted before it is
	// asked for again: a revoked key stops working within it (default
	// 30 s).
	KeyCache time.Duration
	Log      *slog.Logger
	// Now is the clock requests' times are checked against.
	Now func() time.Time
	// KeepAlive is how long a CompleteMultipartUpload, CopyObject or
	// UploadPartCopy runs before its status is sent and a space follows
	// every KeepAlive until the answer (default 10 s; negative: never).
	KeepAlive time.Duration
}

// DefaultClasses is the storage class mapping when none is configured.
var DefaultClasses = map[string]string{"STANDARD": "", "GLACIER": "archive", "DEEP_ARCHIVE": "archive"}

// Gateway serves S3 for a Strata core.
type Gateway struct {
	c    *client.Client
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	keys map[string]cachedKey
	// uploads serialise the Completes of one upload (a client that
	// timed out sends its Complete again while the first still copies):
	// the second waits and then gives the first's answer.
	uploads map[string]*uploadLock
}

type uploadLock struct {
	mu      sync.Mutex
	waiters int
}

// lockUpload holds upload id until the returned function is called.
func (g *Gateway) lockUpload(id string) (unlock func()) {
	g.mu.Lock()
	l := g.uploads[id]
	if l == nil {
		l = &uploadLock{}
		g.uploads[id] = l
	}
	l.waiters++
	g.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		g.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(g.uploads, id)
		}
		g.mu.Unlock()
	}
}

type cachedKey struct {
	k   *client.TokenInfo
	got time.Time
}

// New returns a gateway using c, which must authenticate as an
// administrator of the core (the server's own user on its socket, or an
// admin token): the gateway looks up secrets and acts for key owners.
func New(c *client.Client, cfg Config) *Gateway {
	if cfg.Root == "" {
		cfg.Root = "/s3"
	}
	cfg.Root = path.Clean("/" + cfg.Root)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Classes == nil {
		cfg.Classes = DefaultClasses
	}
	if cfg.KeyCache == 0 {
		cfg.KeyCache = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = defaultKeepAlive
	}
	return &Gateway{c: c, cfg: cfg, log: cfg.Log, keys: map[string]cachedKey{}, uploads: map[string]*uploadLock{}}
}

// Init creates the bucket root if it is missing: world-writable and
// sticky, as /tmp, so that every user may create buckets and only a
// bucket's owner may delete it. It checks that the gateway's client is an
// administrator.
func (g *Gateway) Init(ctx context.Context) error {
	who, err := g.c.WhoAmI(ctx)
	if err != nil {
		return err
	}
	if !who.Admin {
		return errors.New("s3 gateway: it acts for its users, so it must connect as an administrator (" + who.User + " is not): run it as the server's user or root, or with an admin token")
	}
	if _, err := g.c.Stat(ctx, g.cfg.Root); errors.Is(err, api.ErrNotFound) {
		if _, err := g.c.Mkdir(ctx, g.cfg.Root, true, 0o1777); err != nil {
			return err
		}
		_, err = g.c.SetAttr(ctx, client.SetAttr{Path: g.cfg.Root, Mode: ptr(uint32(0o1777))})
		return err
	} else if err != nil {
		return err
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// key returns the access key id's record, from the cache or the core.
func (g *Gateway) key(ctx context.Context, id string) (*client.TokenInfo, *Error) {
	now := time.Now()
	g.mu.Lock()
	ck, ok := g.keys[id]
	g.mu.Unlock()
	if ok && now.Sub(ck.got) < g.cfg.KeyCache {
		return ck.k, nil
	}
	k, err := g.c.S3Key(ctx, id)
	switch {
	case errors.Is(err, api.ErrNotFound):
		return nil, s3err("InvalidAccessKeyId", 403, "The AWS Access Key Id you provided does not exist in our records.")
	case err != nil:
		return nil, fromStrata(err, id)
	case k.Revoked != nil:
		return nil, s3err("InvalidAccessKeyId", 403, "The AWS Access Key Id you provided was revoked.")
	case k.Expires != nil && now.After(*k.Expires):
		return nil, s3err("InvalidAccessKeyId", 403, "The AWS Access Key Id you provided has expired.")
	}
	g.mu.Lock()
	if len(g.keys) > 10000 {
		g.keys = map[string]cachedKey{}
	}
	g.keys[id] = cachedKey{k: k, got: now}
	g.mu.Unlock()
	return k, nil
}

// request is one S3 request being served.
type request struct {
	g      *Gateway
	w      http.ResponseWriter
	r      *http.Request
	ctx    context.Context
	id     string // x-amz-request-id
	key    *client.TokenInfo
	body   io.Reader // the payload, de-chunked
	sig    *sigRequest
	trl    func() map[string]string
	ka     *keepAlive // a slow answer's, once started
	size   int64      // the payload's length; -1 unknown
	bucket string
	object string
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// ServeHTTP authenticates a request and routes it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := &request{g: g, w: w, r: r, ctx: r.Context(), id: newRequestID(), size: r.ContentLength}
	defer func() {
		if v := recover(); v != nil {
			g.log.Error("s3: panic serving a request", "method", r.Method, "path", r.URL.Path, "panic", v)
			q.fail(s3err("InternalError", 500, "internal error"))
		}
	}()
	w.Header().Set("x-amz-request-id", q.id)
	w.Header().Set("Server", "Strata")
	if e := q.authenticate(); e != nil {
		q.fail(e)
		return
	}
	q.bucket, q.object, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	var e *Error
	switch {
	case q.bucket == "":
		e = q.serviceOp()
	case q.object == "":
		e = q.bucketOp()
	default:
		e = q.objectOp()
	}
	if e != nil {
		q.fail(e)
	}
	q.ka.end() // answered: nothing may write after the handler returns
}

// fail sends e, logging server-side failures.
func (q *request) fail(e *Error) {
	if e.Status >= 500 {
		q.g.log.Warn("s3: request failed", "method", q.r.Method, "path", q.r.URL.Path, "code", e.Code, "err", e.Message)
	}
	if q.ka.end() {
		body, _ := xml.Marshal(xmlError{Code: e.Code, Message: e.Message, Resource: q.r.URL.Path, RequestID: q.id})
		q.w.Write(body)
		return
	}
	writeError(q.w, q.r, e, q.id)
}

// authenticate checks the request's signature and sets who it acts for
// and how to read its body.
func (q *request) authenticate() *Error {
	sig, ok, e := parseSig(q.r)
	if e != nil {
		return e
	}
	if !ok {
		// As S3: a bucket that does not exist is NoSuchBucket to anyone.
		b, _, _ := strings.Cut(strings.TrimPrefix(q.r.URL.Path, "/"), "/")
		if b != "" && validBucket(b) == nil {
			if _, err := q.g.c.Stat(q.ctx, q.g.path(b, "")); errors.Is(err, api.ErrNotFound) {
				return errNoSuchBucket(b)
			}
		}
		return errAccessDenied("Anonymous access is not allowed: sign requests with an access key (strata s3 keys create)")
	}
	k, e := q.g.key(q.ctx, sig.accessKey)
	if e != nil {
		return e
	}
	if e := sig.checkTime(q.g.cfg.Now()); e != nil {
		return e
	}
	key := signingKey(k.Token, sig.date, sig.region)
	if e := sig.verify(q.r, key); e != nil {
		return e
	}
	q.key, q.sig = k, sig
	q.ctx = client.OnBehalfOf(q.ctx, k.UID, k.GID, k.Groups)
	q.body = q.r.Body
	switch sig.payload {
	case streamingSigned, streamingSignedTrailer, streamingUnsignedTrail:
		if sig.presigned {
			return s3err("InvalidRequest", 400, "a presigned request cannot stream aws-chunked")
		}
		var ck []byte
		if sig.payload != streamingUnsignedTrail {
			ck = key
		}
		cr := newChunkedReader(q.r.Body, ck, sig)
		q.body, q.trl = cr, func() map[string]string { return cr.trailers }
		dl := q.r.Header.Get("X-Amz-Decoded-Content-Length")
		if dl == "" {
			return s3err("MissingContentLength", 411, "You must provide the x-amz-decoded-content-length header with an aws-chunked body")
		}
		var err error
		if q.size, err = strconv.ParseInt(dl, 10, 64); err != nil || q.size < 0 {
			return errInvalidArgument("x-amz-decoded-content-length %q", dl)
		}
	}
	return nil
}

// path is the namespace path of bucket and key.
func (g *Gateway) path(bucket, key string) string {
	if key == "" {
		return g.cfg.Root + "/" + bucket
	}
	return g.cfg.Root + "/" + bucket + "/" + strings.TrimSuffix(key, "/")
}

// classOf is the storage class a class of service is reported as.
func (g *Gateway) classOf(cos string) string {
	var names []string
	for class, k := range g.cfg.Classes {
		if k == cos && k != "" {
			names = append(names, class)
		}
	}
	if len(names) == 0 {
		return "STANDARD"
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "GLACIER" {
			return n
		}
	}
	return names[0]
}

// cosOf is the class of service for a storage class header.
func (g *Gateway) cosOf(class string) (string, *Error) {
	if class == "" {
		class = "STANDARD"
	}
	k, ok := g.cfg.Classes[class]
	if !ok {
		return "", s3err("InvalidStorageClass", 400, "The storage class you specified is not valid (this gateway knows %s)", strings.Join(g.classNames(), ", "))
	}
	return k, nil
}

func (g *Gateway) classNames() []string {
	var out []string
	for c := range g.cfg.Classes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// NewServer returns the HTTP server for g: net/http's, for its handling
// of Expect: 100-continue, which S3 clients send before large bodies.
func NewServer(g *Gateway, log *slog.Logger) *http.Server {
	return &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}

// Root is the directory holding the buckets.
func (g *Gateway) Root() string { return g.cfg.Root }
