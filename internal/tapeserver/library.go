package tapeserver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/wire"
)

// LostAfter is how long a tape server may go without registering before
// the robot may take the cartridges out of its drives: three missed
// registrations, and longer than the tape server's connections take to
// notice a dead peer (moverconn's keepalive and user timeout), so that a
// server cut off by the network has stopped writing before another drive
// mounts its cartridge.
const LostAfter = 20 * time.Second

// LibraryOptions configure the core's view of a library whose drives are
// on tape servers.
type LibraryOptions struct {
	Generation tape.Generation
	Capacity   int64 // per cartridge; default the generation's
	Clock      clock.Clock
	Secret     []byte
	TLS        *tls.Config // to verify tape servers that speak HTTPS
	Log        *slog.Logger
	// LostAfter overrides the package's LostAfter (tests).
	LostAfter time.Duration
}

// Library is a tape library whose drives are on tape servers: the core
// keeps the robot (one, shared by every server's drives) and the table of
// which cartridge is where; drive operations and jobs go to the server
// that owns the drive. It is a tape.Library, a tape.FaultInjector and
// Jobs.
type Library struct {
	gen      tape.Generation
	capacity int64
	clk      clock.Clock
	key      []byte
	secret   []byte
	hc       *http.Client
	log      *slog.Logger
	now      func() time.Time
	robot    chan struct{}
	// lostAfter is LostAfter, or the options' override.
	lostAfter time.Duration

	mu        sync.Mutex
	robotFail int
	servers   map[string]*server
	drives    map[string]*remoteDrive
	carts     map[string]*tape.CartridgeInfo
}

type server struct {
	id, url string
	seen    time.Time // last registration
	down    bool      // a request to it failed; until it registers again
}

type remoteDrive struct {
	srv   *server
	info  tape.DriveInfo
	robot tape.Stats // the robot's time for this drive's exchanges
	ops   int        // operations in flight: a registration does not overwrite their state
}

// NewLibrary returns a library with no drives yet: tape servers add theirs
// when they register.
func NewLibrary(o LibraryOptions) *Library {
	if o.Capacity <= 0 {
		o.Capacity = o.Generation.Capacity
	}
	// The scheduler's geometry comes from the generation before any tape
	// server has reported a cartridge.
	o.Generation.Capacity = o.Capacity
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.LostAfter <= 0 {
		o.LostAfter = LostAfter
	}
	d := moverconn.Dialer()
	// No overall timeout: a job lasts as long as its tape file takes. A
	// dead peer is noticed by the dialer's keepalive and user timeout, a
	// live host whose tape server hangs by its silence (watch).
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: o.TLS, ExpectContinueTimeout: 10 * time.Minute,
		MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}
	return &Library{gen: o.Generation, capacity: o.Capacity, clk: o.Clock, key: callKey(o.Secret), secret: o.Secret,
		hc: &http.Client{Transport: tr}, log: o.Log, now: time.Now, robot: make(chan struct{}, 1), lostAfter: o.LostAfter,
		servers: map[string]*server{}, drives: map[string]*remoteDrive{}, carts: map[string]*tape.CartridgeInfo{}}
}

// Register records a tape server's registration: its drives join the
// library, cartridges it sees that the library does not know are added,
// and a drive it reports empty that the table says holds a cartridge
// (the server restarted) gives the cartridge back to its slot.
func (l *Library) Register(r Registration) error {
	if r.ID == "" || r.URL == "" {
		return api.Errorf(api.ErrInvalid, "register tape server: id and url required")
	}
	if !hmac.Equal([]byte(r.Proof), []byte(Proof(l.secret, r))) {
		return api.Errorf(api.ErrDenied, "register tape server %s: bad proof (is the cluster secret the same?)", r.ID)
	}
	if r.Generation != "" && r.Generation != l.gen.Name {
		return api.Errorf(api.ErrInvalid, "register tape server %s: its drives are %s, the library's %s", r.ID, r.Generation, l.gen.Name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range r.Drives {
		if rd := l.drives[d.ID]; rd != nil && rd.srv.id != r.ID {
			return api.Errorf(api.ErrExist, "register tape server %s: drive %s belongs to tape server %s", r.ID, d.ID, rd.srv.id)
		}
	}
	s := l.servers[r.ID]
	if s == nil {
		s = &server{id: r.ID}
		l.servers[r.ID] = s
		l.log.Info("tape server registered", "id", r.ID, "url", r.URL, "drives", len(r.Drives))
	} else if s.down {
		l.log.Info("tape server back", "id", r.ID, "url", r.URL)
	}
	s.url, s.seen, s.down = r.URL, l.now(), false
	for _, d := range r.Drives {
		rd := l.drives[d.ID]
		if rd == nil {
			rd = &remoteDrive{}
			l.drives[d.ID] = rd
		}
		rd.srv = s
		if rd.ops > 0 {
			continue
		}
		if rd.info.Volume != "" && d.Volume == "" { // restarted: its drive came up empty
			if c := l.carts[rd.info.Volume]; c != nil && c.Drive == d.ID {
				c.Drive = ""
			}
		}
		rd.info = d
	}
	for _, c := range r.Cartridges {
		if l.carts[c.Volume] == nil {
			c.Drive = ""
			l.carts[c.Volume] = &c
		}
	}
	return nil
}

// Generation is the drives' generation, with the configured capacity.
func (l *Library) Generation() tape.Generation { return l.gen }

// Cartridges lists the cartridges in volume order.
func (l *Library) Cartridges() []tape.CartridgeInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]tape.CartridgeInfo, 0, len(l.carts))
	for _, c := range l.carts {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}

// Drives lists the drives in ID order; those of a tape server that is
// lost are marked so, and nothing is scheduled on them until it is back.
func (l *Library) Drives() []tape.DriveInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]tape.DriveInfo, 0, len(l.drives))
	for _, d := range l.drives {
		di := d.info
		di.Stats.Add(d.robot)
		di.Lost = l.lostLocked(d.srv)
		out = append(out, di)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lostLocked reports whether s cannot be used: a request failed, or it
// has not registered for a while.
func (l *Library) lostLocked(s *server) bool {
	return s.down || l.now().Sub(s.seen) > l.lostAfter
}

// Stats sums every drive's counters.
func (l *Library) Stats() tape.Stats {
	var s tape.Stats
	for _, d := range l.Drives() {
		s.Add(d.Stats)
	}
	return s
}

// take finds drive id and marks an operation in flight on it.
func (l *Library) take(id string) (*remoteDrive, *server, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.drives[id]
	if d == nil {
		return nil, nil, fmt.Errorf("%w: %s", tape.ErrNoSuchDrive, id)
	}
	d.ops++
	return d, d.srv, nil
}

func (l *Library) done(d *remoteDrive) {
	l.mu.Lock()
	d.ops--
	l.mu.Unlock()
}

// call sends one request about drive id to its tape server and decodes
// the result into out.
func (l *Library) call(ctx context.Context, id, path string, in, out any) error {
	d, s, err := l.take(id)
	if err != nil {
		return err
	}
	defer l.done(d)
	return l.callOn(ctx, d, s, path, in, out)
}

func (l *Library) callOn(ctx context.Context, d *remoteDrive, s *server, path string, in, out any) error {
	b, _ := json.Marshal(in)
	resp, err := l.do(ctx, s, "/v1/tape/"+path, bytes.NewReader(b), nil, nil)
	if err != nil {
		return l.lost(ctx, s, err)
	}
	defer resp.Body.Close()
	return l.result(ctx, d, s, resp, out)
}

// result decodes a reply, updating the drive's and its cartridge's state.
func (l *Library) result(ctx context.Context, d *remoteDrive, s *server, resp *http.Response, out any) error {
	var rep reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return l.lost(ctx, s, fmt.Errorf("%s: %w", resp.Status, err))
	}
	l.mu.Lock()
	if rep.Drive != nil && d != nil {
		d.info = *rep.Drive
	}
	if c := rep.Cartridge; c != nil && l.carts[c.Volume] != nil {
		have := l.carts[c.Volume]
		have.Used, have.Files, have.Unreadable, have.Capacity = c.Used, c.Files, c.Unreadable, c.Capacity
	}
	l.mu.Unlock()
	if rep.Error != nil {
		return rep.Error.err()
	}
	if out != nil && rep.Result != nil {
		return json.Unmarshal(rep.Result, out)
	}
	return nil
}

// do sends one request to s, watched (see watch) until its reply's body
// is closed.
func (l *Library) do(ctx context.Context, s *server, path string, body io.Reader, hdr, trailer http.Header) (*http.Response, error) {
	l.mu.Lock()
	url := s.url
	l.mu.Unlock()
	ctx, stop := l.watch(ctx, s)
	req, err := http.NewRequestWithContext(ctx, "POST", url+path, body)
	if err != nil {
		stop()
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Trailer = trailer
	req.Header.Set(authHeader, signCall(l.key, "POST", req.URL.Path, l.now()))
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		stop()
		return nil, lostCause(ctx, err)
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: ctx, stop: stop}
	return resp, nil
}

// watch returns ctx, cancelled with an ErrLost cause once s is lost while
// the request lives: silent for lostAfter, or found down by another
// request. A tape server whose process hangs (stopped, deadlocked, its
// disk gone) keeps its host's TCP connections alive, so neither the
// keepalive nor the user timeout ends a request to it; without this, a
// migration or a recall would wait on it for ever while the robot, after
// the same silence, takes its cartridge away. stop ends the watch.
func (l *Library) watch(ctx context.Context, s *server) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(l.lostAfter/8, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				l.mu.Lock()
				lost, silent := l.lostLocked(s), l.now().Sub(s.seen)
				l.mu.Unlock()
				if lost {
					cancel(fmt.Errorf("tape server %s: %w: silent for %s", s.id, ErrLost, silent.Round(time.Second)))
					return
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(done); cancel(nil) }) }
}

// lostCause is err, or the watch's ErrLost when that is why the request
// ended.
func lostCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrLost) {
		return cause
	}
	return err
}

// watchedBody is a reply's body: closing it ends the request's watch, and
// a read cut short by the watch says the tape server was lost.
type watchedBody struct {
	io.ReadCloser
	ctx  context.Context
	stop func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = lostCause(b.ctx, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.stop()
	return err
}

// lost marks s down after a request to it failed (not one the caller
// cancelled).
func (l *Library) lost(ctx context.Context, s *server, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	l.mu.Lock()
	was := s.down
	s.down = true
	l.mu.Unlock()
	if !was {
		l.log.Warn("tape server lost: its drives are out of service until it registers again", "id", s.id, "err", err)
	}
	if errors.Is(err, ErrLost) {
		return err // the watch's, naming the server
	}
	return fmt.Errorf("tape server %s: %w: %v", s.id, ErrLost, err)
}

// robotMove takes the robot for one exchange for drive d.
func (l *Library) robotMove(ctx context.Context, d *remoteDrive) error {
	select {
	case l.robot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.robot }()
	l.mu.Lock()
	d.robot.Mounting += l.gen.Exchange
	l.mu.Unlock()
	if err := l.clk.Sleep(ctx, l.gen.Exchange); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.robotFail > 0 {
		l.robotFail--
		return tape.ErrRobot
	}
	return nil
}

// Mount moves volume from its slot (the robot) into drive and has its
// tape server load it.
func (l *Library) Mount(ctx context.Context, drive, volume string) error {
	d, s, err := l.take(drive)
	if err != nil {
		return err
	}
	defer l.done(d)
	l.mu.Lock()
	c := l.carts[volume]
	switch {
	case c == nil:
		l.mu.Unlock()
		return fmt.Errorf("%w: %s", tape.ErrNoSuchVolume, volume)
	case l.lostLocked(s):
		l.mu.Unlock()
		return fmt.Errorf("mount %s in %s: tape server %s: %w", volume, drive, s.id, ErrLost)
	case d.info.Volume != "" || d.holding(l.carts) != "":
		l.mu.Unlock()
		return fmt.Errorf("%w: drive %s holds %s", tape.ErrBusy, drive, d.info.Volume)
	case c.Drive != "":
		l.mu.Unlock()
		return fmt.Errorf("%w: %s is in drive %s", tape.ErrBusy, volume, c.Drive)
	}
	c.Drive = drive // reserved while the robot moves it
	l.mu.Unlock()
	back := func() {
		l.mu.Lock()
		c.Drive = ""
		l.mu.Unlock()
	}
	if err := l.robotMove(ctx, d); err != nil {
		back()
		return fmt.Errorf("mount %s in %s: %w", volume, drive, err)
	}
	if err := l.callOn(ctx, d, s, "mount", driveReq{Drive: drive, Volume: volume}, nil); err != nil {
		back()
		return err
	}
	return nil
}

// holding is the cartridge the table has in d (it may be there while the
// server's drive already let go of it, after a robot failure).
func (d *remoteDrive) holding(carts map[string]*tape.CartridgeInfo) string {
	for _, c := range carts {
		if c.Drive == d.info.ID {
			return c.Volume
		}
	}
	return ""
}

// Dismount has the tape server unload drive and the robot return its
// cartridge. A drive whose tape server is lost is emptied by the robot
// alone once the server has been silent for LostAfter (what it had not
// flushed is lost, as with a failed drive).
func (l *Library) Dismount(ctx context.Context, drive string) error {
	d, s, err := l.take(drive)
	if err != nil {
		return err
	}
	defer l.done(d)
	l.mu.Lock()
	vol := d.holding(l.carts)
	l.mu.Unlock()
	err = l.callOn(ctx, d, s, "dismount", driveReq{Drive: drive}, nil)
	switch {
	case err == nil, errors.Is(err, tape.ErrNotMounted) && vol != "":
	case errors.Is(err, ErrLost):
		l.mu.Lock()
		silent := l.now().Sub(s.seen) > l.lostAfter
		l.mu.Unlock()
		if !silent || vol == "" {
			return err
		}
		l.log.Warn("tape server lost: the robot takes the cartridge out of its drive", "id", s.id, "drive", drive, "volume", vol)
	default:
		return err
	}
	if vol == "" {
		return nil
	}
	if err := l.robotMove(ctx, d); err != nil {
		return fmt.Errorf("dismount %s from %s: %w", vol, drive, err)
	}
	l.mu.Lock()
	if c := l.carts[vol]; c != nil && c.Drive == drive {
		c.Drive = ""
	}
	d.info.Volume = ""
	d.info.Stats.Dismounts++
	l.mu.Unlock()
	return nil
}

// Flush, Erase, ReadHeader, ReadTrailer and ReadThrough run on the
// drive's tape server.
func (l *Library) Flush(ctx context.Context, drive string) error {
	return l.call(ctx, drive, "flush", driveReq{Drive: drive}, nil)
}

func (l *Library) Erase(ctx context.Context, drive string) error {
	return l.call(ctx, drive, "erase", driveReq{Drive: drive}, nil)
}

func (l *Library) ReadHeader(ctx context.Context, drive string, seq int) (*tape.Header, error) {
	var h tape.Header
	if err := l.call(ctx, drive, "header", driveReq{Drive: drive, Seq: seq}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

func (l *Library) ReadTrailer(ctx context.Context, drive string, seq int) (*tape.Trailer, error) {
	var t tape.Trailer
	if err := l.call(ctx, drive, "trailer", driveReq{Drive: drive, Seq: seq}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (l *Library) ReadThrough(ctx context.Context, drive string, seq int, off int64) error {
	return l.call(ctx, drive, "readthrough", driveReq{Drive: drive, Seq: seq, Offset: off}, nil)
}

// Write runs a write job on the drive's tape server.
func (l *Library) Write(ctx context.Context, j WriteJob) (WriteResult, error) {
	var r WriteResult
	err := l.call(ctx, j.Drive, "job/write", j, &r)
	return r, err
}

// Read runs a read job on the drive's tape server.
func (l *Library) Read(ctx context.Context, j ReadJob) (wire.Status, error) {
	var st wire.Status
	err := l.call(ctx, j.Drive, "job/read", j, &st)
	return st, err
}

// Verify runs a verify job on the drive's tape server.
func (l *Library) Verify(ctx context.Context, j VerifyJob) (VerifyResult, error) {
	var r VerifyResult
	err := l.call(ctx, j.Drive, "job/verify", j, &r)
	return r, err
}

// FailDrive injects (or clears) a drive failure on its tape server.
func (l *Library) FailDrive(id string, failed bool) error {
	return l.call(context.Background(), id, "fault", driveReq{Drive: id, Failed: &failed}, nil)
}

// SetUnreadable makes a cartridge unreadable (or readable) in every tape
// server's drives: it may be mounted in any of them.
func (l *Library) SetUnreadable(volume string, bad bool) error {
	if err := l.everyServer(volume, driveReq{Volume: volume, Unreadable: &bad}); err != nil {
		return err
	}
	l.mu.Lock()
	if !bad {
		l.carts[volume].Unreadable = false
	}
	l.mu.Unlock()
	return nil
}

// SetWriteErrors makes every write on a cartridge fail (or work again) in
// every tape server's drives.
func (l *Library) SetWriteErrors(volume string, bad bool) error {
	return l.everyServer(volume, driveReq{Volume: volume, WriteBad: &bad})
}

// everyServer sends fault q about volume to every tape server not lost,
// through one of its drives.
func (l *Library) everyServer(volume string, q driveReq) error {
	l.mu.Lock()
	known := l.carts[volume] != nil
	var drives []string
	seen := map[*server]bool{}
	for id, d := range l.drives {
		if !seen[d.srv] && !l.lostLocked(d.srv) {
			seen[d.srv] = true
			drives = append(drives, id)
		}
	}
	l.mu.Unlock()
	if !known {
		return fmt.Errorf("%w: %s", tape.ErrNoSuchVolume, volume)
	}
	slices.Sort(drives)
	var errs []error
	for _, id := range drives {
		q.Drive = id
		errs = append(errs, l.call(context.Background(), id, "fault", q, nil))
	}
	return errors.Join(errs...)
}

// FailRobot makes the next n robot moves fail.
func (l *Library) FailRobot(n int) {
	l.mu.Lock()
	l.robotFail = n
	l.mu.Unlock()
}

// Append streams a tape file's data to the drive's tape server. The HSM
// engine writes through jobs, which keep data off the core; Append is
// the library contract's, which the conformance suite checks.
func (l *Library) Append(ctx context.Context, drive string, h *tape.Header) (tape.FileWriter, error) {
	d, s, err := l.take(drive)
	if err != nil {
		return nil, err
	}
	hb, _ := json.Marshal(h)
	pr, pw := io.Pipe()
	started := make(chan struct{})
	w := &remoteWriter{pw: pw, done: make(chan struct{}), want: h.DataLen(), trailer: http.Header{abortTrailer: nil}}
	body := &startReader{r: pr, started: started}
	go func() {
		defer close(w.done)
		defer l.done(d)
		hdr := http.Header{headerParam: {base64.StdEncoding.EncodeToString(hb)}, "Expect": {"100-continue"}}
		resp, err := l.do(ctx, s, "/v1/tape/append?drive="+drive, body, hdr, w.trailer)
		switch {
		case err != nil && w.aborted.Load():
			w.err = errAborted
		case err != nil:
			w.err = l.lost(ctx, s, err)
		default:
			w.err = l.result(ctx, d, s, resp, &w.res)
			resp.Body.Close()
		}
		pr.CloseWithError(errors.New("tape server answered"))
	}()
	select {
	case <-started:
		return w, nil
	case <-w.done:
		if w.err == nil {
			w.err = errors.New("tape server: append ended before its data")
		}
		return nil, w.err
	}
}

// startReader says when the HTTP client first reads the body: the tape
// server accepted the append (100 Continue).
type startReader struct {
	r       io.Reader
	started chan struct{}
	once    sync.Once
}

func (s *startReader) Read(p []byte) (int, error) {
	s.once.Do(func() { close(s.started) })
	return s.r.Read(p)
}

type remoteWriter struct {
	pw      *io.PipeWriter
	done    chan struct{}
	want, n int64 // bytes the header declares, bytes written
	aborted atomic.Bool
	trailer http.Header // the request's: abortTrailer is set in it to abandon the tape file
	res     WriteResult
	err     error
}

var errAborted = errors.New("tape: append aborted")

func (w *remoteWriter) Write(p []byte) (int, error) {
	if w.n+int64(len(p)) > w.want {
		w.Abort()
		return 0, fmt.Errorf("tape: %d bytes written of a tape file declared %d long", w.n+int64(len(p)), w.want)
	}
	n, err := w.pw.Write(p)
	w.n += int64(n)
	if err != nil { // the tape server answered early: with its error
		<-w.done
		if w.err != nil {
			err = w.err
		}
	}
	return n, err
}

func (w *remoteWriter) Close() error {
	w.pw.Close()
	<-w.done
	return w.err
}

// Abort ends the data with the abort trailer, so that the tape server
// abandons the tape file and answers once it has: the drive is free when
// Abort returns.
func (w *remoteWriter) Abort() {
	w.aborted.Store(true)
	w.trailer.Set(abortTrailer, "1")
	w.pw.Close()
	<-w.done
	if w.err == nil {
		w.err = errAborted
	}
}

func (w *remoteWriter) Seq() int            { return w.res.Seq }
func (w *remoteWriter) Start() int64        { return w.res.Start }
func (w *remoteWriter) EntryCRCs() []uint32 { return w.res.EntryCRCs }

// ReadData streams a tape file range from the drive's tape server.
func (l *Library) ReadData(ctx context.Context, drive string, seq int, off, n int64) (io.ReadCloser, error) {
	d, s, err := l.take(drive)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(driveReq{Drive: drive, Seq: seq, Offset: off, Length: n})
	resp, err := l.do(ctx, s, "/v1/tape/read", bytes.NewReader(b), nil, nil)
	if err != nil {
		l.done(d)
		return nil, l.lost(ctx, s, err)
	}
	if resp.Header.Get("Content-Type") == "application/json" {
		defer resp.Body.Close()
		defer l.done(d)
		return nil, l.result(ctx, d, s, resp, nil)
	}
	return &remoteReader{resp: resp, done: func() {
		// The stream moved the head: learn where it is now.
		l.callOn(context.WithoutCancel(ctx), d, s, "info", driveReq{Drive: drive}, nil)
		l.done(d)
	}}, nil
}

// remoteReader is a data stream whose end carries its error, if any, in a
// trailer.
type remoteReader struct {
	resp *http.Response
	done func()
	once sync.Once
}

func (r *remoteReader) Read(p []byte) (int, error) {
	n, err := r.resp.Body.Read(p)
	if err == io.EOF {
		if t := r.resp.Trailer.Get(errTrailer); t != "" {
			var e errBody
			if raw, derr := base64.StdEncoding.DecodeString(t); derr == nil && json.Unmarshal(raw, &e) == nil {
				return n, e.err()
			}
		}
	}
	return n, err
}

func (r *remoteReader) Close() error {
	err := r.resp.Body.Close()
	r.once.Do(r.done)
	return err
}
