package main_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/strata-storage/strata/internal/pki"
)

// TestTLS: with TLS on, the control API and the movers' data ports speak
// TLS 1.3 under the CA the server made on first start. A client without
// that CA, or with another, is refused; with it, puts and gets over TCP
// work end to end. Mutual TLS names the user by a client certificate the
// CA signed; a certificate from another CA is refused.
func TestTLS(t *testing.T) {
	s := newServer(t, "[tls]\nenabled = \"on\"\n")
	data := filepath.Join(s.dir, "data")
	ca := filepath.Join(data, "tls", "ca.pem")
	if !s.logged("clients trust " + ca) {
		t.Errorf("serve does not say which CA to trust:\n%s", s.log)
	}
	sock := "unix:" + filepath.Join(data, "strata.sock")
	home := []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME="} // no login file of the machine's
	run := func(env []string, args ...string) (string, string, int) {
		return s.runAs(nil, append(append([]string{}, home...), env...), args...)
	}
	// On the server's host the socket needs neither: the kernel says who
	// is calling.
	out, errs, code := run(nil, "--server", sock, "token", "create", "--user", "root", "--ttl", "1h")
	if code != 0 {
		t.Fatalf("token over the socket: %s", errs)
	}
	tok := []string{"STRATA_TOKEN=" + strings.TrimSpace(out)}
	https := "https://" + s.addr

	// Another CA, for certificates the server must not accept.
	other := pki.In(filepath.Join(t.TempDir(), "other"))
	if err := pki.Ensure(other, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no CA", []string{"--server", https, "whoami"}, "certificate signed by unknown authority"},
		{"another CA", []string{"--server", https, "--ca", other.CA, "whoami"}, "certificate signed by unknown authority"},
		{"plain HTTP to a TLS port", []string{"--server", "http://" + s.addr, "--tcp-only", "whoami"}, "speaks TLS: name it " + https + ", and give its CA with --ca"},
		{"plain HTTP to a TLS port, asking for the socket", []string{"--server", "http://" + s.addr, "whoami"}, "speaks TLS: name it " + https},
	} {
		_, errs, code := run(tok, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d %q, want one line with %q", tc.name, code, errs, tc.msg)
		}
	}

	// With the CA: control and data over TLS (the server address needs no
	// scheme once a CA is given).
	src := filepath.Join(s.dir, "src")
	want := writeRandom(t, src, 5<<20+3)
	tcp := []string{"--server", s.addr, "--ca", ca, "--tcp-only"}
	for _, args := range [][]string{{"put", src, "/f"}, {"get", "/f", filepath.Join(s.dir, "out")}} {
		if _, errs, code := run(tok, append(tcp, args...)...); code != 0 {
			t.Fatalf("%v over TLS: %s", args, errs)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(s.dir, "out")); !bytes.Equal(got, want) {
		t.Fatal("the file read over TLS differs")
	}
	if out, _, _ := run(tok, append(tcp, "whoami")...); !strings.Contains(out, "via token") {
		t.Errorf("whoami over TLS: %q", out)
	}

	// Mutual TLS: the server's CA signs client certificates.
	s.stop()
	conf, _ := os.ReadFile(s.cfg)
	conf = bytes.Replace(conf, []byte("[tls]\n"), []byte("[tls]\nclient_ca = \""+ca+"\"\n"), 1)
	if err := os.WriteFile(s.cfg, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	s.start()
	certDir := filepath.Join(t.TempDir(), "root")
	if _, errs, code := run(nil, "cert", "issue", "--user", "root", "--out", certDir, "--data", data); code != 0 {
		t.Fatalf("cert issue: %s", errs)
	}
	cert, key := filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "key.pem")
	out, errs, code = run(nil, append(tcp, "--cert", cert, "--key", key, "whoami")...)
	if code != 0 || !strings.Contains(out, "uid=0") || !strings.Contains(out, "via x509") {
		t.Errorf("whoami with a client certificate: %q %q", out, errs)
	}
	strangerDir := t.TempDir()
	if err := pki.Issue(other, filepath.Join(strangerDir, "c.pem"), filepath.Join(strangerDir, "k.pem"), nil, "root", false); err != nil {
		t.Fatal(err)
	}
	_, errs, code = run(nil, append(tcp, "--cert", filepath.Join(strangerDir, "c.pem"), "--key", filepath.Join(strangerDir, "k.pem"), "whoami")...)
	if code == 0 || strings.Count(errs, "\n") != 1 {
		t.Errorf("a client certificate from another CA: exit %d %q", code, errs)
	}
	// Without a certificate, a token still does.
	if _, errs, code := run(tok, append(tcp, "stat", "/f")...); code != 0 {
		t.Errorf("token with mutual TLS configured: %s", errs)
	}
}

// TestPlainTCPRefusedOffLoopback: a server told to listen on every
// interface without TLS refuses to start, saying why, unless --insecure.
func TestPlainTCPRefusedOffLoopback(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "strata.toml")
	os.WriteFile(cfg, []byte("listen = \"0.0.0.0:0\"\ndata_dir = \""+filepath.Join(dir, "data")+"\"\n[mover]\nlisten = \"127.0.0.1:0\"\n[tls]\nenabled = \"off\"\n"), 0o644)
	s := &server{t: t, dir: dir}
	_, errs, code := s.runAs(nil, nil, "serve", "--config", cfg)
	if code == 0 || !strings.Contains(errs, "refusing to serve plain TCP on 0.0.0.0:0") || !strings.Contains(errs, "--insecure") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d %q", code, errs)
	}
}

// TestJWT: a federated token from a configured issuer (WLCG profile)
// authenticates over TCP; its storage scopes, rooted at the issuer's base
// path, limit what it may do; a token from another key is refused.
func TestJWT(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": "k1", "crv": "P-256", "x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32)))}}})
	os.WriteFile(jwks, set, 0o644)
	s := newServer(t, "[[auth.issuer]]\nissuer = \"https://iam.example.org/\"\njwks = \""+jwks+"\"\naudience = [\"strata\"]\nbase_path = \"/vo\"\n")
	s.ok("mkdir", "-p", "/vo/data", "/other")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 100)
	s.ok("put", src, "/vo/data/f")
	s.ok("put", src, "/other/f")
	sign := func(k *ecdsa.PrivateKey, claims jwt.MapClaims) string {
		c := jwt.MapClaims{"iss": "https://iam.example.org/", "aud": "strata", "sub": "root", "exp": time.Now().Add(time.Hour).Unix(), "scope": "openid storage.read:/data"}
		for n, v := range claims {
			c[n] = v
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
		tok.Header["kid"] = "k1"
		out, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run := func(tok string, args ...string) (string, string, int) {
		return s.runAs(nil, []string{"STRATA_TOKEN=" + tok, "HOME=" + t.TempDir()}, append([]string{"--tcp-only"}, args...)...)
	}
	good := sign(key, nil)
	if out, errs, code := run(good, "whoami"); code != 0 || !strings.Contains(out, "via jwt") || !strings.Contains(out, "storage.read:/vo/data") {
		t.Fatalf("whoami with a JWT: %q %q", out, errs)
	}
	if _, errs, code := run(good, "stat", "/vo/data/f"); code != 0 {
		t.Errorf("read in scope: %s", errs)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name, tok string
		args      []string
		msg       string
	}{
		{"outside the scope", good, []string{"stat", "/other/f"}, "no storage.read scope"},
		{"a write with a read scope", good, []string{"put", src, "/vo/data/g"}, "no storage.create scope"},
		{"another key", sign(other, nil), []string{"stat", "/vo/data/f"}, "verification error"},
		{"expired", sign(key, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}), []string{"stat", "/vo/data/f"}, "expired"},
		{"wrong audience", sign(key, jwt.MapClaims{"aud": "dcache"}), []string{"stat", "/vo/data/f"}, "aud"},
		{"wrong issuer", sign(key, jwt.MapClaims{"iss": "https://other.example.org/"}), []string{"stat", "/vo/data/f"}, "not trusted"},
	} {
		_, errs, code := run(tc.tok, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d %q, want one line with %q", tc.name, code, errs, tc.msg)
		}
	}
}
