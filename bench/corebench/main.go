// Command corebench measures Strata's metadata rates through the real API
// next to the same operations on a local file system, for
// docs/PERFORMANCE.md. It is driven by bench/core.sh.
//
//	corebench md --server ADDR --clients N --files F   creates, stats, removes via Strata
//	                                                   (--tcp: not through the core's Unix socket)
//	corebench md --posix DIR --clients N --files F     the same on a local file system
//	corebench copy SRC DST                             a plain durable copy of SRC's files
//	                                                   into DST, one at a time (write, fsync)
//	corebench wake                                     a hand-off's round trip against how long
//	                                                   the core taking it was idle (wake.go)
//
// A create is the creation and commit of an empty file (one API call: an
// empty file has no data to stream). With --server-pid, each phase also
// reports where the CPU went, in microseconds per operation: this process
// (the clients), the server, every process on the machine (kernel threads
// too) and idle CPU (which includes waiting for the disk) — the budget
// that bounds an operation rate on a small machine. Each client works in its own
// directory; phases are separated by a barrier and timed from the first
// operation's start to the last one's end. Output is one JSON object.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lukechampine.com/blake3"

	"github.com/strata-storage/strata/client"
)

type ops interface {
	mkdir(dir string) error
	create(p string) error
	stat(p string) error
	remove(p string) error
	join(dir, name string) string
}

type strataOps struct{ c *client.Client }

func (s strataOps) mkdir(d string) error {
	_, err := s.c.Mkdir(context.Background(), d, true, 0)
	return err
}
func (s strataOps) create(p string) error {
	_, err := s.c.Put(context.Background(), p, bytes.NewReader(nil), 0, client.PutOptions{})
	return err
}
func (s strataOps) stat(p string) error     { _, err := s.c.Stat(context.Background(), p); return err }
func (s strataOps) remove(p string) error   { return s.c.Remove(context.Background(), p, false) }
func (s strataOps) join(d, n string) string { return d + "/" + n }

// posixOps does the same on a local file system. With sync, each create
// is made durable (the file and its directory entry fsynced, as mdtest -y
// and Strata's catalog commit do).
type posixOps struct{ sync bool }

func (posixOps) mkdir(d string) error { return os.MkdirAll(d, 0o755) }
func (o posixOps) create(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if o.sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		d, err := os.Open(filepath.Dir(p))
		if err != nil {
			f.Close()
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
func (posixOps) stat(p string) error     { _, err := os.Stat(p); return err }
func (posixOps) remove(p string) error   { return os.Remove(p) }
func (posixOps) join(d, n string) string { return filepath.Join(d, n) }

// phase runs fn over every client's files and returns operations per second.
func phase(clients, files int, fn func(w, i int) error) (float64, error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < files; i++ {
				if err := fn(w, i); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(clients*files) / el.Seconds(), nil
}

// hashRate hashes file with alg (sha256 or blake3, the put's fixity
// algorithms) on one core, reading it as a put's fixity pass does (1 MiB
// reads), and returns MB/s: the ceiling of a single put that records that
// fixity, whatever the disk.
func hashRate(alg, file string) (float64, error) {
	var h hash.Hash
	switch alg {
	case "sha256":
		h = sha256.New()
	case "blake3":
		h = blake3.New(32, nil)
	default:
		return 0, fmt.Errorf("unknown hash %q (sha256, blake3)", alg)
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	t0 := time.Now()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf)
	if err != nil {
		return 0, err
	}
	return float64(n) / 1e6 / time.Since(t0).Seconds(), nil
}

// copyRate copies every file of directory src into dst (which it
// creates), one at a time, as a plain durable loop does: read the file,
// create its copy, write it, fsync it; dst itself is fsynced at the end
// so the names are durable too. It returns files per second: the baseline
// of a small-file ingest.
func copyRate(src, dst string) (float64, error) {
	ents, err := os.ReadDir(src)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return 0, err
		}
		f, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, err
		}
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
	}
	d, err := os.Open(dst)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return 0, err
	}
	return float64(len(ents)) / time.Since(t0).Seconds(), nil
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "hash" {
		r, err := hashRate(os.Args[2], os.Args[3])
		if err != nil {
			fail(err)
		}
		fmt.Println(int(r))
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "copy" {
		r, err := copyRate(os.Args[2], os.Args[3])
		if err != nil {
			fail(err)
		}
		fmt.Println(int(r))
		return
	}
	if len(os.Args) == 5 && os.Args[1] == "objects" {
		count, err1 := strconv.Atoi(os.Args[3])
		size, err2 := strconv.Atoi(os.Args[4])
		if err1 != nil || err2 != nil || count < 1 || size < 1 {
			fail(fmt.Errorf("objects: COUNT and SIZE are positive numbers (bytes)"))
		}
		if err := objectsMain(os.Args[2], count, size); err != nil {
			fail(err)
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "wake-echo" {
		wakeEcho()
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "wake" {
		wakeMain()
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "md" {
		fmt.Fprintln(os.Stderr, "usage: corebench md (--server ADDR | --posix DIR) [--clients N] [--files F]\n       corebench hash sha256|blake3 FILE   (MB/s of the hash over FILE on one core)\n       corebench copy SRC DST              (files/s of a durable copy, one file at a time)\n       corebench wake                      (a hand-off's round trip against the idle time before it)\n       corebench objects DIR COUNT SIZE    (small objects stored durably: a file each against one pack file)")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("md", flag.ExitOnError)
	server := fs.String("server", "", "Strata server")
	posix := fs.String("posix", "", "local directory")
	clients := fs.Int("clients", 1, "concurrent clients")
	files := fs.Int("files", 10000, "files per client")
	durable := fs.Bool("sync", false, "posix: fsync each created file and its directory")
	tcp := fs.Bool("tcp", false, "strata: reach the core over TCP even on its host (default: its Unix socket, as any local client)")
	phases := fs.String("phases", "create,stat,remove", "which phases to run, in order (a profile of one phase alone)")
	serverPID := fs.Int("server-pid", 0, "strata: the server's process id, to report CPU per operation")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the create phase (this process: the clients) to FILE")
	under := fs.String("under", "", "strata: the directory to work in (default /; a user who is not an admin needs one it may write)")
	fs.Parse(os.Args[2:])
	var o ops
	root := fmt.Sprintf("%s/md-%d", strings.TrimRight(*under, "/"), time.Now().UnixNano())
	target := "strata"
	switch {
	case *server != "":
		c, err := client.New(*server)
		if err != nil {
			fail(err)
		}
		c.SetToken(client.DefaultToken())
		c.TCPOnly(*tcp)
		o = strataOps{c}
	case *posix != "":
		o, root, target = posixOps{sync: *durable}, filepath.Join(*posix, fmt.Sprintf("md-%d", time.Now().UnixNano())), "posix:"+*posix
	default:
		fail(fmt.Errorf("need --server or --posix"))
	}
	dirs := make([]string, *clients)
	for w := range dirs {
		dirs[w] = o.join(root, fmt.Sprintf("c%d", w))
		if err := o.mkdir(dirs[w]); err != nil {
			fail(err)
		}
	}
	name := func(w, i int) string { return o.join(dirs[w], fmt.Sprintf("f%07d", i)) }
	res := map[string]any{"target": target, "clients": *clients, "files_per_client": *files, "sync": *durable}
	if so, ok := o.(strataOps); ok {
		res["control"] = "tcp"
		if so.c.ControlSocket() != "" {
			res["control"] = "unix"
		}
	}
	for _, ph := range []struct {
		name string
		fn   func(string) error
	}{{"create", o.create}, {"stat", o.stat}, {"remove", o.remove}} {
		if !slices.Contains(strings.Split(*phases, ","), ph.name) {
			continue
		}
		if ph.name == "create" && *cpuprofile != "" {
			f, err := os.Create(*cpuprofile)
			if err != nil {
				fail(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fail(err)
			}
		}
		c0 := sample(*serverPID)
		rate, err := phase(*clients, *files, func(w, i int) error { return ph.fn(name(w, i)) })
		if *serverPID != 0 && err == nil {
			res[ph.name+"_cpu_us"] = sample(*serverPID).perOp(c0, *clients**files)
		}
		if ph.name == "create" && *cpuprofile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			fail(fmt.Errorf("%s: %w", ph.name, err))
		}
		res[ph.name+"_per_s"] = int(rate)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

// cpu is a snapshot of CPU time spent so far.
type cpu struct {
	self, server time.Duration
	busy, idle   time.Duration // the whole machine's, from /proc/stat
}

// clockTick is USER_HZ, the unit of /proc's CPU times on Linux.
const clockTick = 10 * time.Millisecond

func sample(serverPID int) cpu {
	var c cpu
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	if serverPID == 0 {
		return c
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", serverPID)); err == nil {
		// Fields after the command name (which may hold spaces): utime
		// and stime are the 12th and 13th.
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 12 {
			c.server = ticks(f[11]) + ticks(f[12])
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
		for i := 1; i < len(f) && i <= 8; i++ {
			if i == 4 || i == 5 {
				c.idle += ticks(f[i])
			} else {
				c.busy += ticks(f[i])
			}
		}
	}
	return c
}

func ticks(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * clockTick
}

// perOp returns the CPU spent since c0 per operation, in microseconds.
func (c cpu) perOp(c0 cpu, ops int) map[string]float64 {
	us := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/float64(ops)*10) / 10 }
	return map[string]float64{"client": us(c.self - c0.self), "server": us(c.server - c0.server), "machine": us(c.busy - c0.busy), "idle": us(c.idle - c0.idle)}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "corebench:", err)
	os.Exit(1)
}
