package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// Authentication: who is calling. On the Unix socket the server's
// listener has put the kernel's credentials of the peer into the
// connection's context (PeerIdentity); over TCP a request carries a
// bearer token ("Authorization: Bearer strata_…"), which the catalog
// knows by its ID and the hash of its secret. Anything else is 401.

// tokenCache holds the identities of tokens verified recently, by the
// token as presented, so a request with a token seen before costs a map
// lookup: no catalog read, no hash, no allocation. This core is the only
// writer of tokens (one server per catalog), so a revocation drops its
// entries at once and the cache is never stale; expiry is checked on
// every use.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	id      *auth.Identity // shared by the requests that present it: never modified
	expires int64
}

const tokenCacheMax = 1 << 14

var serverUID = uint32(os.Getuid())

// PeerIdentity is the identity of a process on this host connected to the
// Unix socket: its uid, gid and groups as the kernel gave them; an admin
// when root or in an admin group.
func (c *Core) PeerIdentity(p auth.Peer) *auth.Identity {
	id := &auth.Identity{User: auth.NameOf(p.UID), UID: p.UID, GID: p.GID, Groups: p.Groups, Method: auth.MethodPeer}
	id.Admin = c.isAdmin(id)
	return id
}

// CertIdentity is the identity a verified TLS client certificate proves:
// its common name is a user of this host (uid and groups from the host's
// user database).
func (c *Core) CertIdentity(cn string) (*auth.Identity, error) {
	uid, gid, groups, err := auth.LookupUser(cn)
	if err != nil {
		return nil, err
	}
	id := &auth.Identity{User: cn, UID: uid, GID: gid, Groups: groups, Method: auth.MethodCert}
	id.Admin = c.isAdmin(id)
	return id, nil
}

// isAdmin: root, the user the server runs as (who owns every byte it
// stores anyway: on a laptop, the one who started it), and members of an
// admin group.
func (c *Core) isAdmin(id *auth.Identity) bool {
	if id.UID == 0 || id.UID == serverUID {
		return true
	}
	for _, g := range c.cfg.AdminGroups {
		if id.InGroup(g) {
			return true
		}
	}
	return false
}

// Identify establishes who sent r: the connection's identity (the Unix
// socket's peer), else its bearer token. ErrUnauthenticated when neither.
func (c *Core) Identify(r *http.Request) (*auth.Identity, error) {
	id, err := c.identify(r)
	if v := r.Header.Get(api.OnBehalfOf); v != "" && err == nil {
		return c.actFor(id, v)
	}
	return id, err
}

// actFor is the identity a gateway (a mount serving many local users)
// asks to act as: only an administrator, unscoped, may ask, since it
// vouches for who its own callers are (the kernel told it). The header
// is "UID:GID[:G1,G2,…]".
func (c *Core) actFor(gw *auth.Identity, v string) (*auth.Identity, error) {
	if !gw.Admin || gw.Scopes != nil {
		return nil, api.Errorf(api.ErrDenied, "%s: only an administrator may act for another user (%s is not)", api.OnBehalfOf, gw.User)
	}
	f := strings.Split(v, ":")
	num := func(s string) (uint32, error) {
		n, err := strconv.ParseUint(s, 10, 32)
		return uint32(n), err
	}
	uid, err1 := num(f[0])
	var gid uint32
	var err2 error
	if len(f) > 1 {
		gid, err2 = num(f[1])
	}
	if len(f) < 2 || len(f) > 3 || err1 != nil || err2 != nil {
		return nil, api.Errorf(api.ErrInvalid, "%s %q: want UID:GID[:G1,G2,...]", api.OnBehalfOf, v)
	}
	id := &auth.Identity{User: auth.NameOf(uid), UID: uid, GID: gid, Method: gw.Method + "+gateway"}
	if len(f) == 3 && f[2] != "" {
		gs := strings.Split(f[2], ",")
		if len(gs) > 256 {
			return nil, api.Errorf(api.ErrInvalid, "%s: more than 256 groups", api.OnBehalfOf)
		}
		for _, g := range gs {
			n, err := num(g)
			if err != nil {
				return nil, api.Errorf(api.ErrInvalid, "%s %q: group %q", api.OnBehalfOf, v, g)
			}
			id.Groups = append(id.Groups, n)
		}
	}
	id.Admin = c.isAdmin(id)
	return id, nil
}

func (c *Core) identify(r *http.Request) (*auth.Identity, error) {
	if id := auth.From(r.Context()); id != nil {
		return id, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, api.Errorf(api.ErrUnauthenticated, "%s %s: no credentials (set STRATA_TOKEN or run `strata login`)", r.Method, r.URL.Path)
	}
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil, api.Errorf(api.ErrUnauthenticated, "authorization scheme %q is not Bearer", scheme)
	}
	tok = strings.TrimSpace(tok)
	if c.cfg.JWT != nil && !strings.HasPrefix(tok, "strata_") && strings.Count(tok, ".") == 2 {
		id, err := c.cfg.JWT.Verify(tok)
		if err != nil {
			return nil, api.Errorf(api.ErrUnauthenticated, "bearer token: %v", err)
		}
		id.Admin = c.isAdmin(id) && id.Scopes == nil
		return id, nil
	}
	return c.verifyToken(r.Context(), tok)
}

// verifyToken checks a bearer token against the catalog.
func (c *Core) verifyToken(ctx context.Context, tok string) (*auth.Identity, error) {
	c.tokens.mu.Lock()
	e, ok := c.tokens.m[tok]
	c.tokens.mu.Unlock()
	if ok && (e.expires == 0 || c.now().UnixNano() <= e.expires) {
		return e.id, nil
	}
	id, secret, err := auth.ParseToken(tok)
	if err != nil {
		return nil, api.Errorf(api.ErrUnauthenticated, "bearer token: %v", err)
	}
	k, err := c.store.Token(ctx, id)
	if errors.Is(err, api.ErrNotFound) {
		return nil, api.Errorf(api.ErrUnauthenticated, "token %s is not known", id)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case k.Kind != catalog.TokenBearer:
		return nil, api.Errorf(api.ErrUnauthenticated, "%s is not a bearer token", id)
	case !auth.SecretMatches(secret, k.Hash):
		return nil, api.Errorf(api.ErrUnauthenticated, "token %s: wrong secret", id)
	case k.Revoked != 0:
		return nil, api.Errorf(api.ErrUnauthenticated, "token %s was revoked", id)
	case k.Expires != 0 && c.now().UnixNano() > k.Expires:
		return nil, api.Errorf(api.ErrUnauthenticated, "token %s expired at %s", id, time.Unix(0, k.Expires).UTC().Format(time.RFC3339))
	}
	who := &auth.Identity{User: k.User, UID: k.UID, GID: k.GID, Groups: k.Groups, Method: auth.MethodToken, TokenID: k.ID}
	for _, s := range k.Scopes {
		sc, err := auth.ParseScope(s)
		if err != nil {
			return nil, fmt.Errorf("token %s: %w", id, err)
		}
		who.Scopes = append(who.Scopes, sc)
	}
	who.Admin = c.isAdmin(who) && who.Scopes == nil // a scoped token is never an admin's
	c.tokens.mu.Lock()
	if len(c.tokens.m) >= tokenCacheMax {
		c.tokens.m = map[string]cachedToken{}
	}
	c.tokens.m[tok] = cachedToken{id: who, expires: k.Expires}
	c.tokens.mu.Unlock()
	return who, nil
}

// CreateToken issues a bearer token (admin only). The secret is in the
// reply and nowhere else.
func (c *Core) CreateToken(ctx context.Context, r api.TokenRequest) (api.TokenInfo, error) {
	if _, err := admin(ctx, "token create"); err != nil {
		return api.TokenInfo{}, err
	}
	if r.User == "" || strings.ContainsFunc(r.User, func(r rune) bool { return r < ' ' || r == 0x7f }) || len(r.User) > 256 {
		return api.TokenInfo{}, api.Errorf(api.ErrInvalid, "token create: a user name is required (printable, at most 256 bytes)")
	}
	if r.TTL < 0 {
		return api.TokenInfo{}, api.Errorf(api.ErrInvalid, "token create: negative lifetime")
	}
	if r.Kind != catalog.TokenBearer && r.Kind != catalog.TokenS3 {
		return api.TokenInfo{}, api.Errorf(api.ErrInvalid, "token create: kind %q (want s3 or none)", r.Kind)
	}
	k := catalog.Token{User: r.User, Groups: r.Groups, Kind: r.Kind, Created: c.now().UnixNano()}
	if r.UID != nil {
		k.UID = *r.UID
		k.GID = k.UID
		if r.GID != nil {
			k.GID = *r.GID
		}
	} else {
		uid, gid, groups, err := auth.LookupUser(r.User)
		if err != nil {
			return api.TokenInfo{}, api.Errorf(api.ErrInvalid, "token create: %v (or give --uid)", err)
		}
		k.UID, k.GID = uid, gid
		if r.GID != nil {
			k.GID = *r.GID
		}
		if k.Groups == nil {
			k.Groups = groups
		}
	}
	for _, s := range r.Scopes {
		sc, err := auth.ParseScope(s)
		if err != nil {
			return api.TokenInfo{}, api.Errorf(api.ErrInvalid, "token create: %v", err)
		}
		k.Scopes = append(k.Scopes, sc.String())
	}
	if r.TTL > 0 {
		k.Expires = c.now().Add(time.Duration(r.TTL * float64(time.Second))).UnixNano()
	}
	var tok string
	if k.Kind == catalog.TokenS3 {
		k.ID, k.Secret = auth.NewS3Key()
		tok = k.Secret
	} else {
		k.ID, tok, k.Hash = auth.NewToken()
	}
	if err := c.store.PutToken(ctx, k); err != nil {
		return api.TokenInfo{}, fmt.Errorf("token create: %w", err)
	}
	c.log.Info("core: token created", "id", k.ID, "kind", k.Kind, "user", k.User, "uid", k.UID, "scopes", strings.Join(k.Scopes, " "))
	out := tokenInfo(k)
	out.Token = tok
	return out, nil
}

func tokenInfo(k catalog.Token) api.TokenInfo {
	t := api.TokenInfo{ID: k.ID, Kind: k.Kind, User: k.User, UID: k.UID, GID: k.GID, Groups: k.Groups, Scopes: k.Scopes, Created: time.Unix(0, k.Created).UTC()}
	if k.Expires != 0 {
		e := time.Unix(0, k.Expires).UTC()
		t.Expires = &e
	}
	if k.Revoked != 0 {
		r := time.Unix(0, k.Revoked).UTC()
		t.Revoked = &r
	}
	return t
}

// Tokens lists every token, never a secret (admin only).
func (c *Core) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	if _, err := admin(ctx, "token list"); err != nil {
		return nil, err
	}
	ks, err := c.store.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.TokenInfo, 0, len(ks))
	for _, k := range ks {
		out = append(out, tokenInfo(k))
	}
	return out, nil
}

// RevokeToken revokes a token at once (admin only).
func (c *Core) RevokeToken(ctx context.Context, r api.RevokeRequest) error {
	if _, err := admin(ctx, "token revoke"); err != nil {
		return err
	}
	if err := c.store.RevokeToken(ctx, r.ID, c.now().UnixNano()); err != nil {
		return fmt.Errorf("token revoke: %w", err)
	}
	c.tokens.mu.Lock()
	for tok, e := range c.tokens.m {
		if e.id.TokenID == r.ID {
			delete(c.tokens.m, tok)
		}
	}
	c.tokens.mu.Unlock()
	c.log.Info("core: token revoked", "id", r.ID)
	return nil
}

// S3Key returns an S3 access key with its secret, for a gateway to check
// Signature V4 requests with (admin only: a gateway acts for its
// callers as an administrator does).
func (c *Core) S3Key(ctx context.Context, id string) (api.TokenInfo, error) {
	if _, err := admin(ctx, "s3 key lookup"); err != nil {
		return api.TokenInfo{}, err
	}
	k, err := c.store.Token(ctx, id)
	if err != nil {
		return api.TokenInfo{}, err
	}
	if k.Kind != catalog.TokenS3 {
		return api.TokenInfo{}, api.Errorf(api.ErrNotFound, "s3 key %s", id)
	}
	t := tokenInfo(k)
	t.Token = k.Secret
	return t, nil
}

// WhoAmI tells callers who the server takes them to be.
func (c *Core) WhoAmI(ctx context.Context) (api.WhoAmI, error) {
	who, err := caller(ctx)
	if err != nil {
		return api.WhoAmI{}, err
	}
	w := api.WhoAmI{User: who.User, UID: who.UID, GID: who.GID, Groups: who.Groups, Admin: who.Admin, Method: who.Method, Token: who.TokenID}
	for _, s := range who.Scopes {
		w.Scopes = append(w.Scopes, s.String())
	}
	return w, nil
}
