// Package auth owns who a caller is and what a caller may do: the
// Identity the server establishes for each request (from the kernel's
// credentials on a Unix socket, or from a bearer token over TCP), the
// POSIX permission check every namespace operation makes, the WLCG-style
// scopes that can narrow a token to some operations under some paths, and
// the bearer token format whose hash the catalog stores.
//
// The server decides who is calling; nothing a client writes in a request
// body names an owner. The core asks Identity.May for every directory on a
// path and every entry it touches, and Identity.Allows for a token's
// scopes.
package auth

import (
	"context"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// How an identity was established.
const (
	MethodPeer     = "peercred" // Unix socket: the kernel's SO_PEERCRED
	MethodToken    = "token"    // a bearer token the catalog holds
	MethodCert     = "x509"     // a TLS client certificate the configured CA signed
	MethodInternal = "internal" // the server itself (tests, tools in-process)
)

// Identity is a caller as the server established it.
type Identity struct {
	User     string // a name for messages and logs ("alice", or "uid:1001")
	UID, GID uint32
	Groups   []uint32 // supplementary groups
	// Admin callers may do anything: the host's root on the socket,
	// members of the configured admin group.
	Admin  bool
	Method string
	// TokenID names the bearer token used, for logs.
	TokenID string
	// Scopes, when not nil, limit what the caller may do beyond its POSIX
	// permissions (a token issued for part of the namespace).
	Scopes []Scope
}

// Root is the identity of the server's own work and of in-process tools:
// an admin with no scope limits.
var Root = &Identity{User: "root", Admin: true, Method: MethodInternal}

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the identity ctx carries, or nil.
func From(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}

// InGroup reports whether gid is the identity's primary or a supplementary
// group.
func (id *Identity) InGroup(gid uint32) bool {
	return id.GID == gid || slices.Contains(id.Groups, gid)
}

// Permission bits, as in a mode's rwx triplets.
const (
	Read  uint32 = 4
	Write uint32 = 2
	Exec  uint32 = 1 // search, on a directory
)

// May reports whether id has every bit of want on an entry with the given
// mode and owner: the owner's triplet if id owns it, else the group's if id
// is in its group, else the others' (POSIX: the first class that matches
// decides, even when it grants less). Admins may do anything.
func (id *Identity) May(mode, uid, gid uint32, want uint32) bool {
	if id.Admin {
		return true
	}
	var bits uint32
	switch {
	case id.UID == uid:
		bits = mode >> 6 & 7
	case id.InGroup(gid):
		bits = mode >> 3 & 7
	default:
		bits = mode & 7
	}
	return bits&want == want
}

// WantName names a permission request for messages: "write", "read and
// search".
func WantName(want uint32) string {
	var parts []string
	if want&Read != 0 {
		parts = append(parts, "read")
	}
	if want&Write != 0 {
		parts = append(parts, "write")
	}
	if want&Exec != 0 {
		parts = append(parts, "search")
	}
	return strings.Join(parts, " and ")
}

// Scope operations, as the WLCG token profile names them
// (storage.read:/path and so on).
const (
	ScopeRead   = "read"   // read data, list and stat
	ScopeCreate = "create" // create new files and directories, never replace
	ScopeModify = "modify" // replace, remove, rename, change attributes (implies create)
	ScopeStage  = "stage"  // recall files from tape
)

// Scope grants one operation on a path and everything below it.
type Scope struct {
	Op   string `json:"op"`
	Path string `json:"path"`
}

func (s Scope) String() string { return "storage." + s.Op + ":" + s.Path }

// ParseScope reads "storage.read:/path" (the "storage." prefix and the
// path may be left out: "read" means read on the whole namespace).
func ParseScope(s string) (Scope, error) {
	op, p, ok := strings.Cut(strings.TrimPrefix(s, "storage."), ":")
	if !ok || p == "" {
		p = "/"
	}
	switch op {
	case ScopeRead, ScopeCreate, ScopeModify, ScopeStage:
	default:
		return Scope{}, fmt.Errorf("scope %q: want storage.{read,create,modify,stage}:/path", s)
	}
	if !strings.HasPrefix(p, "/") {
		return Scope{}, fmt.Errorf("scope %q: the path must be absolute", s)
	}
	return Scope{Op: op, Path: cleanPrefix(p)}, nil
}

func cleanPrefix(p string) string {
	if q := strings.TrimRight(p, "/"); q != "" {
		return q
	}
	return "/"
}

// Allows reports whether id's scopes permit op on path (an absolute,
// clean path). An identity without scopes is limited by POSIX
// permissions alone.
func (id *Identity) Allows(op, path string) bool {
	if id.Scopes == nil {
		return true
	}
	for _, s := range id.Scopes {
		if (s.Op == op || s.Op == ScopeModify && op == ScopeCreate) && Under(path, s.Path) {
			return true
		}
	}
	return false
}

// Under reports whether path is base or below it, component-wise
// ("/proj2" is not under "/proj").
func Under(path, base string) bool {
	if base == "/" {
		return true
	}
	return path == base || strings.HasPrefix(path, base) && path[len(base)] == '/'
}

// names caches uid → user name lookups (the host's user database; a
// network directory behind NSS can be slow).
var names sync.Map

// NameOf returns the user name of uid on this host, or "uid:N".
func NameOf(uid uint32) string {
	if v, ok := names.Load(uid); ok {
		return v.(string)
	}
	name := "uid:" + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		name = u.Username
	}
	names.Store(uid, name)
	return name
}

// LookupUser returns the uid, primary gid and supplementary groups of a
// user of this host.
func LookupUser(name string) (uid, gid uint32, groups []uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("no user %q on this host: %w", name, err)
	}
	uid, err1 := parseID(u.Uid)
	gid, err2 := parseID(u.Gid)
	if err1 != nil || err2 != nil {
		return 0, 0, nil, fmt.Errorf("user %q: ids %s/%s are not numbers", name, u.Uid, u.Gid)
	}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := parseID(g); err == nil && n != gid {
			groups = append(groups, n)
		}
	}
	return uid, gid, groups, nil
}

// LookupGroup returns the gid of a group of this host, given by name or
// number.
func LookupGroup(name string) (uint32, error) {
	if n, err := parseID(name); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("no group %q on this host", name)
	}
	return parseID(g.Gid)
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}
