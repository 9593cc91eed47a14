// Package pki owns Strata's TLS material: the private certificate
// authority `strata serve` creates in its data directory on first start,
// the server certificate it issues itself from it (for the control API
// and the movers' data ports), certificates for movers on other hosts and
// for clients (mutual TLS), and the tls.Configs built from them: TLS 1.3
// only.
//
// It uses crypto/x509 and crypto/tls from the standard library: ECDSA
// P-256 keys, certificates valid for ten years (the CA) and two years
// (what it issues), reissued when a configured host name is missing.
// A site with its own PKI configures its certificate and key instead.
//
// Channel (channel.go) is the movers' data channel: a crypto/tls
// handshake, then the bytes in AES-GCM frames keyed from it, at about
// the CPU of the cipher alone. Conn (conn.go) is crypto/tls with its
// records gathered into large writes and read in large reads, measured
// faster than crypto/tls alone: the tape server's HTTPS.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files names the PEM files of a data directory's TLS material.
type Files struct {
	CA, CAKey, Cert, Key string
}

// In returns the files under dir (the data directory's "tls").
func In(dir string) Files {
	return Files{CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
}

// Ensure creates what is missing under f: the CA (first start), and a
// server certificate for hosts (names or IP addresses), issued again when
// it lacks one of them or expires within 30 days.
func Ensure(f Files, hosts []string) error {
	if err := os.MkdirAll(filepath.Dir(f.CA), 0o700); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if _, err := os.Stat(f.CA); errors.Is(err, os.ErrNotExist) {
		if err := newCA(f); err != nil {
			return err
		}
	}
	if cert, err := readCert(f.Cert); err == nil && covers(cert, hosts) && time.Until(cert.NotAfter) > 30*24*time.Hour {
		return nil
	}
	return Issue(f, f.Cert, f.Key, hosts, "strata server", true)
}

func newCA(f Files) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: CA key: %w", err)
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "strata CA " + host, Organization: []string{"strata"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tls: CA: %w", err)
	}
	if err := writeKey(f.CAKey, key); err != nil {
		return err
	}
	return writePEM(f.CA, "CERTIFICATE", der, 0o644)
}

// Issue signs a certificate for hosts (a server's: names and addresses it
// is reached by) or for a client (server false: hosts[0] is the subject's
// common name, the user it maps to) with the CA in f, and writes it and
// its key to cert and key.
func Issue(f Files, cert, key string, hosts []string, cn string, server bool) error {
	ca, err := readCert(f.CA)
	if err != nil {
		return fmt.Errorf("tls: CA %s: %w", f.CA, err)
	}
	caKey, err := readKey(f.CAKey)
	if err != nil {
		return fmt.Errorf("tls: CA key %s: %w (issuing needs the CA's key)", f.CAKey, err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"strata"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("tls: issue %s: %w", cn, err)
	}
	if err := writeKey(key, k); err != nil {
		return err
	}
	return writePEM(cert, "CERTIFICATE", der, 0o644)
}

// covers reports whether cert names every one of hosts.
func covers(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if h != "" && !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return fmt.Errorf("tls: key: %w", err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes atomically (a crash leaves the old file or the new one).
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _ := pem.Decode(b)
	if p == nil || p.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(p.Bytes)
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _ := pem.Decode(b)
	if p == nil {
		return nil, fmt.Errorf("%s: no PEM key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(p.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ek, nil
}

// Pool reads a PEM bundle of CA certificates.
func Pool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: CA: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA %s: no PEM certificates in it", caFile)
	}
	return p, nil
}

// ServerConfig is a listener's TLS: its certificate and key, TLS 1.3
// only; with clientCA, client certificates signed by it are verified when
// a client presents one (mutual TLS; a client may still come without one
// and present a token instead).
func ServerConfig(cert, key, clientCA string) (*tls.Config, error) {
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{kp}}
	if clientCA != "" {
		if c.ClientCAs, err = Pool(clientCA); err != nil {
			return nil, err
		}
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c, nil
}

// ClientConfig trusts the CAs in caFile ("" for the system's roots), and
// presents cert/key when given (mutual TLS).
func ClientConfig(caFile, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile != "" {
		p, err := Pool(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = p
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}
