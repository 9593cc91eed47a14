package bench

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Runs over several processes (--procs, --hosts) are SPMD, as an
// MPI-launched IOR is: every process runs the same scenario code with the
// same configuration and owns a block of each phase's workers (worker
// IDs are global, so files, seeds and offsets agree everywhere). The
// leader (rank 0) does the namespace set-up between phases; on the other
// processes set-up that changes the namespace is skipped (followerTarget)
// and only their workers touch the target.
//
// Every phase is one exchange over a TCP connection per follower, JSON
// lines:
//
//	follower → leader   ready  (label: scenario, step, phase name)
//	leader → follower   go     (the barrier's release)
//	follower → leader   stopped (largest step count its workers reached)
//	leader → follower   wearout (the largest count of all processes)
//	follower → leader   done   (per-worker results, histograms, samples)
//	leader → follower   result (the merged phases every process continues with)
//
// Times are taken by each process from its own receipt of "go", so they
// are skewed by the one-way latency of the leader's message (tens of µs
// on a LAN); "first done" counts of workers in other processes than the
// first finisher are interpolated from 10 ms samples.

// msg is one line of the protocol.
type msg struct {
	T       string         `json:"t"`
	Label   string         `json:"label,omitempty"`
	Hello   *hello         `json:"hello,omitempty"`
	Env     *Env           `json:"env,omitempty"`
	Max     int64          `json:"max,omitempty"`
	Process *processResult `json:"process,omitempty"`
	Phases  []Phase        `json:"phases,omitempty"`
	Steps   []int64        `json:"steps,omitempty"`
	Err     string         `json:"err,omitempty"`
}

// hello starts a follower: everything it needs to run what the leader
// runs.
type hello struct {
	Key       string   `json:"key"`
	Config    Config   `json:"config"`
	Scenarios []string `json:"scenarios"`
	Root      string   `json:"root"`
	Env       Env      `json:"env"` // the leader's: sizes derive from its memory
	Rank      int      `json:"rank"`
	Procs     int      `json:"procs"`
}

// peer is one end of a connection: a reader goroutine queues what
// arrives, writes are serialised.
type peer struct {
	name string
	conn net.Conn
	mu   sync.Mutex
	enc  *json.Encoder
	in   chan msg
	err  error // why in was closed
}

func newPeer(name string, conn net.Conn) *peer {
	p := &peer{name: name, conn: conn, enc: json.NewEncoder(conn), in: make(chan msg, 16)}
	go func() {
		dec := json.NewDecoder(bufio.NewReader(conn))
		for {
			var m msg
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
					err = errors.New("connection closed")
				}
				p.err = err
				close(p.in)
				return
			}
			p.in <- m
		}
	}()
	return p
}

func (p *peer) send(m msg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enc.Encode(m); err != nil {
		return fmt.Errorf("%s: send %s: %w", p.name, m.T, err)
	}
	return nil
}

// recv waits for the next message, which must be of one of the types.
func (p *peer) recv(ctx context.Context, types ...string) (msg, error) {
	select {
	case m, ok := <-p.in:
		if !ok {
			return msg{}, fmt.Errorf("%s: %v", p.name, p.err)
		}
		if m.T == "fail" {
			return m, fmt.Errorf("%s: %s", p.name, m.Err)
		}
		for _, t := range types {
			if m.T == t {
				return m, nil
			}
		}
		return m, fmt.Errorf("%s: got %q, want %s", p.name, m.T, strings.Join(types, " or "))
	case <-ctx.Done():
		return msg{}, ctx.Err()
	}
}

// dist is a process's part in a multi-process run.
type dist struct {
	ctx       context.Context
	fail      context.CancelCauseFunc // a broken exchange ends the run
	rank      int
	procs     int
	peers     []*peer // leader: the followers by rank-1; follower: the leader
	abandoned bool    // follower: the leader left this scenario early
	// leader, during a phase: the followers' results, complete when
	// collect returns; follower: closed when the wear-out count arrived.
	results  []processResult
	collect  func() error
	wornOut  chan struct{}
	peerEnvs []Env
	hello    hello // leader: what every follower is sent
}

var errAbandoned = errors.New("the leader left this scenario (its set-up failed)")

// owner is the process that runs worker id of n: blocks of consecutive
// workers per process, as mpirun maps ranks to nodes.
func owner(id, n, procs int) int { return id * procs / n }

// mine lists the workers of an n-worker phase this process runs.
func (r *Run) mine(n int) []int {
	var out []int
	for id := range n {
		if r.dist == nil || owner(id, n, r.dist.procs) == r.dist.rank {
			out = append(out, id)
		}
	}
	return out
}

func (r *Run) rank() int {
	if r.dist == nil {
		return 0
	}
	return r.dist.rank
}

func (r *Run) procs() int {
	if r.dist == nil {
		return 1
	}
	return r.dist.procs
}

// share says which part of an n-worker phase's static work split this
// process takes: its index among the processes that run any of the
// workers, and their number.
func (r *Run) share(n int) (part, parts int) {
	last := -1
	for id := range n {
		if o := owner(id, n, r.procs()); o != last {
			if o == r.rank() {
				part = parts
			}
			parts++
			last = o
		}
	}
	return part, parts
}

// stepLabel names the next exchange of the current scenario; leader and
// followers must agree on it, or they have diverged.
func (r *Run) stepLabel(name string) string {
	r.step++
	sc := ""
	if r.cur != nil {
		sc = r.cur.Scenario
	}
	return fmt.Sprintf("%s#%d %s", sc, r.step, name)
}

// begin is the barrier across processes: the leader waits for every
// follower's ready, then releases all; a follower waits for the release.
// It also arranges the wear-out exchange for the phase p.
func (d *dist) begin(label string, p *phaseRun) error {
	if d.rank > 0 {
		lead := d.peers[0]
		if err := lead.send(msg{T: "ready", Label: label}); err != nil {
			return d.broken(err)
		}
		m, err := lead.recv(d.ctx, "go", "abandon")
		if err != nil {
			return d.broken(err)
		}
		if m.T == "abandon" {
			d.abandoned = true
			return errAbandoned
		}
		p.onStop = func(local int64) {
			if err := lead.send(msg{T: "stopped", Max: local}); err != nil {
				d.broken(err)
			}
		}
		d.wornOut = make(chan struct{})
		go func() {
			defer close(d.wornOut)
			m, err := lead.recv(d.ctx, "wearout")
			if err != nil {
				d.broken(err)
				return
			}
			p.release(m.Max)
		}()
		return nil
	}
	for _, f := range d.peers {
		if err := d.awaitReady(f, label); err != nil {
			return d.broken(err)
		}
	}
	// Wear-out: the global maximum once every process has stopped.
	var mu sync.Mutex
	waiting, global := d.procs, int64(0)
	stopped := func(local int64) {
		mu.Lock()
		waiting--
		global = max(global, local)
		last := waiting == 0
		mu.Unlock()
		if last {
			for _, f := range d.peers {
				if err := f.send(msg{T: "wearout", Max: global}); err != nil {
					d.broken(err)
				}
			}
			p.release(global)
		}
	}
	p.onStop = stopped
	d.results = make([]processResult, len(d.peers))
	for _, f := range d.peers {
		if err := f.send(msg{T: "go", Label: label}); err != nil {
			return d.broken(err)
		}
	}
	// Each follower's stopped and done arrive while the leader's own
	// workers run.
	var wg sync.WaitGroup
	errs := make([]error, len(d.peers))
	for i, f := range d.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := f.recv(d.ctx, "stopped")
			if err != nil {
				errs[i] = err
				return
			}
			stopped(m.Max)
			m, err = f.recv(d.ctx, "done")
			if err != nil {
				errs[i] = err
				return
			}
			d.results[i] = *m.Process
		}()
	}
	d.collect = func() error {
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return d.broken(err)
		}
		return nil
	}
	return nil
}

// awaitReady waits for a follower to reach label. A follower still inside
// a scenario the leader has left (its set-up failed on the leader) is
// told to abandon it and is waited for at the scenario's end.
func (d *dist) awaitReady(f *peer, label string) error {
	for {
		m, err := f.recv(d.ctx, "ready")
		if err != nil {
			return err
		}
		if m.Label == label {
			return nil
		}
		if !strings.HasPrefix(label, "end ") {
			return fmt.Errorf("%s diverged: it is at %q, the leader at %q", f.name, m.Label, label)
		}
		if err := f.send(msg{T: "abandon"}); err != nil {
			return err
		}
	}
}

// finish ends a phase: a follower hands in its results and gets the
// merged phases back; the leader waits for every follower's, merges and
// hands the phases out.
func (d *dist) finish(pr processResult, merge func([]processResult) []Phase) ([]Phase, error) {
	if d.rank > 0 {
		<-d.wornOut
		for i := range pr.Workers {
			pr.Workers[i].Hist = encodeHist(pr.Workers[i].hist)
		}
		lead := d.peers[0]
		if err := lead.send(msg{T: "done", Process: &pr}); err != nil {
			return nil, d.broken(err)
		}
		m, err := lead.recv(d.ctx, "result")
		if err != nil {
			return nil, d.broken(err)
		}
		for i := range m.Phases {
			m.Phases[i].steps = m.Steps
		}
		return m.Phases, nil
	}
	if err := d.collect(); err != nil {
		return nil, err
	}
	phs := merge(append([]processResult{pr}, d.results...))
	for _, f := range d.peers {
		if err := f.send(msg{T: "result", Phases: phs, Steps: phs[0].steps}); err != nil {
			return nil, d.broken(err)
		}
	}
	return phs, nil
}

// broken ends the run: a process that lost its peer cannot go on in step.
func (d *dist) broken(err error) error {
	err = fmt.Errorf("multi-process run: %w", err)
	d.fail(err)
	return err
}

// barrier is an exchange without workers: scenario ends, where the
// leader removes what the scenario made only after every process is done
// with it.
func (r *Run) barrier(name string) error {
	if r.dist == nil {
		return nil
	}
	d := r.dist
	label := "end " + name
	if d.rank > 0 {
		d.abandoned = false
		lead := d.peers[0]
		if err := lead.send(msg{T: "ready", Label: label}); err != nil {
			return d.broken(err)
		}
		_, err := lead.recv(d.ctx, "go")
		if err != nil {
			return d.broken(err)
		}
		return nil
	}
	for _, f := range d.peers {
		if err := d.awaitReady(f, label); err != nil {
			return d.broken(err)
		}
	}
	for _, f := range d.peers {
		if err := f.send(msg{T: "go", Label: label}); err != nil {
			return d.broken(err)
		}
	}
	return nil
}

// encodeHist is an HDR histogram's non-zero counts as index, count pairs.
func encodeHist(h *hdr.Histogram) []int64 {
	s := h.Export()
	var out []int64
	for i, c := range s.Counts {
		if c != 0 {
			out = append(out, int64(i), c)
		}
	}
	return out
}

func decodeHist(sparse []int64) *hdr.Histogram {
	h := hdr.New(1, int64(time.Hour), 3)
	s := h.Export()
	for i := 0; i+1 < len(sparse); i += 2 {
		if idx := sparse[i]; idx >= 0 && idx < int64(len(s.Counts)) {
			s.Counts[idx] = sparse[i+1]
		}
	}
	return hdr.Import(s)
}

// lead connects to the follower processes of a run.
func lead(ctx context.Context, fail context.CancelCauseFunc, cfg Config, scenarios []Scenario) (*dist, error) {
	d := &dist{ctx: ctx, fail: fail, procs: 1 + len(cfg.Peers)}
	for _, addr := range cfg.Peers {
		conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("worker process %s: %w", addr, err)
		}
		d.peers = append(d.peers, newPeer("worker process "+addr, conn))
	}
	d.hello = hello{Key: cfg.Key, Config: cfg, Procs: d.procs}
	for _, s := range scenarios {
		d.hello.Scenarios = append(d.hello.Scenarios, s.Name)
	}
	return d, nil
}

// start hands every follower the run and waits until each has opened the
// target.
func (d *dist) start(root string, env Env) error {
	for i, f := range d.peers {
		h := d.hello
		h.Rank, h.Root, h.Env = i+1, root, env
		if err := f.send(msg{T: "hello", Hello: &h}); err != nil {
			return err
		}
	}
	for _, f := range d.peers {
		m, err := f.recv(d.ctx, "ok")
		if err != nil {
			return err
		}
		if m.Env != nil {
			d.peerEnvs = append(d.peerEnvs, *m.Env)
		}
	}
	return nil
}

func (d *dist) close() {
	for _, p := range d.peers {
		p.conn.Close()
	}
}

// Serve is `strata bench worker`: it runs this process's share of the
// runs that leaders (`strata bench run --hosts`) bring, one connection
// and one run at a time. With once it returns after the first run. A
// worker runs whatever target its leader names, so it should listen
// where only the leader can reach it, or be started with a key.
func Serve(ctx context.Context, ln net.Listener, key, version string, once bool, log io.Writer) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("bench worker: %w", err)
		}
		err = follow(ctx, conn, key, version)
		conn.Close()
		if log != nil {
			if err != nil {
				fmt.Fprintf(log, "run from %s: %v\n", conn.RemoteAddr(), err)
			} else {
				fmt.Fprintf(log, "run from %s: done\n", conn.RemoteAddr())
			}
		}
		if once {
			return err
		}
	}
}

// follow runs one leader's run as a follower.
func follow(ctx context.Context, conn net.Conn, key, version string) error {
	p := newPeer("leader "+conn.RemoteAddr().String(), conn)
	m, err := p.recv(ctx, "hello")
	if err != nil {
		return err
	}
	h := m.Hello
	refuse := func(err error) error {
		p.send(msg{T: "fail", Err: err.Error()})
		return err
	}
	if h == nil || h.Rank < 1 || h.Rank >= h.Procs {
		return refuse(errors.New("bad hello"))
	}
	if key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(h.Key)) != 1 {
		return refuse(errors.New("wrong key"))
	}
	cfg := h.Config
	sc, err := cfg.normalise()
	if err != nil {
		return refuse(err)
	}
	scenarios, err := Lookup(h.Scenarios)
	if err != nil {
		return refuse(err)
	}
	t, err := OpenTarget(ctx, cfg.Target, Options{Direct: cfg.Direct, Sink: cfg.Sink})
	if err != nil {
		return refuse(err)
	}
	defer t.Close()
	env := CaptureEnv(version)
	if err := p.send(msg{T: "ok", Env: &env}); err != nil {
		return err
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r := newRun(ctx, cfg, sc, t, h.Env, h.Root)
	r.T = &followerTarget{Target: t, run: r}
	r.dist = &dist{ctx: ctx, fail: fail, rank: h.Rank, procs: h.Procs, peers: []*peer{p}}
	r.runScenarios(scenarios)
	return context.Cause(ctx)
}

// followerTarget is a follower's view of the target: between phases the
// leader alone changes the namespace (makes and removes directories,
// creates the shared files), so a follower skips those calls; inside a
// phase every call goes through.
type followerTarget struct {
	Target
	run *Run
}

func (f *followerTarget) setup() bool { return !f.run.inPhase.Load() }

func (f *followerTarget) Mkdir(ctx context.Context, p string) error {
	if f.setup() {
		return nil
	}
	return f.Target.Mkdir(ctx, p)
}

func (f *followerTarget) RemoveAll(ctx context.Context, p string) error {
	if f.setup() {
		return nil
	}
	return f.Target.RemoveAll(ctx, p)
}

func (f *followerTarget) Remove(ctx context.Context, p string) error {
	if f.setup() {
		return nil
	}
	return f.Target.Remove(ctx, p)
}

// CreateShared joins the file the leader creates: the parts open it by
// name once the phase has begun, after the leader made it.
func (f *followerTarget) CreateShared(ctx context.Context, p string, size int64, writers int, block int64) (Shared, error) {
	j, ok := f.Target.(joiner)
	if !ok {
		return nil, ErrUnsupported
	}
	return j.JoinShared(p, writers, block), nil
}

// joiner is a target whose shared files other processes can write: a
// file system, where each writer opens the file by name.
type joiner interface {
	JoinShared(p string, writers int, block int64) Shared
}

func canJoin(t Target) bool {
	if f, ok := t.(*followerTarget); ok {
		t = f.Target
	}
	_, ok := t.(joiner)
	return ok
}
