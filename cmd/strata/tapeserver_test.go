package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/testutil/cluster"
)

// Migration and recall through two tape servers on hosts of their own,
// the core keeping only the robot and the schedule: the data goes between
// the movers and the drives, never through the core (its link carries a
// small fraction of the bytes moved), a cartridge written in one tape
// server's drive is read in the other's, and a scrub verifies every tape
// copy on a tape server.
func TestClusterTapeServers(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 2, TapeServers: 2, Rate: "1gbit"})
	files := map[string][]byte{}
	var paths []string
	var total int
	c.OK("mkdir", "/s")
	for i := range 6 {
		p := fmt.Sprintf("/s/f%d", i)
		src := filepath.Join(c.Dir, fmt.Sprintf("f%d", i))
		files[p] = writeRandom(t, src, (1<<20)+i*4099)
		c.OK("put", src, p)
		paths = append(paths, p)
	}
	src := filepath.Join(c.Dir, "big")
	files["/big"] = writeRandom(t, src, 40<<20+3)
	c.OK("put", "--stripes", "2", src, "/big")
	paths = append(paths, "/big")
	for _, b := range files {
		total += len(b)
	}
	core := c.Cores[0].Host

	// Migration on tape1's drive (tape0's is out of service).
	c.OK("admin", "drives", "offline", "tape0-drive0")
	before := core.Received()
	c.OK(append([]string{"migrate"}, paths...)...)
	if got := core.Received() - before; got > int64(total)/10 {
		t.Fatalf("the core's link carried %d bytes during a migration of %d: tape data went through the core", got, total)
	}
	c.OK(append([]string{"purge"}, paths...)...)

	// Recall on tape0's drive, of what tape1's wrote.
	c.OK("admin", "drives", "online", "tape0-drive0")
	c.OK("admin", "drives", "offline", "tape1-drive0")
	before = core.Received()
	for _, p := range paths {
		c.Check(p, files[p])
	}
	if got := core.Received() - before; got > int64(total)/10+int64(total) { // the gets themselves come to the client, not the core
		t.Fatalf("the core's link carried %d bytes during a recall of %d", got, total)
	}
	// Scrubbing the cartridges reads every tape copy back on a tape
	// server's drive and checks it against the catalog.
	verified := 0
	for v := range 4 {
		var n int
		fmt.Sscanf(c.OK("scrub", "--volume", fmt.Sprintf("T%05d", v)), "verified %d copies", &n)
		verified += n
	}
	if verified != len(paths) {
		t.Fatalf("scrub verified %d tape copies, want %d", verified, len(paths))
	}
	if out := c.OK("admin", "drives"); !strings.Contains(out, "tape0-drive0") || !strings.Contains(out, "tape1-drive0") {
		t.Fatalf("admin drives does not list both tape servers' drives:\n%s", out)
	}
}

// A tape server killed in the middle of a migration: the copy it was
// writing is not recorded, the migration is written again on the other
// tape server's drive and completes, and the file reads back from tape.
// Once the killed server has been silent for 20 s, the robot takes its
// cartridge out of its drive; started again, it comes back into service
// without an admin.
func TestClusterTapeServerLost(t *testing.T) {
	c := cluster.New(t, bin, cluster.Options{Movers: 1, TapeServers: 2, Rate: "200mbit"})
	src := filepath.Join(c.Dir, "big")
	data := writeRandom(t, src, 64<<20)
	c.OK("put", src, "/big")
	c.OK("admin", "drives", "offline", "tape1-drive0")
	victim := c.Tapes[0]
	done := make(chan struct{})
	go func() { // once tape0's drive is writing: tape1 back in service, tape0 killed
		defer close(done)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			parts, _ := filepath.Glob(filepath.Join(c.Dir, "tapes", "*", "*.partial"))
			if len(parts) > 0 {
				if st, err := os.Stat(parts[0]); err == nil && st.Size() > 8<<20 {
					c.Run(0, "admin", "drives", "online", "tape1-drive0")
					victim.Proc.Kill9()
					return
				}
			}
		}
	}()
	c.OK("migrate", "/big")
	<-done
	if victim.Proc.Running() {
		t.Fatal("the migration ended before tape0 was killed")
	}
	c.OK("purge", "/big")
	c.Check("/big", data)
	// Silent for LostAfter (20 s), its drive is emptied by the robot:
	// its cartridge is free for the other drive.
	inDrive := func(vol, drive string) bool {
		out, _, _ := c.Run(0, "admin", "tapes")
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, vol) {
				return strings.Contains(l, drive)
			}
		}
		return false
	}
	if !inDrive("T00000", "tape0-drive0") {
		out, _, _ := c.Run(0, "admin", "tapes")
		t.Fatalf("T00000 is not in the killed server's drive:\n%s", out)
	}
	for deadline := time.Now().Add(60 * time.Second); inDrive("T00000", "tape0-drive0"); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lost server's cartridge was never taken out of its drive\n%s", c.Logs())
		}
	}
	victim.Start()
	c.WaitFor(func() bool {
		out, _, _ := c.Run(0, "admin", "drives")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "tape0-drive0") && !strings.Contains(l, "fail") && !strings.Contains(l, "out") {
				return true
			}
		}
		return false
	}, "tape0's drive back in service")
	c.OK("admin", "drives", "offline", "tape1-drive0")
	c.OK("purge", "/big")
	c.Check("/big", data)
}

// A tape server on this host with its own /metrics (--metrics): it
// registers, its drive writes a migration, and its metrics say so.
func TestTapeServerMetrics(t *testing.T) {
	tapes := filepath.Join(t.TempDir(), "tapes")
	library := fmt.Sprintf("[library]\npath = %q\ngeneration = \"LTO-9\"\ntime_scale = \"instant\"\ncartridges = 2\n", tapes)
	s := newServer(t, library+"remote = true\n[hsm]\nrecall_min_files = 1\n")
	dir := t.TempDir()
	conf := filepath.Join(dir, "tape.toml")
	addr, metricsAddr := freePort(t), freePort(t)
	os.WriteFile(conf, []byte(fmt.Sprintf("data_dir = %q\nsecret_file = %q\n[tape_server]\nid = \"ts0\"\nlisten = %q\ncore = %q\ndrives = 1\n%s",
		filepath.Join(dir, "data"), filepath.Join(s.dir, "data", "secret"), addr, "http://"+s.addr, library)), 0o644)
	var tlog bytes.Buffer
	ts := exec.Command(bin, "tape-server", "--config", conf, "--metrics", metricsAddr)
	ts.Stdout, ts.Stderr = &tlog, &tlog
	if err := ts.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ts.Process.Signal(syscall.SIGTERM); ts.Wait() }()
	for i := 0; !strings.Contains(s.ok("admin", "drives"), "ts0-drive0"); i++ {
		if i == 200 {
			t.Fatalf("the tape server never registered:\n%s", tlog.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 3<<20)
	s.ok("put", src, "/f")
	s.ok("migrate", "/f")
	got := scrape(t, "http://"+metricsAddr+"/metrics")
	if v := sum(got, "strata_tapeserver_registered", nil); v != 1 {
		t.Fatalf("strata_tapeserver_registered %v, want 1", v)
	}
	drive := map[string]string{"drive": "ts0-drive0"}
	if w, m := sum(got, "strata_tapeserver_drive_written_bytes_total", drive), sum(got, "strata_tapeserver_drive_mounts_total", drive); w < 3<<20 || m < 1 {
		t.Fatalf("the drive wrote %v bytes in %v mounts, want the 3 MiB file in one at least", w, m)
	}
	if v := sum(got, "strata_tapeserver_drive_loaded", drive); v != 1 {
		t.Fatalf("strata_tapeserver_drive_loaded %v, want its cartridge", v)
	}
}
