package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/audit"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/taperest"
)

// maxBody bounds a control request; the largest (a commit of a very wide
// stripe) is a few KiB.
const maxBody = 4 << 20

// Handler returns the control API.
func (c *Core) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stat", query(c, c.Stat))
	mux.HandleFunc("GET /v1/list", c.listHandler)
	mux.HandleFunc("GET /v1/open", query(c, c.Open))
	mux.HandleFunc("POST /v1/damaged", body(c, c.ReportDamage))
	mux.HandleFunc("POST /v1/unreachable", body(c, c.ReportUnreachable))
	mux.HandleFunc("GET /v1/df", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.DF(r.Context())
		c.reply(w, resp, err)
	})
	mux.HandleFunc("POST /v1/mkdir", body(c, c.Mkdir))
	mux.HandleFunc("POST /v1/symlink", body(c, c.Symlink))
	mux.HandleFunc("GET /v1/xattr", query(c, c.Xattrs))
	mux.HandleFunc("POST /v1/xattr", body(c, c.SetXattr))
	mux.HandleFunc("POST /v1/xattr/remove", body(c, c.RemoveXattr))
	mux.HandleFunc("POST /v1/create", body(c, c.Create))
	mux.HandleFunc("POST /v1/commit", body(c, c.Commit))
	mux.HandleFunc("POST /v1/creates", batched(c, "POST /v1/create", c.Create, func(r api.CreateRequest) (string, int64) { return r.Path, r.Size }))
	mux.HandleFunc("POST /v1/commits", batched(c, "POST /v1/commit", c.Commit, func(r api.CommitRequest) (string, int64) { return r.Path, r.Size }))
	mux.HandleFunc("POST /v1/concat", body(c, c.Concat))
	mux.HandleFunc("POST /v1/abort", body(c, func(ctx context.Context, r api.AbortRequest) (struct{}, error) { return struct{}{}, c.Abort(ctx, r) }))
	mux.HandleFunc("POST /v1/rename", body(c, func(ctx context.Context, r api.RenameRequest) (struct{}, error) { return struct{}{}, c.Rename(ctx, r) }))
	mux.HandleFunc("POST /v1/remove", body(c, func(ctx context.Context, r api.RemoveRequest) (struct{}, error) { return struct{}{}, c.Remove(ctx, r) }))
	mux.HandleFunc("POST /v1/setattr", body(c, c.SetAttr))
	mux.HandleFunc("POST /v1/movers/register", body(c, c.RegisterRemote))
	mux.HandleFunc("POST /v1/tapeservers/register", body(c, c.RegisterTapeServer))
	mux.HandleFunc("POST /v1/stage", body(c, c.Stage))
	mux.HandleFunc("GET /v1/stage", func(w http.ResponseWriter, r *http.Request) {
		// ?wait=DURATION waits for a queued or running recall to end.
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		query(c, func(ctx context.Context, p string) (api.StageStatus, error) { return c.StageWait(ctx, p, wait) })(w, r)
	})
	mux.HandleFunc("POST /v1/migrate", body(c, c.Migrate))
	mux.HandleFunc("POST /v1/purge", body(c, c.Purge))
	mux.HandleFunc("POST /v1/repack", body(c, c.Repack))
	mux.HandleFunc("POST /v1/scrub", body(c, c.Scrub))
	mux.HandleFunc("POST /v1/library/service", body(c, c.SetService))
	mux.HandleFunc("POST /v1/library/fault", body(c, c.InjectFault))
	mux.HandleFunc("GET /v1/cos", func(w http.ResponseWriter, r *http.Request) { c.reply(w, c.ClassesOfService(), nil) })
	mux.HandleFunc("POST /v1/cos", body(c, c.SetCOS))
	mux.HandleFunc("GET /v1/library", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.Library(r.Context())
		c.reply(w, resp, err)
	})
	mux.HandleFunc("GET /v1/lost", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.LostFiles(r.Context())
		c.reply(w, resp, err)
	})
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, r *http.Request) {
		c.reply(w, map[string]any{"version": api.Version, "epoch": c.epoch}, nil)
	})
	mux.HandleFunc("GET /v1/local", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		l := c.local
		c.mu.Unlock()
		c.reply(w, l, nil)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.WhoAmI(r.Context())
		c.reply(w, resp, err)
	})
	mux.HandleFunc("POST /v1/tokens", body(c, c.CreateToken))
	mux.HandleFunc("GET /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.Tokens(r.Context())
		c.reply(w, resp, err)
	})
	mux.HandleFunc("GET /v1/tokens/s3", query(c, c.S3Key))
	mux.HandleFunc("POST /v1/release", body(c, c.Release))
	taperest.New(c, c.now).Register(mux)
	mux.HandleFunc("POST /v1/quota", body(c, c.SetQuota))
	mux.HandleFunc("GET /v1/quota", func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.Quota(r.Context(), r.URL.Query().Get("user"))
		c.reply(w, resp, err)
	})
	mux.HandleFunc("POST /v1/tokens/revoke", body(c, func(ctx context.Context, r api.RevokeRequest) (struct{}, error) {
		return struct{}{}, c.RevokeToken(ctx, r)
	}))
	return c.recoverer(c.authenticate(mux))
}

// public are the routes anyone may call without credentials: liveness,
// the version, where the Unix socket is (a client on this host must learn
// it before it can authenticate by its credentials there), and mover
// registration (which proves itself with the cluster secret instead).
var public = map[string]bool{"/healthz": true, "/v1/version": true, "/v1/local": true, "/v1/movers/register": true, "/v1/tapeservers/register": true, "/.well-known/wlcg-tape-rest-api": true}

// authenticate puts the caller's identity into every request's context,
// or answers 401; with an audit log, it writes a line for every request
// that changes something and for every one refused.
func (c *Core) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pub := public[r.URL.Path]
		var id *auth.Identity
		var err error
		if !pub {
			id, err = c.Identify(r)
		}
		if c.audit == nil {
			if err != nil {
				c.unauthenticated(w, r, err)
				return
			}
			if id != nil && auth.From(r.Context()) != id {
				r = r.WithContext(auth.With(r.Context(), id))
			}
			next.ServeHTTP(w, r)
			return
		}
		// The body is in memory already (the server buffers it); keep a
		// copy to name the paths in the record.
		var body []byte
		if r.Method != http.MethodGet && r.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(r.Body, maxBody))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sw := &auditWriter{ResponseWriter: w, status: http.StatusOK}
		if err != nil {
			c.unauthenticated(sw, r, err)
		} else {
			if id != nil && auth.From(r.Context()) != id {
				r = r.WithContext(auth.With(r.Context(), id))
			}
			next.ServeHTTP(sw, r)
		}
		if batchRoutes[r.URL.Path] && sw.status == http.StatusOK {
			return // each call was audited on its own
		}
		if sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden || r.Method != http.MethodGet && !pub {
			c.auditRequest(r, id, body, sw)
		}
	})
}

func (c *Core) unauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, api.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
	}
	if taperest.Owns(r.URL.Path) {
		taperest.Fail(w, err) // the Tape REST API answers in its own error format
		return
	}
	c.reply(w, nil, err)
}

// auditWriter remembers a reply's status and the start of an error body.
type auditWriter struct {
	http.ResponseWriter
	status  int
	errBody []byte
}

func (w *auditWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status >= 400 && len(w.errBody) < 1024 {
		w.errBody = append(w.errBody, b[:min(len(b), 1024-len(w.errBody))]...)
	}
	return w.ResponseWriter.Write(b)
}

// auditRecord starts the audit record of op, answered with status, made
// by id through r.
func (c *Core) auditRecord(r *http.Request, id *auth.Identity, op string, status int) audit.Record {
	rec := audit.Record{Time: c.now().UTC(), Op: op, Status: status, Remote: r.RemoteAddr}
	if rec.Remote == "" || rec.Remote == "@" {
		rec.Remote = "unix"
	}
	if id != nil {
		uid := id.UID
		rec.User, rec.UID, rec.Auth, rec.Token = id.User, &uid, id.Method, id.TokenID
	}
	return rec
}

// auditRequest writes the audit record of r.
func (c *Core) auditRequest(r *http.Request, id *auth.Identity, body []byte, w *auditWriter) {
	rec := c.auditRecord(r, id, r.Method+" "+r.URL.Path, w.status)
	if p := r.URL.Query().Get("path"); p != "" {
		rec.Paths = append(rec.Paths, p)
	}
	if len(body) > 0 {
		// What the request named, whatever its type: a path, a rename's
		// two, a stage's many, a size, a token's or cartridge's name.
		var named struct {
			Path, Src, Dst, Volume, Name, ID, User string
			Paths, Sources                         []string
			Size                                   int64
		}
		if api.NewDecoder(bytes.NewReader(body)).Decode(&named) == nil {
			for _, p := range []string{named.Path, named.Src, named.Dst} {
				if p != "" {
					rec.Paths = append(rec.Paths, p)
				}
			}
			rec.Paths = append(append(rec.Paths, named.Paths...), named.Sources...)
			for _, p := range []string{named.Volume, named.Name, named.ID, named.User} {
				if p != "" && len(rec.Paths) == 0 {
					rec.Paths = append(rec.Paths, p)
				}
			}
			rec.Bytes = named.Size
		}
	}
	if w.status >= 400 {
		var e api.Error
		if api.NewDecoder(bytes.NewReader(w.errBody)).Decode(&e) == nil {
			rec.Error = e.Msg
		}
	}
	c.audit.Write(rec)
}

// recoverer turns a panic in a handler into a 500 for that request alone:
// the server keeps serving everyone else.
func (c *Core) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				c.log.Error("core: panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				c.reply(w, nil, fmt.Errorf("%w: %v", api.ErrInternal, v))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// listHandler serves one page of a listing: ?path=P[&after=NAME][&limit=N].
// The reply is the page's entries; when more follow, the Strata-Next header
// holds the cursor for the next request's after (query-escaped, as names
// may hold any byte but '/' and NUL).
func (c *Core) listHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		c.reply(w, nil, api.Errorf(api.ErrInvalid, "missing path"))
		return
	}
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			c.reply(w, nil, api.Errorf(api.ErrInvalid, "bad limit %q", l))
			return
		}
		limit = n
	}
	page, more, err := c.List(r.Context(), p, q.Get("after"), limit)
	if more {
		w.Header().Set(api.ListNextHeader, url.QueryEscape(page[len(page)-1].Name))
	}
	c.reply(w, page, err)
}

func query[Resp any](c *Core, fn func(context.Context, string) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		if p == "" {
			c.reply(w, nil, api.Errorf(api.ErrInvalid, "missing path"))
			return
		}
		resp, err := fn(r.Context(), p)
		c.reply(w, resp, err)
	}
}

func body[Req, Resp any](c *Core, fn func(context.Context, Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		dec := api.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			c.reply(w, nil, api.Errorf(api.ErrInvalid, "bad request body: %v", err))
			return
		}
		resp, err := fn(r.Context(), req)
		c.reply(w, resp, err)
	}
}

func (c *Core) reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		e, status := c.errorOf(err)
		w.WriteHeader(status)
		api.NewEncoder(w).Encode(e)
		return
	}
	api.NewEncoder(w).Encode(v)
}

// errorOf is err as the API answers it, with its HTTP status.
func (c *Core) errorOf(err error) (api.Error, int) {
	code, status := api.CodeOf(err)
	if status == 500 && !errors.Is(err, api.ErrCorrupt) {
		c.log.Warn("core: request failed", "err", err)
	}
	msg := err.Error()
	var d *denial
	if errors.As(err, &d) {
		msg = d.Error() // it names the path and what was missing: no operation prefix needed
	}
	return api.Error{Code: code, Msg: msg}, status
}
