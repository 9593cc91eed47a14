package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Federated tokens: JWTs from issuers a site trusts, read as the WLCG
// token profile says (the one dCache, EOS and XRootD accept). Signatures,
// expiry, issuer and audience are checked by github.com/golang-jwt/jwt
// (a small, well-kept library: parsing and validating JWTs is easy to get
// subtly wrong); the issuer's keys come from its JWKS (a file, or a URL
// fetched at start and again when a token names a key not seen yet).

// MethodJWT is an identity from a federated token.
const MethodJWT = "jwt"

// IssuerConfig is one trusted issuer.
type IssuerConfig struct {
	Issuer   string   // the "iss" claim, exactly
	JWKS     string   // a file, or an https:// (or http://) URL
	Audience []string // accepted "aud" values (one must match)
	// BasePath is where the token's storage.*:/path scopes are rooted
	// in Strata's namespace (default "/").
	BasePath string
	// UserClaim names the claim holding the user (default "sub"),
	// looked up as a user of this host for uid and groups.
	UserClaim string
	// DefaultUser, a user of this host, stands for subjects the host
	// does not know; without it such tokens are refused.
	DefaultUser string
	// Groups maps wlcg.groups values ("/cms") to gids of this host.
	Groups map[string]uint32
}

// issuer is an IssuerConfig with its keys.
type issuer struct {
	cfg     IssuerConfig
	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
}

// JWTVerifier checks federated tokens against the configured issuers.
type JWTVerifier struct {
	issuers map[string]*issuer
	hc      *http.Client
}

// NewJWTVerifier loads every issuer's keys; an issuer whose keys cannot be
// read is an error (a site wants to know at start, not at the first user).
func NewJWTVerifier(cfgs []IssuerConfig) (*JWTVerifier, error) {
	v := &JWTVerifier{issuers: map[string]*issuer{}, hc: &http.Client{Timeout: 10 * time.Second}}
	for _, c := range cfgs {
		if c.Issuer == "" || c.JWKS == "" || len(c.Audience) == 0 {
			return nil, fmt.Errorf("jwt issuer %q: issuer, jwks and audience are required", c.Issuer)
		}
		if c.BasePath == "" {
			c.BasePath = "/"
		}
		if c.UserClaim == "" {
			c.UserClaim = "sub"
		}
		is := &issuer{cfg: c}
		if err := v.load(is); err != nil {
			return nil, err
		}
		v.issuers[c.Issuer] = is
	}
	return v, nil
}

// load reads an issuer's JWKS.
func (v *JWTVerifier) load(is *issuer) error {
	var b []byte
	var err error
	if strings.HasPrefix(is.cfg.JWKS, "https://") || strings.HasPrefix(is.cfg.JWKS, "http://") {
		var resp *http.Response
		if resp, err = v.hc.Get(is.cfg.JWKS); err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s", resp.Status)
			} else {
				b, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			}
		}
	} else {
		b, err = os.ReadFile(is.cfg.JWKS)
	}
	if err != nil {
		return fmt.Errorf("jwt issuer %s: keys from %s: %w", is.cfg.Issuer, is.cfg.JWKS, err)
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return fmt.Errorf("jwt issuer %s: %s: %w", is.cfg.Issuer, is.cfg.JWKS, err)
	}
	is.mu.Lock()
	is.keys, is.fetched = keys, time.Now()
	is.mu.Unlock()
	return nil
}

// ParseJWKS reads a JSON Web Key Set's RSA and P-256 EC public keys by
// key id (other kinds are skipped).
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, Crv string
			N, E, X, Y         string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	dec := func(s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, errors.New("JWKS: bad base64url number")
		}
		return new(big.Int).SetBytes(b), nil
	}
	out := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := dec(k.N)
			e, err2 := dec(k.E)
			if err1 != nil || err2 != nil || !e.IsInt64() || n.BitLen() < 2048 {
				return nil, fmt.Errorf("JWKS: RSA key %q: bad or short modulus", k.Kid)
			}
			out[k.Kid] = &rsa.PublicKey{N: n, E: int(e.Int64())}
		case "EC":
			if k.Crv != "P-256" {
				continue
			}
			x, err1 := dec(k.X)
			y, err2 := dec(k.Y)
			var pub *ecdsa.PublicKey
			if err1 == nil && err2 == nil && x.BitLen() <= 256 && y.BitLen() <= 256 {
				// ParseUncompressedPublicKey checks the point is on the curve.
				pt := make([]byte, 65)
				pt[0] = 4
				x.FillBytes(pt[1:33])
				y.FillBytes(pt[33:])
				pub, err1 = ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
			}
			if pub == nil || err1 != nil {
				return nil, fmt.Errorf("JWKS: EC key %q: not a P-256 point", k.Kid)
			}
			out[k.Kid] = pub
		}
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS: no RSA or P-256 signing keys")
	}
	return out, nil
}

// key finds the issuer's key for kid, fetching a URL's keys again (at
// most once a minute) when the kid is new: issuers rotate keys.
func (v *JWTVerifier) key(is *issuer, kid string) (crypto.PublicKey, error) {
	is.mu.Lock()
	k, ok := is.keys[kid]
	if !ok && kid == "" && len(is.keys) == 1 {
		for _, only := range is.keys {
			k, ok = only, true
		}
	}
	stale := time.Since(is.fetched) > time.Minute && strings.Contains(is.cfg.JWKS, "://")
	is.mu.Unlock()
	if ok {
		return k, nil
	}
	if stale && v.load(is) == nil {
		is.mu.Lock()
		k, ok = is.keys[kid]
		is.mu.Unlock()
		if ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no key %q from issuer %s", kid, is.cfg.Issuer)
}

// Verify checks a federated token and returns the identity it carries:
// the user named by the issuer's user claim (uid and groups from this
// host), wlcg.groups mapped to gids, and its storage.* scopes rooted at
// the issuer's base path. A token without storage scopes is limited by
// POSIX permissions alone (group-based authorization, as WLCG allows).
func (v *JWTVerifier) Verify(tok string) (*Identity, error) {
	var unverified jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &unverified); err != nil {
		return nil, fmt.Errorf("jwt: %w", err)
	}
	iss, _ := unverified["iss"].(string)
	is, ok := v.issuers[iss]
	if !ok {
		return nil, fmt.Errorf("jwt: issuer %q is not trusted", iss)
	}
	var claims jwt.MapClaims
	_, err := jwt.NewParser(
		jwt.WithValidMethods([]string{"RS256", "ES256"}),
		jwt.WithIssuer(is.cfg.Issuer),
		jwt.WithAudience(is.cfg.Audience...),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(time.Minute),
	).ParseWithClaims(tok, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(is, kid)
	})
	if err != nil {
		return nil, fmt.Errorf("jwt: %w", err)
	}
	name, _ := claims[is.cfg.UserClaim].(string)
	if name == "" {
		return nil, fmt.Errorf("jwt: no %q claim", is.cfg.UserClaim)
	}
	uid, gid, groups, err := LookupUser(name)
	if err != nil && is.cfg.DefaultUser != "" {
		uid, gid, groups, err = LookupUser(is.cfg.DefaultUser)
	}
	if err != nil {
		return nil, fmt.Errorf("jwt: subject %q: %w", name, err)
	}
	id := &Identity{User: name, UID: uid, GID: gid, Groups: groups, Method: MethodJWT}
	id.TokenID, _ = claims["jti"].(string)
	if gs, ok := claims["wlcg.groups"].([]any); ok {
		for _, g := range gs {
			if s, ok := g.(string); ok {
				if gid, ok := is.cfg.Groups[s]; ok {
					id.Groups = append(id.Groups, gid)
				}
			}
		}
	}
	scope, _ := claims["scope"].(string)
	for _, s := range strings.Fields(scope) {
		if !strings.HasPrefix(s, "storage.") {
			continue // openid, offline_access, compute.*: not ours
		}
		sc, err := ParseScope(s)
		if err != nil {
			continue // a storage operation Strata does not have
		}
		sc.Path = cleanPrefix(path.Join(is.cfg.BasePath, sc.Path))
		id.Scopes = append(id.Scopes, sc)
	}
	return id, nil
}
