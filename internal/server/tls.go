package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/pki"
)

// tlsSetup is what TLS a process serves with: the listeners' config (nil:
// plain TCP) and what it trusts to verify movers (the core's own
// connections to them, a standalone mover's registration with the core).
type tlsSetup struct {
	server *tls.Config
	trust  *tls.Config
}

// Loopback reports whether a listen address is on a loopback interface
// only (an empty host or 0.0.0.0 is every interface).
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsFiles is where the generated TLS material lives: <data_dir>/tls.
func tlsFiles(cfg config.Config) pki.Files { return pki.In(filepath.Join(cfg.DataDir, "tls")) }

// tlsHosts are the names a generated server certificate must cover: the
// listeners' and advertised addresses, this host's name, loopback, and
// whatever the site added.
func tlsHosts(cfg config.Config) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	for _, a := range []string{cfg.Listen, cfg.Mover.Listen, cfg.Mover.Advertise} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
				hosts = append(hosts, h)
			}
		}
	}
	return append(hosts, cfg.TLS.Hosts...)
}

// setupTLS decides whether the listeners speak TLS and loads (creating
// on first start, for the generated CA) what they need. listeners are
// the TCP addresses this process serves on. Plain TCP on an address other
// than loopback is refused unless the configuration says insecure: a
// bearer token or a file's bytes would cross the network in the clear.
func setupTLS(cfg config.Config, listeners []string, generate bool) (tlsSetup, error) {
	var st tlsSetup
	exposed := ""
	for _, a := range listeners {
		if a != "" && !Loopback(a) { // "": a listener that is off
			exposed = a
		}
	}
	on := cfg.TLS.Enabled == "on" || cfg.TLS.Enabled == "auto" && exposed != ""
	if !on && exposed != "" && !cfg.TLS.Insecure {
		return st, fmt.Errorf("refusing to serve plain TCP on %s, which is not a loopback address: tokens and data would cross the network in the clear (set [tls] enabled = \"auto\" or \"on\", or pass --insecure)", exposed)
	}
	files := tlsFiles(cfg)
	cert, key, ca := cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.CA
	if generate && cert == "" {
		// The CA exists from the first start on, so a site can turn TLS
		// on later and clients can be given the CA beforehand.
		if err := pki.Ensure(files, tlsHosts(cfg)); err != nil {
			return st, err
		}
		cert, key = files.Cert, files.Key
		if ca == "" {
			ca = files.CA
		}
	}
	var err error
	if ca != "" {
		if st.trust, err = pki.ClientConfig(ca, "", ""); err != nil {
			return st, err
		}
	}
	if !on {
		return st, nil
	}
	if cert == "" {
		return st, fmt.Errorf("tls: a mover serving on %s needs [tls] cert and key (strata cert issue --host NAME on the core's host makes them)", exposed)
	}
	st.server, err = pki.ServerConfig(cert, key, cfg.TLS.ClientCA)
	return st, err
}

// handshakeTimeout bounds a client's TLS handshake on the control port.
const handshakeTimeout = 10 * time.Second

// connIdentity gives every control connection the identity its
// transport proves: the kernel's credentials of a Unix socket's peer, or
// the user a verified TLS client certificate names (its subject's common
// name, a user of this host). Anything else gets none and must present a
// bearer token.
func (s *Server) connIdentity(log *slog.Logger) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		switch c := c.(type) {
		case *net.UnixConn:
			p, err := auth.PeerOf(c)
			if err != nil {
				log.Warn("control socket: cannot read the peer's credentials", "err", err)
				return ctx
			}
			return auth.With(ctx, s.Core.PeerIdentity(p))
		case *tls.Conn:
			c.SetDeadline(time.Now().Add(handshakeTimeout))
			err := c.HandshakeContext(ctx)
			c.SetDeadline(time.Time{})
			if err != nil {
				log.Info("control: TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
				return ctx
			}
			certs := c.ConnectionState().PeerCertificates
			if len(certs) == 0 {
				return ctx
			}
			id, err := s.Core.CertIdentity(certs[0].Subject.CommonName)
			if err != nil {
				log.Warn("control: client certificate names no user of this host", "remote", c.RemoteAddr(), "subject", certs[0].Subject.String(), "err", err)
				return ctx
			}
			return auth.With(ctx, id)
		}
		return ctx
	}
}
