// Package clusterbench measures Strata on several hosts of a netbed: N
// clients × M movers on shaped links, putting and getting files spread
// over the movers (one stripe each) or striped over all of them, against
// raw TCP through the same links in the same run (the bed's own bound on
// this machine) and the links' bound min(N·I, M·I). bench/cluster.sh runs
// it (it is a test only to reuse the bed; it skips unless
// STRATA_BENCH_CLUSTER is set).
package clusterbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cluster"
)

var bin string

// The test binary doubles as the raw TCP baseline's sink and sender
// (run on the bed's hosts): `blast-sink ADDR`, `blast-send ADDR BYTES`.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 {
		switch os.Args[1] {
		case "blast-sink":
			os.Exit(sink(os.Args[2]))
		case "blast-send":
			n, _ := strconv.ParseInt(os.Args[len(os.Args)-1], 10, 64)
			os.Exit(send(os.Args[2], n))
		}
	}
	if os.Getenv("STRATA_BENCH_CLUSTER") == "" {
		os.Exit(m.Run()) // the test skips
	}
	dir, err := os.MkdirTemp("", "clusterbench")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "strata")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/strata-storage/strata/cmd/strata").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sink accepts connections on addr and reads them to the end.
func sink(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() { io.Copy(io.Discard, c); c.Close() }()
	}
}

// send writes n bytes to addr. A sink just started may not listen yet:
// a refused connection is tried again for a few seconds, before the first
// byte, so it costs the measurement a few milliseconds at most.
func send(addr string, n int64) int {
	c, err := net.Dial("tcp", addr)
	for end := time.Now().Add(5 * time.Second); err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := c.Write(buf[:k]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		n -= k
	}
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c) // until the sink has read it all and closed
	return 0
}

// cell is one measurement: clients × movers, spread or striped.
type cell struct {
	Rate    string  `json:"rate"`
	Clients int     `json:"clients"`
	Movers  int     `json:"movers"`
	Mode    string  `json:"mode"` // spread: one mover per file; striped: all
	Bytes   int64   `json:"bytes_per_client"`
	Bound   float64 `json:"bound_mb_s"` // min(N·I, M·I), I the link's rate
	RawTCP  float64 `json:"raw_tcp_mb_s"`
	Put     float64 `json:"put_mb_s"`
	Get     float64 `json:"get_mb_s"`
}

// TestScaling measures every cell of CLUSTER_CLIENTS × CLUSTER_MOVERS at
// CLUSTER_RATE, CLUSTER_MODES (spread, striped), CLUSTER_MB per client,
// and writes the cells as JSON lines to CLUSTER_OUT.
func TestScaling(t *testing.T) {
	if bin == "" {
		t.Skip("a benchmark: bench/cluster.sh runs it (STRATA_BENCH_CLUSTER=1)")
	}
	rate := env("CLUSTER_RATE", "1gbit")
	clients, movers := ints(env("CLUSTER_CLIENTS", "1 2 4 8")), ints(env("CLUSTER_MOVERS", "1 2 4"))
	modes := strings.Fields(env("CLUSTER_MODES", "spread striped"))
	mb, _ := strconv.Atoi(env("CLUSTER_MB", "64"))
	size := int64(mb) << 20
	link, err := linkRate(rate)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(env("CLUSTER_OUT", filepath.Join(t.TempDir(), "cells.json")))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	fmt.Printf("| link | clients | movers | files | bound MB/s | raw TCP MB/s | put MB/s | put ÷ raw | put ÷ bound | get MB/s | get ÷ bound |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, nm := range movers {
		// A bed of its own for each number of movers, removed when the
		// subtest ends.
		t.Run(fmt.Sprintf("movers=%d", nm), func(t *testing.T) {
			c := cluster.New(t, bin, cluster.Options{Movers: nm, Clients: slicesMax(clients), Rate: rate, Bandwidth: os.Getenv("CLUSTER_DEVICE_BW")})
			src := filepath.Join(c.Dir, "src")
			if err := os.WriteFile(src, make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
			self, _ := os.Executable()
			for _, m := range c.Movers {
				m.Host.Start(self, "blast-sink", m.Host.Addr(9000)) // stopped with the bed
			}
			for _, mode := range modes {
				for _, nc := range clients {
					k := cell{Rate: rate, Clients: nc, Movers: nm, Mode: mode, Bytes: size, Bound: float64(min(nc, nm)) * link / 1e6}
					k.RawTCP = rawTCP(t, c, self, nc, nm, size, mode)
					stripes := "1"
					if mode == "striped" {
						stripes = strconv.Itoa(nm)
					}
					k.Put = timed(t, nc, size, func(i int) *exec.Cmd {
						return c.Command(i, "put", "--stripes", stripes, src, fmt.Sprintf("/c%d", i))
					})
					k.Get = timed(t, nc, size, func(i int) *exec.Cmd { return c.Command(i, "get", fmt.Sprintf("/c%d", i), "/dev/null") })
					for i := range nc {
						c.OK("rm", fmt.Sprintf("/c%d", i))
					}
					fmt.Printf("| %s | %d | %d | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.2f |\n", rate, nc, nm, mode, k.Bound, k.RawTCP, k.Put, k.Put/k.RawTCP, k.Put/k.Bound, k.Get, k.Get/k.Bound)
					b, _ := json.Marshal(k)
					fmt.Fprintln(out, string(b))
				}
			}
		})
	}
}

// rawTCP sends what a cell's puts send, as plain TCP from the clients'
// hosts to the movers' (spread: client i to mover i mod nm; striped: an
// equal share to each), and returns the aggregate MB/s.
func rawTCP(t *testing.T, c *cluster.Cluster, self string, nc, nm int, size int64, mode string) float64 {
	return timed(t, nc, size, func(i int) *exec.Cmd {
		var targets []string
		if mode == "striped" {
			for j := range nm {
				targets = append(targets, c.Movers[j].Host.Addr(9000))
			}
		} else {
			targets = []string{c.Movers[i%nm].Host.Addr(9000)}
		}
		// One sender per target, in one shell on the client's host, which
		// fails if any of them does (a bare `wait` would answer 0 and
		// count a refused connection as bytes sent).
		var sh []string
		for _, a := range targets {
			sh = append(sh, fmt.Sprintf("%s blast-send %s %d & pids=\"$pids $!\";", self, a, size/int64(len(targets))))
		}
		return c.Clients[i].Command("sh", "-c", strings.Join(sh, " ")+` for p in $pids; do wait "$p" || exit 1; done`)
	})
}

// timed runs cmd(i) for each of n clients at once and returns the
// aggregate MB/s of n × size bytes.
func timed(t *testing.T, n int, size int64, cmd func(i int) *exec.Cmd) float64 {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := cmd(i).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return float64(int64(n)*size) / 1e6 / took
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func slicesMax(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// linkRate is a tc rate in bytes/s.
func linkRate(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.mult, err
		}
	}
	return 0, fmt.Errorf("bad rate %q", s)
}
