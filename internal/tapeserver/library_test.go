package tapeserver_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/clock"
	"github.com/strata-storage/strata/internal/fsio"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/tape"
	"github.com/strata-storage/strata/internal/tape/tapetest"
	"github.com/strata-storage/strata/internal/tapeserver"
)

var secret = []byte("conformance secret")

// bed is a library of tape servers on 127.0.0.1, each with its own drives
// of one shared set of cartridges, and the core's Library over them.
type bed struct {
	lib     *tapeserver.Library
	servers []*http.Server
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
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: tapeserver.NewServer(e, moverconn.NewPool(), secret, nil).Handler()}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		b.servers = append(b.servers, srv)
		r := tapeserver.Registration{ID: fmt.Sprintf("ts%d", k), URL: "http://" + ln.Addr().String(), Generation: "LTO-9",
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
