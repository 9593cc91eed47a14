package nfsfs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/nfsfs"
	"github.com/strata-storage/strata/internal/testutil"
	"github.com/strata-storage/strata/internal/vfs"
)

var ctx = context.Background()

// export serves a fresh server's namespace over NFS on 127.0.0.1 and
// returns the Strata client and a mounted NFS client.
func export(t *testing.T, o nfsfs.Options) (*client.Client, *nfsfs.Export, func() *nfsc.Target) {
	t.Helper()
	c := testutil.Client(t, testutil.Start(t, nil))
	cache := t.TempDir()
	os.Chmod(cache, 0o700)
	v, err := vfs.New(c, vfs.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Insecure = true // the test may not run as root
	x := nfsfs.New(v, o)
	served := make(chan error, 1)
	go func() { served <- x.Serve(l) }()
	t.Cleanup(func() {
		l.Close()
		<-served
		if err := x.Close(); err != nil {
			t.Error(err)
		}
	})
	port := l.Addr().(*net.TCPAddr).Port
	mount := func() *nfsc.Target {
		rc, err := nfsc.DialServiceAtPort("127.0.0.1", port)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		tgt, err := (&nfsc.Mount{Client: rc}).Mount("/", rpc.AuthNull)
		if err != nil {
			t.Fatal(err)
		}
		return tgt
	}
	return c, x, mount
}

func content(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("file %d;", i)), 20000+i) }

// TestConcurrentClients: clients on their own connections write files at
// once, some the same file in turn, and read them back; every file is
// stored whole once its writes pause.
func TestConcurrentClients(t *testing.T) {
	c, _, mount := export(t, nfsfs.Options{WriteIdle: 100 * time.Millisecond, ReadIdle: 100 * time.Millisecond})
	const clients, files = 4, 6
	var wg sync.WaitGroup
	errs := make(chan error, clients*files)
	for k := range clients {
		v := mount()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * files; i < (k+1)*files; i++ {
				p := fmt.Sprintf("/f%d", i)
				f, err := v.OpenFile(p, 0o644)
				if err == nil {
					_, err = f.Write(content(i))
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", p, err)
					return
				}
				f.Close()
				r, err := v.Open(p)
				if err != nil {
					errs <- fmt.Errorf("open %s: %w", p, err)
					return
				}
				got, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(got, content(i)) {
					errs <- fmt.Errorf("read %s: %d bytes, %v", p, len(got), err)
					return
				}
				// Everyone appends a line to one shared file too.
				s, err := v.OpenFile("/shared", 0o644)
				if err == nil {
					fi, _ := v.Getattr("/shared")
					s.Seek(int64(fi.Size()), io.SeekStart)
					_, err = s.Write([]byte("x"))
				}
				if err != nil {
					errs <- fmt.Errorf("shared: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range clients * files {
		p := fmt.Sprintf("/f%d", i)
		var got bytes.Buffer
		for range 200 {
			got.Reset()
			if _, err := c.Get(ctx, p, &got, client.GetOptions{}); err == nil && got.Len() == len(content(i)) {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if !bytes.Equal(got.Bytes(), content(i)) {
			t.Fatalf("%s stored as %d bytes", p, got.Len())
		}
	}
}

// TestCloseStores: a file whose writes have not paused yet is stored
// when the export stops.
func TestCloseStores(t *testing.T) {
	c, x, mount := export(t, nfsfs.Options{WriteIdle: time.Hour})
	v := mount()
	f, err := v.OpenFile("/late", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("stored at close"))
	if _, err := c.Stat(ctx, "/late"); err == nil {
		t.Fatal("visible on the server before it was stored")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := c.Get(ctx, "/late", &got, client.GetOptions{}); err != nil || got.String() != "stored at close" {
		t.Fatalf("after close: %q %v", got.String(), err)
	}
	fi, _ := c.Stat(ctx, "/late")
	if fi.Mode != 0o600 {
		t.Fatalf("mode %o", fi.Mode)
	}
}
