// Package taperest is the WLCG Tape REST API (v1), the interface through
// which FTS and gfal2 stage files from tape at dCache, EOS+CTA and StoRM
// sites: stage requests, their progress and cancellation, releasing the
// staged copies, and where files are (archiveinfo).
//
// It is a translation layer: the core mounts it on its control port,
// behind the core's authentication (bearer tokens, WLCG JWTs with their
// storage.stage and storage.read scopes), and every file operation is the
// core's own Stage, StageStatus, Release and Stat, which check what the
// caller may do. A stage request of many files is one Stage call, so the
// recall scheduler orders it by cartridge and position. What this package
// adds is the request: its ID, its files and their cancellation, kept in
// memory (a restart forgets requests, not the recalls they queued) for
// RequestTTL after it was made.
//
// Reference: "WLCG Tape REST API reference document", v1
// (https://cernbox.cern.ch/s/CMZT6eQgb3NyAE8, as implemented by dCache and
// EOS); see docs/HSM.md for which parts Strata implements.
package taperest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
)

// Backend is what the API stands on: the core's operations, each checking
// the caller in ctx.
type Backend interface {
	Stage(ctx context.Context, r api.StageRequest) (api.StageResponse, error)
	StageStatus(ctx context.Context, p string) (api.StageStatus, error)
	Release(ctx context.Context, r api.ReleaseRequest) (struct{}, error)
	Stat(ctx context.Context, p string) (api.FileInfo, error)
}

// Limits.
const (
	MaxFiles   = 100000             // files in one request
	RequestTTL = 7 * 24 * time.Hour // how long a request is remembered
	maxBody    = 64 << 20
)

// API serves the Tape REST API.
type API struct {
	b   Backend
	now func() time.Time
	mu  sync.Mutex
	req map[string]*request
}

// New returns the API on b.
func New(b Backend, now func() time.Time) *API {
	if now == nil {
		now = time.Now
	}
	return &API{b: b, now: now, req: map[string]*request{}}
}

type file struct {
	path      string
	cancelled bool
	started   time.Time
	finished  time.Time
	state     string
	err       string
	onDisk    bool
}

type request struct {
	id        string
	uid       uint32
	created   time.Time
	started   time.Time
	completed time.Time
	files     []*file
	byPath    map[string]*file
}

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/wlcg-tape-rest-api", a.wellKnown)
	mux.HandleFunc("POST /api/v1/stage", a.stage)
	mux.HandleFunc("GET /api/v1/stage/{id}", a.status)
	mux.HandleFunc("POST /api/v1/stage/{id}/cancel", a.cancel)
	mux.HandleFunc("DELETE /api/v1/stage/{id}", a.delete)
	mux.HandleFunc("POST /api/v1/release/{id}", a.release)
	mux.HandleFunc("POST /api/v1/archiveinfo", a.archiveInfo)
}

// problem answers with an RFC 7807 problem, as the reference asks.
func problem(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": fmt.Sprintf(format, args...)})
}

// Fail answers err as an RFC 7807 problem with the status the API gives
// its code: what the core sends for a refused Tape REST request.
func Fail(w http.ResponseWriter, err error) {
	_, status := api.CodeOf(err)
	problem(w, status, "%v", err)
}

// Owns reports whether a request path is the API's.
func Owns(path string) bool { return strings.HasPrefix(path, "/api/v1/") }

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		json.NewEncoder(w).Encode(v)
	}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		problem(w, 400, "the request body is not the JSON this call takes: %v", err)
		return false
	}
	return true
}

func (a *API) wellKnown(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	reply(w, 200, map[string]any{"sitename": "strata", "description": "Strata WLCG Tape REST API",
		"endpoints": []map[string]any{{"uri": scheme + "://" + r.Host + "/api/v1/", "version": "v1", "metadata": map[string]any{}}}})
}

// isoDuration is the part of ISO 8601 durations lifetimes use; five
// digits a field keep the sum within a time.Duration.
var isoDuration = regexp.MustCompile(`^P(?:(\d{1,5})D)?(?:T(?:(\d{1,5})H)?(?:(\d{1,5})M)?(?:(\d{1,5})S)?)?$`)

// parseLifetime reads an ISO 8601 duration such as "P1D" or "PT12H".
func parseLifetime(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return 0, fmt.Errorf("diskLifetime %q is not an ISO 8601 duration like P1D or PT12H", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			n, err := strconv.ParseInt(m[i+1], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("diskLifetime %q: %w", s, err)
			}
			d += time.Duration(n) * unit
		}
	}
	return d, nil
}

// stage serves POST /api/v1/stage: one recall of all the files.
func (a *API) stage(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Files []struct {
			Path             string         `json:"path"`
			DiskLifetime     string         `json:"diskLifetime"`
			TargetedMetadata map[string]any `json:"targetedMetadata"`
		} `json:"files"`
	}
	if !decode(w, r, &req) {
		return
	}
	if len(req.Files) == 0 || len(req.Files) > MaxFiles {
		problem(w, 400, "a stage request names 1 to %d files, not %d", MaxFiles, len(req.Files))
		return
	}
	who := auth.From(r.Context())
	rq := &request{id: newID(), uid: who.UID, created: a.now(), byPath: map[string]*file{}}
	var pin time.Duration
	var paths []string
	for _, f := range req.Files {
		if f.Path == "" || !strings.HasPrefix(f.Path, "/") {
			problem(w, 400, "file path %q is not absolute", f.Path)
			return
		}
		if f.DiskLifetime != "" {
			d, err := parseLifetime(f.DiskLifetime)
			if err != nil {
				problem(w, 400, "%v", err)
				return
			}
			pin = max(pin, d) // one Stage call: the longest lifetime asked
		}
		if rq.byPath[f.Path] != nil {
			continue
		}
		fl := &file{path: f.Path, state: "SUBMITTED"}
		rq.files = append(rq.files, fl)
		rq.byPath[f.Path] = fl
		paths = append(paths, f.Path)
	}
	// All the files are queued in one call. Should one be missing or
	// not the caller's to stage, each is tried alone: those fail in the
	// request (as the reference has it), the others are queued.
	if _, err := a.b.Stage(r.Context(), api.StageRequest{Paths: paths, Pin: pin.Seconds()}); err != nil {
		for _, p := range paths {
			if _, err := a.b.Stage(r.Context(), api.StageRequest{Paths: []string{p}, Pin: pin.Seconds()}); err != nil {
				fl := rq.byPath[p]
				fl.state, fl.err, fl.finished = "FAILED", err.Error(), a.now()
			}
		}
	}
	a.mu.Lock()
	a.expireLocked()
	a.req[rq.id] = rq
	a.mu.Unlock()
	w.Header().Set("Location", "/api/v1/stage/"+rq.id)
	reply(w, 201, map[string]string{"requestId": rq.id})
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (a *API) expireLocked() {
	for id, rq := range a.req {
		if a.now().Sub(rq.created) > RequestTTL {
			delete(a.req, id)
		}
	}
}

// lookup returns the caller's request id (an administrator's: anyone's).
func (a *API) lookup(w http.ResponseWriter, r *http.Request) *request {
	a.mu.Lock()
	rq := a.req[r.PathValue("id")]
	a.mu.Unlock()
	who := auth.From(r.Context())
	if rq == nil || !who.Admin && who.UID != rq.uid {
		problem(w, 404, "no stage request %q", r.PathValue("id"))
		return nil
	}
	return rq
}

// refresh asks the core where each unfinished file of rq stands.
func (a *API) refresh(ctx context.Context, rq *request) {
	now := a.now()
	for _, f := range rq.files {
		if f.cancelled || f.state == "FAILED" || f.state == "COMPLETED" {
			continue
		}
		st, err := a.b.StageStatus(ctx, f.path)
		switch {
		case err != nil:
			f.state, f.err = "FAILED", err.Error()
		case st.State == api.StageResident:
			f.state, f.onDisk = "COMPLETED", true
		case st.State == api.StageActive:
			f.state = "STARTED"
		case st.State == api.StageFailed:
			f.state, f.err = "FAILED", st.Error
		default: // queued, or (after a restart of the core) offline
			f.state = "SUBMITTED"
		}
		if f.state != "SUBMITTED" && f.started.IsZero() {
			f.started = now
		}
		if (f.state == "COMPLETED" || f.state == "FAILED") && f.finished.IsZero() {
			f.finished = now
		}
	}
	done := true
	for _, f := range rq.files {
		if !f.started.IsZero() && rq.started.IsZero() {
			rq.started = now
		}
		if f.finished.IsZero() {
			done = false
		}
	}
	if done && rq.completed.IsZero() {
		rq.completed = now
	}
}

func unix(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}

// status serves GET /api/v1/stage/{id}.
func (a *API) status(w http.ResponseWriter, r *http.Request) {
	rq := a.lookup(w, r)
	if rq == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh(r.Context(), rq)
	files := make([]map[string]any, 0, len(rq.files))
	for _, f := range rq.files {
		m := map[string]any{"path": f.path, "state": f.state, "onDisk": f.onDisk}
		if f.err != "" {
			m["error"] = f.err
		}
		if v := unix(f.started); v != nil {
			m["startedAt"] = v
		}
		if v := unix(f.finished); v != nil {
			m["finishedAt"] = v
		}
		files = append(files, m)
	}
	out := map[string]any{"id": rq.id, "createdAt": rq.created.Unix(), "files": files}
	if v := unix(rq.started); v != nil {
		out["startedAt"] = v
	}
	if v := unix(rq.completed); v != nil {
		out["completedAt"] = v
	}
	reply(w, 200, out)
}

// paths reads {"paths": [...]}, each of which must be in rq.
func (a *API) paths(w http.ResponseWriter, r *http.Request, rq *request) []*file {
	var req struct {
		Paths []string `json:"paths"`
	}
	if !decode(w, r, &req) {
		return nil
	}
	if len(req.Paths) == 0 {
		problem(w, 400, "no paths given")
		return nil
	}
	var out []*file
	for _, p := range req.Paths {
		f := rq.byPath[p]
		if f == nil {
			problem(w, 400, "%s is not a file of stage request %s", p, rq.id)
			return nil
		}
		out = append(out, f)
	}
	return out
}

// cancel serves POST /api/v1/stage/{id}/cancel: the files named stop
// counting in the request and their disk copies' pins go. (A recall the
// scheduler has already queued still runs: the copy it brings back is
// purgeable as any other.)
func (a *API) cancel(w http.ResponseWriter, r *http.Request) {
	rq := a.lookup(w, r)
	if rq == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fs := a.paths(w, r, rq)
	if fs == nil {
		return
	}
	var rel []string
	for _, f := range fs {
		if f.state == "COMPLETED" || f.state == "FAILED" || f.cancelled {
			continue
		}
		f.cancelled, f.state, f.finished = true, "CANCELLED", a.now()
		rel = append(rel, f.path)
	}
	if len(rel) > 0 {
		if _, err := a.b.Release(r.Context(), api.ReleaseRequest{Paths: rel}); err != nil && !errors.Is(err, api.ErrNotFound) {
			Fail(w, err)
			return
		}
	}
	reply(w, 200, nil)
}

// delete serves DELETE /api/v1/stage/{id}: the request is forgotten, its
// unfinished files cancelled.
func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	rq := a.lookup(w, r)
	if rq == nil {
		return
	}
	a.mu.Lock()
	delete(a.req, rq.id)
	a.mu.Unlock()
	reply(w, 200, nil)
}

// release serves POST /api/v1/release/{id}: the files' disk copies are
// unpinned, the purge policy free to take them.
func (a *API) release(w http.ResponseWriter, r *http.Request) {
	rq := a.lookup(w, r)
	if rq == nil {
		return
	}
	a.mu.Lock()
	fs := a.paths(w, r, rq)
	a.mu.Unlock()
	if fs == nil {
		return
	}
	var ps []string
	for _, f := range fs {
		ps = append(ps, f.path)
	}
	if _, err := a.b.Release(r.Context(), api.ReleaseRequest{Paths: ps}); err != nil {
		Fail(w, err)
		return
	}
	reply(w, 200, nil)
}

// locality is where a file is, in the reference's words.
func locality(fi api.FileInfo) string {
	switch fi.Residency {
	case api.ResidencyBoth:
		return "DISK_AND_TAPE"
	case api.ResidencyTape, api.ResidencyStaging:
		return "TAPE"
	case api.ResidencyDisk:
		return "DISK"
	case api.ResidencyLost:
		return "LOST"
	}
	if fi.Size == 0 {
		return "DISK" // an empty file has nothing to lose
	}
	return "NONE"
}

// archiveInfo serves POST /api/v1/archiveinfo.
func (a *API) archiveInfo(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if !decode(w, r, &req) {
		return
	}
	if len(req.Paths) > MaxFiles {
		problem(w, 400, "at most %d paths", MaxFiles)
		return
	}
	out := make([]map[string]any, 0, len(req.Paths))
	for _, p := range req.Paths {
		fi, err := a.b.Stat(r.Context(), p)
		switch {
		case err != nil:
			out = append(out, map[string]any{"path": p, "error": err.Error()})
		case fi.Type == api.TypeDir:
			out = append(out, map[string]any{"path": p, "error": "a directory"})
		default:
			out = append(out, map[string]any{"path": p, "locality": locality(fi)})
		}
	}
	reply(w, 200, out)
}
