package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testIssuer signs tokens with an RSA and an EC key and publishes both in
// a JWKS.
type testIssuer struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	jwks []byte
	kid  string // suffix of its key ids
}

func newTestIssuer(t testing.TB) *testIssuer { return newTestIssuerKid(t, "1") }

func newTestIssuerKid(t testing.TB, kid string) *testIssuer {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r" + kid, "use": "sig", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": "e" + kid, "crv": "P-256", "x": b64(ek.X.FillBytes(make([]byte, 32))), "y": b64(ek.Y.FillBytes(make([]byte, 32)))},
	}}
	b, _ := json.Marshal(set)
	return &testIssuer{rsa: rk, ec: ek, jwks: b, kid: kid}
}

// Sign makes a token with claims over the defaults (issuer, audience,
// subject root, an hour to live), by the RSA key unless alg is ES256.
func (ti *testIssuer) Sign(t testing.TB, alg string, claims jwt.MapClaims) string {
	c := jwt.MapClaims{"iss": "https://iam.example.org/", "aud": "strata", "sub": "root", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "jti": "j1"}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	var tok *jwt.Token
	var key any
	if alg == "ES256" {
		tok, key = jwt.NewWithClaims(jwt.SigningMethodES256, c), ti.ec
		tok.Header["kid"] = "e" + ti.kid
	} else {
		tok, key = jwt.NewWithClaims(jwt.SigningMethodRS256, c), ti.rsa
		tok.Header["kid"] = "r" + ti.kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	ti, other := newTestIssuer(t), newTestIssuer(t)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(jwks, ti.jwks, 0o600)
	v, err := NewJWTVerifier([]IssuerConfig{{Issuer: "https://iam.example.org/", JWKS: jwks, Audience: []string{"strata", "https://wlcg.cern.ch/jwt/v1/any"},
		BasePath: "/vo", Groups: map[string]uint32{"/cms": 4242}}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(ti.Sign(t, "ES256", jwt.MapClaims{"scope": "openid storage.read:/data storage.create:/data/in compute.read", "wlcg.groups": []string{"/cms", "/atlas"}}))
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != 0 || id.Method != MethodJWT || id.TokenID != "j1" || !id.InGroup(4242) || id.InGroup(0) && len(id.Groups) == 0 {
		t.Fatalf("identity %+v", id)
	}
	for _, tc := range []struct {
		op, path string
		ok       bool
	}{{ScopeRead, "/vo/data/x", true}, {ScopeRead, "/data/x", false}, {ScopeCreate, "/vo/data/in/y", true}, {ScopeCreate, "/vo/data/y", false}, {ScopeModify, "/vo/data/in/y", false}} {
		if id.Allows(tc.op, tc.path) != tc.ok {
			t.Errorf("%s %s: want %v", tc.op, tc.path, tc.ok)
		}
	}
	if id, err := v.Verify(ti.Sign(t, "RS256", jwt.MapClaims{"aud": []string{"x", "https://wlcg.cern.ch/jwt/v1/any"}})); err != nil || id.Scopes != nil {
		t.Errorf("no storage scopes, the WLCG any-audience: %+v %v", id, err)
	}

	forged := ti.Sign(t, "RS256", nil)
	forged = forged[:strings.LastIndex(forged, ".")+1] + strings.Repeat("A", 342)
	for _, tc := range []struct {
		name, tok, msg string
	}{
		{"expired", ti.Sign(t, "RS256", jwt.MapClaims{"exp": time.Now().Add(-2 * time.Minute).Unix()}), "expired"},
		{"no expiry", ti.Sign(t, "RS256", jwt.MapClaims{"exp": nil}), "exp"},
		{"not yet valid", ti.Sign(t, "RS256", jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()}), "not valid yet"},
		{"wrong audience", ti.Sign(t, "RS256", jwt.MapClaims{"aud": "someone-else"}), "aud"},
		{"untrusted issuer", ti.Sign(t, "RS256", jwt.MapClaims{"iss": "https://evil.example.org/"}), "not trusted"},
		{"another issuer's key", other.Sign(t, "RS256", nil), "verification error"},
		{"forged signature", forged, "verification error"},
		{"unknown subject", ti.Sign(t, "RS256", jwt.MapClaims{"sub": "no-such-user-here"}), "no-such-user-here"},
		{"none alg", strings.Join([]string{b64json(map[string]string{"alg": "none"}), b64json(map[string]any{"iss": "https://iam.example.org/", "aud": "strata", "sub": "root", "exp": time.Now().Add(time.Hour).Unix()}), ""}, "."), "signing method"},
		{"garbage", "a.b.c", "jwt"},
	} {
		if _, err := v.Verify(tc.tok); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.msg)
		}
	}
}

func b64json(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Keys from a URL, fetched again when a token names a key not seen yet
// (the issuer rotated its keys).
func TestJWKSFromURL(t *testing.T) {
	ti := newTestIssuer(t)
	served := ti.jwks
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(served) })}
	go srv.Serve(ln)
	defer srv.Close()
	v, err := NewJWTVerifier([]IssuerConfig{{Issuer: "https://iam.example.org/", JWKS: "http://" + ln.Addr().String() + "/jwks", Audience: []string{"strata"}, DefaultUser: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := v.Verify(ti.Sign(t, "RS256", jwt.MapClaims{"sub": "someone-remote"})); err != nil || id.UID != 0 || id.User != "someone-remote" {
		t.Fatalf("default user for an unknown subject: %+v %v", id, err)
	}
	rotated := newTestIssuerKid(t, "2") // new keys, new key ids
	served = rotated.jwks
	for _, is := range v.issuers {
		is.fetched = time.Now().Add(-2 * time.Minute)
	}
	if _, err := v.Verify(rotated.Sign(t, "ES256", nil)); err != nil {
		t.Fatalf("after the issuer rotated its keys: %v", err)
	}
}

func FuzzParseJWKS(f *testing.F) {
	f.Add(newTestIssuer(f).jwks)
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseJWKS(b)
		if err == nil && len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
	})
}

func FuzzJWTVerify(f *testing.F) {
	ti := newTestIssuer(f)
	jwks := filepath.Join(f.TempDir(), "jwks.json")
	os.WriteFile(jwks, ti.jwks, 0o600)
	v, err := NewJWTVerifier([]IssuerConfig{{Issuer: "https://iam.example.org/", JWKS: jwks, Audience: []string{"strata"}}})
	if err != nil {
		f.Fatal(err)
	}
	good := ti.Sign(f, "RS256", jwt.MapClaims{"scope": "storage.read:/"})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add("x.y.z")
	f.Fuzz(func(t *testing.T, tok string) {
		// Whatever verifies says what the signed token said: no
		// mutation of it may change a claim and keep the signature.
		id, err := v.Verify(tok)
		if err == nil && (id.User != "root" || len(id.Scopes) != 1 || id.Scopes[0] != (Scope{Op: ScopeRead, Path: "/"})) {
			t.Fatalf("%q verified as %+v", tok, id)
		}
	})
}
