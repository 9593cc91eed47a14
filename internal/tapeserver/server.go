package tapeserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/tape"
)

// DriveHost is what a tape server drives: its own drives of a shared
// library (tape.Emulator with Shared set), faults included so that a
// site can rehearse failures through the core.
type DriveHost interface {
	tape.Library
	tape.FaultInjector
}

// Server is a tape server's HTTP side: the core's drive operations and
// jobs, on the drives of lib.
type Server struct {
	lib  DriveHost
	exec *Exec
	key  []byte
	log  *slog.Logger
	now  func() time.Time
}

// NewServer serves lib's drives to the core that shares secret; jobs move
// data through pool.
func NewServer(lib DriveHost, pool *moverconn.Pool, secret []byte, log *slog.Logger) *Server {
	return &Server{lib: lib, exec: &Exec{Lib: lib, Pool: pool}, key: callKey(secret), log: log, now: time.Now}
}

// reply is every answer of a tape server: the drive's state after the
// operation, its cartridge's, and the result or the error.
type reply struct {
	Drive     *tape.DriveInfo     `json:"drive,omitempty"`
	Cartridge *tape.CartridgeInfo `json:"cartridge,omitempty"`
	Result    json.RawMessage     `json:"result,omitempty"`
	Error     *errBody            `json:"error,omitempty"`
}

// driveReq names a drive and what to do on it.
type driveReq struct {
	Drive      string `json:"drive"`
	Volume     string `json:"volume,omitempty"`
	Seq        int    `json:"seq,omitempty"`
	Offset     int64  `json:"offset,omitempty"`
	Length     int64  `json:"length,omitempty"`
	Failed     *bool  `json:"failed,omitempty"`
	Unreadable *bool  `json:"unreadable,omitempty"`
	WriteBad   *bool  `json:"write_errors,omitempty"`
}

// State is the drives and cartridges a tape server sees.
type State struct {
	Drives     []tape.DriveInfo     `json:"drives"`
	Cartridges []tape.CartridgeInfo `json:"cartridges"`
}

// Handler serves the tape server's API; every route but /healthz wants a
// request signed by the core.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/tape/state", s.signed(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(State{Drives: s.lib.Drives(), Cartridges: s.lib.Cartridges()})
	}))
	for path, op := range map[string]func(context.Context, driveReq) (any, error){
		"mount":    func(ctx context.Context, q driveReq) (any, error) { return nil, s.lib.Mount(ctx, q.Drive, q.Volume) },
		"dismount": func(ctx context.Context, q driveReq) (any, error) { return nil, s.lib.Dismount(ctx, q.Drive) },
		"flush":    func(ctx context.Context, q driveReq) (any, error) { return nil, s.lib.Flush(ctx, q.Drive) },
		"erase":    func(ctx context.Context, q driveReq) (any, error) { return nil, s.lib.Erase(ctx, q.Drive) },
		"header":   func(ctx context.Context, q driveReq) (any, error) { return s.lib.ReadHeader(ctx, q.Drive, q.Seq) },
		"trailer":  func(ctx context.Context, q driveReq) (any, error) { return s.lib.ReadTrailer(ctx, q.Drive, q.Seq) },
		"readthrough": func(ctx context.Context, q driveReq) (any, error) {
			return nil, s.lib.ReadThrough(ctx, q.Drive, q.Seq, q.Offset)
		},
		"fault": s.fault,
		"info":  func(context.Context, driveReq) (any, error) { return nil, nil },
	} {
		mux.HandleFunc("POST /v1/tape/"+path, s.signed(func(w http.ResponseWriter, r *http.Request) {
			var q driveReq
			if !decode(w, r, &q) {
				return
			}
			v, err := op(r.Context(), q)
			s.answer(w, q.Drive, v, err)
		}))
	}
	mux.HandleFunc("POST /v1/tape/job/write", s.signed(job(s, func(ctx context.Context, j WriteJob) (string, any, error) {
		r, err := s.exec.Write(ctx, j)
		return j.Drive, r, err
	})))
	mux.HandleFunc("POST /v1/tape/job/read", s.signed(job(s, func(ctx context.Context, j ReadJob) (string, any, error) {
		r, err := s.exec.Read(ctx, j)
		return j.Drive, r, err
	})))
	mux.HandleFunc("POST /v1/tape/job/verify", s.signed(job(s, func(ctx context.Context, j VerifyJob) (string, any, error) {
		r, err := s.exec.Verify(ctx, j)
		return j.Drive, r, err
	})))
	mux.HandleFunc("POST /v1/tape/append", s.signed(s.appendData))
	mux.HandleFunc("POST /v1/tape/read", s.signed(s.readData))
	return mux
}

func (s *Server) fault(ctx context.Context, q driveReq) (any, error) {
	if q.Failed != nil {
		if err := s.lib.FailDrive(q.Drive, *q.Failed); err != nil {
			return nil, err
		}
	}
	if q.Unreadable != nil {
		return nil, s.lib.SetUnreadable(q.Volume, *q.Unreadable)
	}
	if q.WriteBad != nil {
		return nil, s.lib.SetWriteErrors(q.Volume, *q.WriteBad)
	}
	return nil, nil
}

// job serves one kind of job.
func job[J any](s *Server, run func(context.Context, J) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var j J
		if !decode(w, r, &j) {
			return
		}
		drive, v, err := run(r.Context(), j)
		if err != nil {
			s.log.Warn("tape server: job failed", "path", r.URL.Path, "drive", drive, "err", err)
		}
		s.answer(w, drive, v, err)
	}
}

func (s *Server) signed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !checkCall(s.key, r.Method, r.URL.Path, r.Header.Get(authHeader), s.now()) {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(reply{Error: encodeErr(api.Errorf(api.ErrUnauthenticated, "tape server: the request is not signed by a core with the cluster secret (or the clocks differ by more than %v)", callSkew))})
			return
		}
		h(w, r)
	}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(reply{Error: encodeErr(api.Errorf(api.ErrInvalid, "tape server: bad request: %v", err))})
		return false
	}
	return true
}

// answer writes the reply to an operation on drive.
func (s *Server) answer(w http.ResponseWriter, drive string, v any, err error) {
	rep := reply{Error: encodeErr(err)}
	for _, d := range s.lib.Drives() {
		if d.ID == drive {
			rep.Drive = &d
			for _, c := range s.lib.Cartridges() {
				if d.Volume != "" && c.Volume == d.Volume {
					rep.Cartridge = &c
				}
			}
		}
	}
	if err == nil && v != nil {
		rep.Result, _ = json.Marshal(v)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}

// headerParam carries an appended tape file's header: base64 JSON in a
// request header, so that the library can refuse the append before the
// client sends data (Expect: 100-continue).
const headerParam = "Strata-Tape-Header"

func (s *Server) appendData(w http.ResponseWriter, r *http.Request) {
	drive := r.URL.Query().Get("drive")
	raw, err := base64.StdEncoding.DecodeString(r.Header.Get(headerParam))
	var h tape.Header
	if err == nil {
		err = json.Unmarshal(raw, &h)
	}
	if err != nil {
		s.answer(w, drive, nil, api.Errorf(api.ErrInvalid, "tape server: bad tape file header: %v", err))
		return
	}
	fw, err := s.lib.Append(r.Context(), drive, &h)
	if err != nil {
		s.answer(w, drive, nil, err)
		return
	}
	if _, err := io.Copy(fw, r.Body); err != nil {
		fw.Abort()
		s.answer(w, drive, nil, fmt.Errorf("append on %s: %w", drive, err))
		return
	}
	if r.Trailer.Get(abortTrailer) != "" {
		fw.Abort()
		s.answer(w, drive, nil, errAborted)
		return
	}
	if err := fw.Close(); err != nil {
		s.answer(w, drive, nil, err)
		return
	}
	s.answer(w, drive, WriteResult{Seq: fw.Seq(), Start: fw.Start(), EntryCRCs: fw.EntryCRCs()}, nil)
}

// abortTrailer ends an append's data that is to be abandoned.
const abortTrailer = "Strata-Tape-Abort"

// errTrailer carries an error that cut a data stream short.
const errTrailer = "Strata-Tape-Error"

func (s *Server) readData(w http.ResponseWriter, r *http.Request) {
	var q driveReq
	if !decode(w, r, &q) {
		return
	}
	rd, err := s.lib.ReadData(r.Context(), q.Drive, q.Seq, q.Offset, q.Length)
	if err != nil {
		s.answer(w, q.Drive, nil, err)
		return
	}
	defer rd.Close()
	w.Header().Set("Trailer", errTrailer)
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := io.Copy(w, rd); err != nil {
		b, _ := json.Marshal(encodeErr(err))
		w.Header().Set(errTrailer, base64.StdEncoding.EncodeToString(b))
	}
}
