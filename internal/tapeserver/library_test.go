package tapeserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tape/tapetest"
	"github.com/strata-storage/strata/internal/tapeserver"
)

var secret = []byte("conformance secret")

// bed is a library of tape servers on 127.0.0.1, each with its own drives
// of one shared set of cartridges, and the core's Library over them.
type bed struct {
	lib *tapeserver.Library
	url string // the first server's
}

// serveDrives serves e's drives on 127.0.0.1 (with TLS when tc is set)
// until the test ends, and returns the URL.
func serveDrives(t *testing.T, e *tape.Emulator, tc *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if tc != nil {
		ln, url = pki.NewListener(ln, tc), "https://"+ln.Addr().String()
	}
	srv := &http.Server{Handler: tapeserver.NewServer(e, moverconn.NewPool(), secret, nil).Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return url
}

// openBed starts one tape server per entry of drives (how many drives it
// has) over the library in dir.
func openBed(t *testing.T, dir string, fs fsio.FS, cartridges int, capacity int64, drives ...int) *bed {
	t.Helper()
	b := &bed{lib: tapeserver.NewLibrary(tapeserver.LibraryOptions{Generation: tape.Generations["LTO-9"], Capacity: capacity,
		Clock: clock.NewInstant(time.Time{}), Secret: secret})}
	n := 0
	for k, nd := range drives {
		var ids []string
		for i := 0; i < nd; i++ {
			ids = append(ids, fmt.Sprintf("drive%d", n))
			n++
		}
		e, err := tape.OpenEmulator(dir, tape.Options{DriveIDs: ids, Cartridges: cartridges, Capacity: capacity,
			Clock: clock.NewInstant(time.Time{}), FS: fs, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		url := serveDrives(t, e, nil)
		if b.url == "" {
			b.url = url
		}
		r := tapeserver.Registration{ID: fmt.Sprintf("ts%d", k), URL: url, Generation: "LTO-9",
			Drives: e.Drives(), Cartridges: e.Cartridges()}
		r.Proof = tapeserver.Proof(secret, r)
		if err := b.lib.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// The core's view of drives on tape servers passes the library
// conformance suite, its drives split over two tape servers (a cartridge
// written in one server's drive is read in the other's), the cartridges'
// files going through a faultfs so that the suite can crash them.
func TestRemoteConformance(t *testing.T) {
	var disks tapetest.Disks
	tapetest.Run(t, tapetest.Harness{
		Open: func(t *testing.T, dir string, o tapetest.Options) tape.Library {
			drives := []int{o.Drives}
			if o.Drives > 1 {
				drives = []int{(o.Drives + 1) / 2, o.Drives / 2}
			}
			return openBed(t, dir, disks.For(dir), o.Cartridges, o.Capacity, drives...).lib
		},
		Crash:  disks.Crash,
		Faults: func(l tape.Library) tapetest.Faults { return tapetest.FaultsOf(l.(*tapeserver.Library)) },
	})
}

// A tape server on TLS (its listener as strata tape-server makes it) and
// the core's library verifying it by the cluster's CA: a tape file goes
// through and reads back.
func TestRemoteOverTLS(t *testing.T) {
	files := pki.In(t.TempDir())
	if err := pki.Ensure(files, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	srvTLS, err := pki.ServerConfig(files.Cert, files.Key, "")
	if err != nil {
		t.Fatal(err)
	}
	trust, err := pki.ClientConfig(files.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e, err := tape.OpenEmulator(dir, tape.Options{DriveIDs: []string{"d0"}, Cartridges: 1, Clock: clock.NewInstant(time.Time{}), Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	url := serveDrives(t, e, srvTLS)
	lib := tapeserver.NewLibrary(tapeserver.LibraryOptions{Generation: tape.Generations["LTO-9"], Clock: clock.NewInstant(time.Time{}), Secret: secret, TLS: trust})
	r := tapeserver.Registration{ID: "ts", URL: url, Generation: "LTO-9", Drives: e.Drives(), Cartridges: e.Cartridges()}
	r.Proof = tapeserver.Proof(secret, r)
	if err := lib.Register(r); err != nil {
		t.Fatal(err)
	}
	if err := lib.Mount(ctx, "d0", "T00000"); err != nil {
		t.Fatal(err)
	}
	seq := tapetest.AppendFile(t, lib, "d0", []byte("over TLS"))
	if got := tapetest.ReadAll(t, lib, "d0", seq, 0, 8); string(got) != "over TLS" {
		t.Fatalf("read back %q", got)
	}
}

// Only the core may drive a tape server, and only a tape server with the
// cluster secret may offer the core drives.
func TestRemoteRefusesStrangers(t *testing.T) {
	b := openBed(t, t.TempDir(), fsio.OS, 1, 0, 1)
	drives := b.lib.Drives()
	if len(drives) != 1 {
		t.Fatalf("drives %+v", drives)
	}
	other := tapeserver.NewLibrary(tapeserver.LibraryOptions{Generation: tape.Generations["LTO-9"], Clock: clock.NewInstant(time.Time{}), Secret: []byte("another secret")})
	r := tapeserver.Registration{ID: "ts0", URL: b.url, Generation: "LTO-9", Drives: drives, Cartridges: b.lib.Cartridges()}
	r.Proof = tapeserver.Proof(secret, r) // this cluster's proof: the other core refuses it
	if err := other.Register(r); err == nil {
		t.Fatal("a registration proved with another cluster's secret was accepted")
	}
	// Proved with the other core's own secret, it registers ...
	r.Proof = tapeserver.Proof([]byte("another secret"), r)
	if err := other.Register(r); err != nil {
		t.Fatal(err)
	}
	// ... and its calls, signed with its own secret, are refused by the
	// tape server.
	if err := other.Mount(ctx, drives[0].ID, "T00000"); err == nil || !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("a core with another secret mounted a cartridge: %v", err)
	}
	if err := b.lib.Mount(ctx, drives[0].ID, "T00000"); err != nil {
		t.Fatalf("the right core cannot mount after a stranger tried: %v", err)
	}
}

var ctx = context.Background()

// hangingServer serves e's drives like serveDrives, until hang is called:
// from then on, as a tape server whose process hangs while its host
// still answers TCP (stopped, deadlocked, its disk gone), new requests
// get no answer and replies in progress stop, and it stops registering.
// The core's library, with lost after 300 ms of silence, is returned.
func hangingServer(t *testing.T, e *tape.Emulator) (lib *tapeserver.Library, hang func()) {
	t.Helper()
	var hung atomic.Bool
	release := make(chan struct{})
	h := tapeserver.NewServer(e, moverconn.NewPool(), secret, nil).Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			<-release
			return
		}
		h.ServeHTTP(&stallingWriter{ResponseWriter: w, hung: &hung, release: release}, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { close(release) }) // first: the handlers return
	lib = tapeserver.NewLibrary(tapeserver.LibraryOptions{Generation: tape.Generations["LTO-9"], Clock: clock.NewInstant(time.Time{}),
		Secret: secret, LostAfter: 300 * time.Millisecond})
	register := func() {
		r := tapeserver.Registration{ID: "ts", URL: "http://" + ln.Addr().String(), Generation: "LTO-9", Drives: e.Drives(), Cartridges: e.Cartridges()}
		r.Proof = tapeserver.Proof(secret, r)
		if err := lib.Register(r); err != nil {
			t.Error(err)
		}
	}
	register()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if !hung.Load() {
					register()
				}
			}
		}
	}()
	return lib, func() { hung.Store(true) }
}

// stallingWriter is a reply that stops, mid-stream, once the server
// hangs.
type stallingWriter struct {
	http.ResponseWriter
	hung    *atomic.Bool
	release chan struct{}
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	if w.hung.Load() {
		<-w.release
		return 0, errors.New("the test is over")
	}
	return w.ResponseWriter.Write(p)
}

func (w *stallingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A tape server that hangs loses the requests it holds once it has been
// silent for LostAfter: a request sent while it hangs, and a tape file
// it stops streaming halfway, each end with ErrLost instead of waiting
// for ever (its host's TCP stack keeps the connections alive, so no
// keepalive would end them).
func TestHungTapeServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a watch that failed: a failure, not a hang
	defer cancel()
	open := func(t *testing.T) (*tapeserver.Library, func(), int, []byte) {
		e, err := tape.OpenEmulator(t.TempDir(), tape.Options{DriveIDs: []string{"d0"}, Cartridges: 1, Clock: clock.NewInstant(time.Time{}), Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		lib, hang := hangingServer(t, e)
		if err := lib.Mount(ctx, "d0", "T00000"); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 64<<20) // more than the sockets buffer
		for i := range data {
			data[i] = byte(i * 7)
		}
		return lib, hang, tapetest.AppendFile(t, lib, "d0", data), data
	}
	t.Run("request", func(t *testing.T) {
		lib, hang, _, _ := open(t)
		hang()
		if err := lib.Flush(ctx, "d0"); !errors.Is(err, tapeserver.ErrLost) {
			t.Fatalf("flush on a hung tape server: %v, want ErrLost", err)
		}
		if d := lib.Drives(); len(d) != 1 || !d[0].Lost {
			t.Fatalf("drives %+v: want d0 lost", d)
		}
	})
	t.Run("stream", func(t *testing.T) {
		lib, hang, seq, data := open(t)
		r, err := lib.ReadData(ctx, "d0", seq, 0, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		head := make([]byte, 1<<20)
		if _, err := io.ReadFull(r, head); err != nil {
			t.Fatal(err)
		}
		hang()
		n, err := io.Copy(io.Discard, r)
		if !errors.Is(err, tapeserver.ErrLost) {
			t.Fatalf("a stream the tape server stopped feeding: %d more bytes, %v; want ErrLost", n, err)
		}
		if int(n)+len(head) >= len(data) {
			t.Fatalf("the whole file arrived (%d bytes): the server did not stall", int(n)+len(head))
		}
	})
}
