package bench

import (
	"net"
	"strings"
	"testing"
)

// followers starts n worker processes' loops on 127.0.0.1 (in this test
// process, over real TCP) and returns their addresses.
func followers(t *testing.T, n int, key string) []string {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, ln, key, "test", true, nil) }()
		t.Cleanup(func() {
			ln.Close()
			<-done
		})
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// TestMultiProcess runs the suite with its workers spread over three
// processes: every phase counts every process's workers, reads replay
// writes, and time-based phases wear out to one count across processes.
func TestMultiProcess(t *testing.T) {
	for name, spec := range targets(t) {
		t.Run(name, func(t *testing.T) {
			rep := runSuite(t, Config{Target: spec, Scale: "tiny", Workers: 3, Peers: followers(t, 2, "k"), Key: "k"})
			if rep.Procs != 3 || len(rep.Peers) != 2 || rep.Peers[0].CPUs == 0 {
				t.Fatalf("procs %d, peers %+v", rep.Procs, rep.Peers)
			}
			files := int64(Scales["tiny"].Files)
			for _, v := range []string{"create 0 B, a directory per worker", "create 0 B, one shared directory"} {
				if ph := phase(rep, "hpcs04", v); ph == nil || ph.Ops != 3*files || ph.Workers != 3 {
					t.Errorf("hpcs04 %s: %+v, want %d creates by 3 workers", v, ph, 3*files)
				}
			}
			for _, sc := range []string{"hpcs07", "hpcs08", "cemss-user"} {
				w, r := phase(rep, sc, "write"), phase(rep, sc, "read")
				if w == nil || r == nil || w.Bytes == 0 || w.Bytes != r.Bytes || w.Workers != 3 {
					t.Errorf("%s: write %+v, read %+v", sc, w, r)
				}
			}
			if ph := phase(rep, "hpcs13", "randread 4KiB"); ph == nil || !ph.StonewallHit || ph.Ops == 0 || ph.Ops%3 != 0 {
				t.Errorf("hpcs13 randread: %+v: three workers in three processes should wear out to one count", ph)
			}
			// The tree walk is split, not repeated, over processes.
			build, walk := phase(rep, "hpcs10", "build tree (create)"), phase(rep, "hpcs10", "walk (warm)")
			if build == nil || walk == nil || walk.Ops < build.Ops || walk.Ops > 2*build.Ops {
				t.Errorf("hpcs10: built %+v, walked %+v", build, walk)
			}
			if name == "strata" {
				if ph := phase(rep, "hpcs05", "write"); ph == nil || !strings.Contains(ph.Skipped, "processes") {
					t.Errorf("hpcs05 on Strata over processes should be skipped with the reason: %+v", ph)
				}
			} else if ph := phase(rep, "hpcs06", "read"); ph == nil || ph.Bytes == 0 {
				t.Errorf("hpcs06 over processes: %+v", ph)
			}
		})
	}
}

// TestMultiProcessRefusals: a wrong key and an unreachable worker stop
// the run before it starts, with the reason.
func TestMultiProcessRefusals(t *testing.T) {
	spec := "posix:" + t.TempDir()
	sc, _ := Lookup([]string{"hpcs01"})
	_, err := Execute(ctx, Config{Target: spec, Scale: "tiny", Peers: followers(t, 1, "right"), Key: "wrong"}, sc)
	if err == nil || !strings.Contains(err.Error(), "wrong key") {
		t.Fatalf("wrong key: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = Execute(ctx, Config{Target: spec, Scale: "tiny", Peers: []string{addr}}, sc)
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("no worker: %v", err)
	}
}

// TestLostWorker: a worker process that vanishes after joining ends the
// run with an error naming it; the leader does not hang.
func TestLostWorker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		p := newPeer("leader", conn)
		if _, err := p.recv(ctx, "hello"); err == nil {
			p.send(msg{T: "ok", Env: &Env{}})
		}
		conn.Close()
	}()
	sc, _ := Lookup([]string{"hpcs07", "hpcs08"})
	rep, err := Execute(ctx, Config{Target: "posix:" + t.TempDir(), Scale: "tiny", Workers: 2, Peers: []string{ln.Addr().String()}}, sc)
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || rep == nil {
		t.Fatalf("run with a lost worker: %v", err)
	}
}

// TestOwner: blocks of consecutive workers per process, every worker
// owned once, the leader always in.
func TestOwner(t *testing.T) {
	for _, c := range []struct{ n, procs int }{{1, 3}, {2, 2}, {3, 3}, {7, 3}, {16, 5}} {
		seen := make([]int, c.procs)
		last := 0
		for id := range c.n {
			o := owner(id, c.n, c.procs)
			if o < last || o >= c.procs {
				t.Fatalf("n=%d procs=%d: worker %d → %d", c.n, c.procs, id, o)
			}
			last = o
			seen[o]++
		}
		if seen[0] == 0 {
			t.Fatalf("n=%d procs=%d: the leader runs no worker", c.n, c.procs)
		}
	}
}
