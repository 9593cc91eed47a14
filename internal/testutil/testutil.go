// Package testutil starts real Strata servers for tests: real SQLite, real
// device directories, real sockets on 127.0.0.1, all under t.TempDir and
// stopped at cleanup.
package testutil

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
)

// Config returns a configuration for a test server in dir: ephemeral
// ports, four devices, and a 64 KiB stripe unit so that small files already
// span several stripes.
func Config(dir string) config.Config {
	c := config.Default()
	c.DataDir = dir
	c.Listen = "127.0.0.1:0"
	c.Mover.Listen = "127.0.0.1:0"
	c.Mover.Advertise = ""
	c.Catalog.Sync = "normal"
	// The tape library runs in instant time: its modelled seconds are
	// counted, not waited for. Policies run only when a test asks.
	c.Library.TimeScale = "instant"
	c.Library.Drives, c.Library.Cartridges = 2, 4
	c.Library.Path = ""
	c.HSM.MigrateEvery, c.HSM.PurgeEvery = "1h", "1h"
	c.HSM.RecallMinFiles = 1 // a recall mounts at once
	for i := range c.COS {
		c.COS[i].StripeUnit = 64 << 10
	}
	c.Devices = nil
	for i := 0; i < 4; i++ {
		c.Devices = append(c.Devices, config.Device{ID: fmt.Sprintf("disk%d", i)})
	}
	return c
}

// Start starts a server configured by Config(t.TempDir()) and edit.
func Start(t testing.TB, edit func(*config.Config)) *server.Server {
	t.Helper()
	return StartWith(t, server.Options{}, edit)
}

// StartWith is Start with server options (a faultfs for the devices).
func StartWith(t testing.TB, o server.Options, edit func(*config.Config)) *server.Server {
	t.Helper()
	c := Config(filepath.Join(t.TempDir(), "data"))
	if edit != nil {
		edit(&c)
	}
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	s, err := server.StartWith(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Token returns a bearer token for the given user and uid on s (made in
// process, as an admin would with `strata token create`), for clients
// that reach s over TCP.
func Token(t testing.TB, s *server.Server, user string, uid uint32, scopes ...string) string {
	t.Helper()
	ti, err := s.Core.CreateToken(auth.With(context.Background(), auth.Root), api.TokenRequest{User: user, UID: &uid, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return ti.Token
}

// Client returns a client of s authenticated as root (over TCP by its
// token, on the socket by the kernel's word), closed at cleanup.
func Client(t testing.TB, s *server.Server) *client.Client {
	t.Helper()
	c, err := client.New(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(Token(t, s, "root", 0))
	t.Cleanup(func() { c.Close() })
	return c
}
