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

// Limits on extended attributes, Linux's: XATTR_NAME_MAX and
// XATTR_SIZE_MAX.
const (
	MaxXattrName  = 255
	MaxXattrValue = 64 << 10
)

// Xattrs returns an entry's extended attributes; reading them needs read
// permission on it, as reading its data does.
func (c *Core) Xattrs(ctx context.Context, p string) (api.XattrList, error) {
	_, in, path, err := c.xattrEntry(ctx, p, auth.ScopeRead, auth.Read)
	if err != nil {
		return api.XattrList{}, err
	}
	attrs, err := c.store.Xattrs(ctx, in.ID)
	if err != nil {
		return api.XattrList{}, fmt.Errorf("xattrs %s: %w", path, err)
	}
	return api.XattrList{Attrs: attrs}, nil
}

// SetXattr sets one user.* attribute; it needs write permission on the
// entry (as Linux asks for user attributes).
func (c *Core) SetXattr(ctx context.Context, r api.XattrRequest) (api.XattrList, error) {
	if err := validXattr(r.Name); err != nil {
		return api.XattrList{}, err
	}
	if len(r.Value) > MaxXattrValue {
		return api.XattrList{}, api.Errorf(api.ErrInvalid, "attribute %s: a value of %d bytes; at most %d", r.Name, len(r.Value), MaxXattrValue)
	}
	how := catalog.XattrAny
	switch r.How {
	case "":
	case "create":
		how = catalog.XattrCreate
	case "replace":
		how = catalog.XattrReplace
	default:
		return api.XattrList{}, api.Errorf(api.ErrInvalid, "attribute %s: how %q (want create, replace or nothing)", r.Name, r.How)
	}
	_, in, path, err := c.xattrEntry(ctx, r.Path, auth.ScopeModify, auth.Write)
	if err != nil {
		return api.XattrList{}, err
	}
	if err := c.store.SetXattr(ctx, in.ID, r.Name, r.Value, how); err != nil {
		return api.XattrList{}, fmt.Errorf("setxattr %s: %w", path, err)
	}
	return api.XattrList{}, nil
}

// RemoveXattr removes one user.* attribute (write permission, as set).
func (c *Core) RemoveXattr(ctx context.Context, r api.XattrRequest) (api.XattrList, error) {
	if err := validXattr(r.Name); err != nil {
		return api.XattrList{}, err
	}
	_, in, path, err := c.xattrEntry(ctx, r.Path, auth.ScopeModify, auth.Write)
	if err != nil {
		return api.XattrList{}, err
	}
	if err := c.store.RemoveXattr(ctx, in.ID, r.Name); err != nil {
		return api.XattrList{}, fmt.Errorf("removexattr %s: %w", path, err)
	}
	return api.XattrList{}, nil
}

// xattrEntry resolves p for an attribute operation the caller must be
// scoped and permitted for.
func (c *Core) xattrEntry(ctx context.Context, p, scope string, want uint32) (*auth.Identity, catalog.Inode, string, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, catalog.Inode{}, "", err
	}
	if err := scoped(who, scope, p); err != nil {
		return nil, catalog.Inode{}, "", err
	}
	comps, in, err := c.statPath(ctx, who, p)
	if err != nil {
		return nil, catalog.Inode{}, "", fmt.Errorf("xattr: %w", err)
	}
	path := joinPath(comps)
	if err := may(who, in, path, path, want); err != nil {
		return nil, catalog.Inode{}, "", err
	}
	return who, in, path, nil
}

// validXattr admits user.* names (the namespace unprivileged programs
// use; the others belong to the kernel and to security modules) of
// printable UTF-8 within XATTR_NAME_MAX.
// MaxXattrsPerCommit bounds the attributes one create or commit brings.
const MaxXattrsPerCommit = 256

// validXattrs checks the attributes a create or commit brings.
func validXattrs(attrs map[string][]byte, op string) error {
	if len(attrs) > MaxXattrsPerCommit {
		return api.Errorf(api.ErrInvalid, "%s: %d attributes; at most %d", op, len(attrs), MaxXattrsPerCommit)
	}
	for name, v := range attrs {
		if err := validXattr(name); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if len(v) > MaxXattrValue {
			return api.Errorf(api.ErrInvalid, "%s: attribute %s: a value of %d bytes; at most %d", op, name, len(v), MaxXattrValue)
		}
	}
	return nil
}

func validXattr(name string) error {
	switch {
	case !strings.HasPrefix(name, "user.") || len(name) == len("user."):
		return api.Errorf(api.ErrInvalid, "attribute %q: only user.* attributes are stored", name)
	case len(name) > MaxXattrName:
		return api.Errorf(api.ErrNameTooLong, "attribute %.40q...: longer than %d bytes", name, MaxXattrName)
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return api.Errorf(api.ErrInvalid, "attribute %q: not printable UTF-8", name)
	}
	return nil
}
