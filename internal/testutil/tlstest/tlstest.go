// Package tlstest gives tests TLS material as strata serve makes it: a
// private CA of the test's own (pki.Ensure, for 127.0.0.1), the server's
// config from its certificate, and a client's that trusts that CA.
package tlstest

import (
	"crypto/tls"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/internal/pki"
)

// Configs makes a CA under t.TempDir and returns a server's and a
// client's TLS config for 127.0.0.1.
func Configs(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	files := pki.In(filepath.Join(t.TempDir(), "pki"))
	if err := pki.Ensure(files, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	server, err := pki.ServerConfig(files.Cert, files.Key, "")
	if err != nil {
		t.Fatal(err)
	}
	if client, err = pki.ClientConfig(files.CA, "", ""); err != nil {
		t.Fatal(err)
	}
	return server, client
}
