package main_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cluster"
)

// A file striped over four mover hosts: each holds one stripe, it reads
// back byte for byte over the links, and it goes to tape and comes back
// (migration and recall between the movers and the core's library).
func TestClusterStriping(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 4, Rate: "1gbit"})
	src := filepath.Join(c.Dir, "wide")
	data := writeRandom(t, src, 24<<20+7)
	c.OK("put", "--stripes", "4", src, "/wide")
	if devs := c.Devices("/wide"); len(devs) != 4 {
		t.Fatalf("stripes on %v, want all four movers", devs)
	}
	for i, m := range c.Movers {
		if n := m.Objects(); n != 1 {
			t.Fatalf("mover%d holds %d objects, want 1", i, n)
		}
	}
	c.Check("/wide", data)
	c.OK("migrate", "/wide")
	c.OK("purge", "/wide")
	c.Check("/wide", data)
}

// Mover hosts failing under clients: a put during which a mover is killed
// begins again on the movers that remain (the client reports the mover,
// the core checks it cannot reach it either and places elsewhere) and
// completes; what the first attempt left on the killed mover is reclaimed
// once it is back. A mover host cut off the network during a get of a
// file with a tape copy makes the get recall the file to the movers that
// remain instead of failing.
func TestClusterMoverFaults(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 4, Rate: "1gbit"})
	src := filepath.Join(c.Dir, "big")
	data := writeRandom(t, src, 96<<20)
	victim := c.Movers[1]
	done := make(chan struct{})
	go func() {
		defer close(done)
		for victim.Objects() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		victim.Proc.Kill9()
	}()
	c.OK("put", "--stripes", "4", src, "/big")
	<-done
	c.Check("/big", data)
	devs := c.Devices("/big")
	if devs["m1"] {
		t.Fatalf("the put that mover1's kill interrupted was placed on it again: %v", devs)
	}
	victim.Start()
	c.WaitFor(func() bool { out, _, _ := c.Run(0, "df"); return strings.Count(out, "online") == 4 }, "mover1 back")
	c.WaitFor(func() bool {
		n := 0
		for _, m := range c.Movers {
			n += m.Objects()
		}
		return victim.Objects() == 0 && n == len(devs)
	}, "the first attempt's objects to be reclaimed")

	// A file on disk and tape, one stripe on each mover (four stripe
	// units and a byte); mover2's host drops off the network.
	src = filepath.Join(c.Dir, "kept")
	data = writeRandom(t, src, 16<<20+1)
	c.OK("put", "--stripes", "4", src, "/kept")
	c.OK("migrate", "/kept")
	cut := c.Movers[2]
	cut.Host.Down()
	c.Check("/kept", data)
	if devs := c.Devices("/kept"); devs["m2"] {
		t.Fatalf("after the recall the file is still on %v, with the unreachable m2", devs)
	}
	cut.Host.Up()
}

// Fail-over over a network: two cores on a PostgreSQL catalog on its own
// host. The active core's host drops off the network; the database ends
// its session (keepalive), the standby takes over, movers register with
// it, and clients naming both cores go on. The cut-off core, unable to
// confirm its hold on the catalog, stops by itself; brought back, it
// stands by.
func TestClusterFailover(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 2, Rate: "1gbit", Cores: 2})
	src := filepath.Join(c.Dir, "f")
	data := writeRandom(t, src, 9<<20)
	c.OK("put", src, "/f")
	c.OK("migrate", "/f")
	c.Check("/f", data)

	active, standby := c.Cores[0], c.Cores[1]
	cut := time.Now()
	active.Host.Down()
	c.Check("/f", data) // the client retries across the cores by itself
	t.Logf("link cut at %s; first get after it %v; the standby: %s", cut.UTC().Format("15:04:05.000"), time.Since(cut).Round(100*time.Millisecond), lineWith(standby.Proc.Log(), "taking over:"))
	if !strings.Contains(standby.Proc.Log(), "taking over:") {
		t.Fatalf("the standby did not take over:\n%s", c.Logs())
	}
	src2 := filepath.Join(c.Dir, "g")
	data2 := writeRandom(t, src2, 3<<20)
	c.OK("put", src2, "/g")
	c.Check("/g", data2)
	if err := active.Proc.Wait(); err == nil || !strings.Contains(active.Proc.Log(), "strata: lost the catalog") {
		t.Fatalf("the cut-off core: %v\n%s", err, active.Proc.Log())
	}
	active.Host.Up()
	active.Start()
	c.WaitFor(func() bool { return strings.Contains(active.Proc.Log(), "standing by") }, "the old core to stand by")
	c.Check("/g", data2)
}

// lineWith is the line of log holding what, for a test's log.
func lineWith(log, what string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, what) {
			return l
		}
	}
	return ""
}

// A path with 20 ms of latency each way (proxies before the core and the
// movers) and 5 % of the client's packets lost: puts and gets are byte
// exact, a file goes to tape and back, and connections to a mover cut in
// the middle of a put (reset, as a failing middlebox would) leave either
// the whole file or nothing visible.
func TestClusterLatencyLossResets(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 2, Rate: "1gbit", Latency: 20 * time.Millisecond})
	c.Clients[0].Loss(5)
	src := filepath.Join(c.Dir, "f")
	data := writeRandom(t, src, 12<<20+3)
	c.OK("put", "--stripes", "2", src, "/f")
	c.Check("/f", data)
	c.OK("migrate", "/f")
	c.OK("purge", "/f")
	c.Check("/f", data)

	big := filepath.Join(c.Dir, "big")
	bigData := writeRandom(t, big, 32<<20)
	m0 := c.Movers[0]
	before := m0.Objects()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m0.Objects() == before {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		c.Proxies[1].Reset(false) // mover0's connections; new ones still pass
	}()
	_, errs, code := c.Run(0, "put", "--stripes", "2", big, "/big")
	<-done
	t.Logf("the put across the reset: exit %d %s", code, strings.TrimSpace(errs))
	if code == 0 {
		c.Check("/big", bigData)
	} else {
		if strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Fatalf("a failed put said more than one line: %q", errs)
		}
		if _, _, code := c.Run(0, "stat", "/big"); code == 0 {
			t.Fatal("a put that failed is visible")
		}
	}
}
