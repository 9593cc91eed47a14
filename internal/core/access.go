package core

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
	"github.com/strata-storage/strata/internal/catalog"
)

// Access control. Every exported operation of the core takes its caller
// from the context (the HTTP layer put it there: see Identify) and checks,
// as a POSIX file system does:
//
//   - search (x) on every directory of every path it resolves;
//   - read on a file to open or stage it, read and search on a directory
//     to list it;
//   - write and search on the parent to create, remove or rename an entry
//     (and, where the parent has the sticky bit, ownership of the entry or
//     the parent);
//   - ownership to change mode, times or class of service; admin to give
//     a file away (chown);
//   - admin for the tape and tier operations that act on others' files or
//     on the whole system (forced migrate and purge, repack, classes of
//     service, the library, tokens).
//
// A token's scopes narrow this further (auth.Identity.Allows). Internal
// work (the HSM's policies, recalls) runs with no caller and no checks.

// caller is the identity ctx carries. A request that reached an operation
// without one is a bug in the layer above; it is refused, never served as
// anyone.
func caller(ctx context.Context) (*auth.Identity, error) {
	if id := auth.From(ctx); id != nil {
		return id, nil
	}
	return nil, api.Errorf(api.ErrUnauthenticated, "no identity established for this request")
}

// denial is a refused permission: which path, who, what was missing where.
// notOwner marks what only the owner may do (api.ErrNotOwner: EPERM).
type denial struct {
	path, user, want, on string
	notOwner             bool
}

func (d *denial) Error() string {
	if d.on == "" {
		return fmt.Sprintf("permission denied: %s (%s)", d.path, d.want)
	}
	return fmt.Sprintf("permission denied: %s (%s needs %s on %s)", d.path, d.user, d.want, d.on)
}

func (d *denial) Unwrap() error {
	if d.notOwner {
		return api.ErrNotOwner
	}
	return api.ErrDenied
}

// searchable checks search permission on directory e at comps.
func searchable(who *auth.Identity, e dentry, comps []string) error {
	if who == nil || who.May(e.mode, e.uid, e.gid, auth.Exec) {
		return nil
	}
	p := joinPath(comps)
	return &denial{path: p, user: who.User, want: "search", on: p}
}

// may checks want on an entry (mode, owner) at path, naming target in the
// message.
func may(who *auth.Identity, in catalog.Inode, path, target string, want uint32) error {
	if who == nil || who.May(in.Mode, in.UID, in.GID, want) {
		return nil
	}
	return &denial{path: target, user: who.User, want: auth.WantName(want), on: path}
}

// mayDir checks want on a directory known by its dentry.
func mayDir(who *auth.Identity, d dentry, path, target string, want uint32) error {
	return may(who, catalog.Inode{Mode: d.mode, UID: d.uid, GID: d.gid}, path, target, want)
}

// owns reports whether who owns in (or is an admin).
func owns(who *auth.Identity, in catalog.Inode) bool {
	return who == nil || who.Admin || who.UID == in.UID
}

// sticky checks the restricted-deletion rule: in a directory with the
// sticky bit, only the owner of an entry, the owner of the directory or an
// admin may remove or rename the entry (/tmp's rule).
func sticky(who *auth.Identity, dir dentry, dirPath string, in catalog.Inode, target string) error {
	if who == nil || dir.mode&0o1000 == 0 || who.Admin || who.UID == in.UID || who.UID == dir.uid {
		return nil
	}
	return &denial{path: target, user: who.User, want: "ownership (sticky directory)", on: dirPath}
}

// scoped checks a token's scopes for op on path (as sent: it is read in
// its clean form; a path that does not parse fails later, on its own).
func scoped(who *auth.Identity, op, path string) error {
	if who == nil || who.Scopes == nil {
		return nil
	}
	if comps, err := catalog.SplitPath(path); err == nil {
		path = joinPath(comps)
	}
	if who.Allows(op, path) {
		return nil
	}
	return &denial{path: path, want: fmt.Sprintf("the token of %s has no storage.%s scope for it", who.User, op)}
}

// admin refuses callers who are not admins.
func admin(ctx context.Context, what string) (*auth.Identity, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if !who.Admin {
		return nil, fmt.Errorf("%s: %w (%s is not an admin)", what, api.ErrDenied, who.User)
	}
	return who, nil
}

// Limits on what a request may name. A path is at most MaxPathLen bytes
// and MaxDepth components (PATH_MAX and a depth no real tree reaches:
// deeper chains only make every walk expensive).
const (
	MaxPathLen = 4096
	MaxDepth   = 256
)

// splitPath validates a path a caller sent and returns its components:
// absolute, within the limits, every name valid UTF-8 without control
// characters (see validName).
func splitPath(p string) ([]string, error) {
	if len(p) > MaxPathLen {
		return nil, api.Errorf(api.ErrNameTooLong, "path %.40q... is longer than %d bytes", p, MaxPathLen)
	}
	comps, err := catalog.SplitPath(p)
	if err != nil {
		return nil, err
	}
	if len(comps) > MaxDepth {
		return nil, api.Errorf(api.ErrInvalid, "path %.40q... is deeper than %d directories", p, MaxDepth)
	}
	for _, c := range comps {
		if err := validName(c); err != nil {
			return nil, err
		}
	}
	return comps, nil
}

// validName refuses names that are not valid UTF-8 or hold control
// characters (C0, DEL, C1): such a name cannot be typed, and printed raw
// it can rewrite a terminal (an escape sequence in a name `ls` shows).
// Refusing them at the door means no listing, log or message has to
// escape a name. Existing entries keep their names; they are escaped
// (Go %q) where the CLI shows them.
func validName(c string) error {
	if !utf8.ValidString(c) {
		return api.Errorf(api.ErrInvalid, "name %q is not valid UTF-8", c)
	}
	if i := strings.IndexFunc(c, unicode.IsControl); i >= 0 {
		return api.Errorf(api.ErrInvalid, "name %q contains a control character", c)
	}
	return nil
}

// checkMode refuses mode bits outside 07777 (type bits, garbage).
func checkMode(m uint32, what string) error {
	if m&^0o7777 != 0 {
		return api.Errorf(api.ErrInvalid, "%s: mode %#o has bits outside 07777", what, m)
	}
	return nil
}
