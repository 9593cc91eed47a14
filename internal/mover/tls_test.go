package mover

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/disk"
	"github.com/strata-storage/strata/internal/moverconn"
	"github.com/strata-storage/strata/internal/pki"
	"github.com/strata-storage/strata/internal/token"
)

// The data path over TLS: a client verifies the mover's certificate
// against its CA before sending anything, and moves data once it does.
func TestTLSDataPath(t *testing.T) {
	ca := func(name string) pki.Files {
		f := pki.In(filepath.Join(t.TempDir(), name))
		if err := pki.Ensure(f, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		return f
	}
	mine, other := ca("mine"), ca("other")
	srv, err := pki.ServerConfig(mine.Cert, mine.Key, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.Open("d0", t.TempDir(), disk.Options{Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	signer := token.NewSigner([]byte("test secret"))
	m := New("m0", []*disk.Device{d}, signer, nil)
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(pki.NewDataListener(ln, srv))
	ep := moverconn.Endpoint{Addr: ln.Addr().String(), TLS: true}
	f := &fixture{m: m, signer: signer, ep: ep}

	for _, tc := range []struct {
		name  string
		trust *pki.Files
		err   string
	}{
		{"no CA", nil, "no CA is configured"},
		{"another CA", &other, "certificate signed by unknown authority"},
		{"its CA", &mine, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.pool = moverconn.NewPool()
			defer f.pool.Close()
			if tc.trust != nil {
				if f.pool.TLS, err = pki.ClientConfig(tc.trust.CA, "", ""); err != nil {
					t.Fatal(err)
				}
			}
			c, err := f.pool.Get(context.Background(), ep)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f.pool.Put(c)
			data := bytes.Repeat([]byte("tls "), 300<<10)
			obj := "0000000000000001.0.0"
			if _, err := f.write(t, f.tok(token.OpWrite, obj, int64(len(data)), 0, time.Minute), obj, data); err != nil {
				t.Fatal(err)
			}
			got, err := f.read(t, f.tok(token.OpRead, obj, 0, 0, time.Minute), obj)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back over TLS: %d bytes, %v", len(got), err)
			}
		})
	}

	// A port that speaks TLS records after the handshake (not the data
	// channel) is refused in the handshake, before a request is sent.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve(tls.NewListener(ln2, srv))
	pool := moverconn.NewPool()
	defer pool.Close()
	if pool.TLS, err = pki.ClientConfig(mine.CA, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Get(context.Background(), moverconn.Endpoint{Addr: ln2.Addr().String(), TLS: true}); err == nil || !strings.Contains(err.Error(), "does not speak "+pki.DataProtocol) {
		t.Fatalf("a TLS-records port: got %v", err)
	}
}
