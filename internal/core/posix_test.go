package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/auth"
)

// twoUsers is a core with a directory /d open to all, the contexts of
// root, alice (2001, group 3000) and bob (2002, group 3001), and mk, which
// makes an empty file of alice's.
func twoUsers(t *testing.T) (c *Core, root, alice, bob context.Context, mk func(p string, mode uint32) api.FileInfo) {
	root = auth.With(context.Background(), auth.Root)
	c, _ = newTestCore(t, nil, api.DeviceInfo{ID: "d0", Pool: "disk", Capacity: 1 << 30, Free: 1 << 30})
	alice = auth.With(context.Background(), &auth.Identity{User: "alice", UID: 2001, GID: 3000, Method: auth.MethodToken})
	bob = auth.With(context.Background(), &auth.Identity{User: "bob", UID: 2002, GID: 3001, Method: auth.MethodToken})
	if _, err := c.Mkdir(root, api.MkdirRequest{Path: "/d", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	mk = func(p string, mode uint32) api.FileInfo {
		t.Helper()
		r, err := c.Create(alice, api.CreateRequest{Path: p, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return *r.File
	}
	return c, root, alice, bob, mk
}

// TestOwnerRules: what only an owner may do is refused to others with
// ErrNotOwner (EPERM), which is also ErrDenied; a missing permission bit
// is ErrDenied alone (EACCES). Times set to "now" need write permission,
// not ownership; set-group-ID needs membership of the group.
func TestOwnerRules(t *testing.T) {
	c, root, alice, bob, mk := twoUsers(t)
	mk("/d/shared", 0o666)
	mk("/d/private", 0o644)
	u32 := func(v uint32) *uint32 { return &v }
	past := time.Unix(1e9, 0)
	for _, tc := range []struct {
		name string
		who  context.Context
		r    api.SetAttrRequest
		want error // nil, api.ErrNotOwner or api.ErrDenied (a missing bit)
	}{
		{"owner chmod", alice, api.SetAttrRequest{Path: "/d/shared", Mode: u32(0o666)}, nil},
		{"other chmod", bob, api.SetAttrRequest{Path: "/d/shared", Mode: u32(0o777)}, api.ErrNotOwner},
		{"other chown to self", bob, api.SetAttrRequest{Path: "/d/shared", UID: u32(2002)}, api.ErrNotOwner},
		{"owner chgrp to a group not hers", alice, api.SetAttrRequest{Path: "/d/shared", GID: u32(3001)}, api.ErrNotOwner},
		{"other explicit times", bob, api.SetAttrRequest{Path: "/d/shared", Mtime: &past}, api.ErrNotOwner},
		{"other touch, may write", bob, api.SetAttrRequest{Path: "/d/shared", Now: true}, nil},
		{"other touch, may not write", bob, api.SetAttrRequest{Path: "/d/private", Now: true}, api.ErrDenied},
	} {
		_, err := c.SetAttr(tc.who, tc.r)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.want == api.ErrDenied && errors.Is(err, api.ErrNotOwner):
			t.Errorf("%s: %v is EPERM, want EACCES", tc.name, err)
		case tc.want == api.ErrNotOwner && !errors.Is(err, api.ErrDenied):
			t.Errorf("%s: not also ErrDenied", tc.name)
		}
	}
	// chmod g+s by an owner outside the file's group: the bit is dropped.
	if _, err := c.SetAttr(root, api.SetAttrRequest{Path: "/d/shared", GID: u32(4000)}); err != nil {
		t.Fatal(err)
	}
	fi, err := c.SetAttr(alice, api.SetAttrRequest{Path: "/d/shared", Mode: u32(0o2755)})
	if err != nil || fi.Mode != 0o755 {
		t.Fatalf("chmod 2755 outside the group: mode %o, %v", fi.Mode, err)
	}
}

// TestRewrite: writing into an existing file (what the POSIX front ends
// store) needs write permission on the file, not its directory, and keeps
// its inode, owner, group, mode and class; a writer other than the owner
// clears the set-ID bits. Replacing it as an entry (Overwrite) still needs
// the directory.
func TestRewrite(t *testing.T) {
	c, root, _, bob, mk := twoUsers(t)
	shared, suid, private := mk("/d/shared", 0o666), mk("/d/suid", 0o4777), mk("/d/private", 0o644)
	if _, err := c.SetAttr(root, api.SetAttrRequest{Path: "/d", Mode: func() *uint32 { m := uint32(0o755); return &m }()}); err != nil {
		t.Fatal(err)
	}
	// bob may not write /d now, but may write /d/shared.
	if _, err := c.Create(bob, api.CreateRequest{Path: "/d/shared", Overwrite: true}); !errors.Is(err, api.ErrDenied) {
		t.Fatalf("replacing an entry of a directory bob may not write: %v", err)
	}
	for _, tc := range []struct {
		before   api.FileInfo
		wantMode uint32
		ok       bool
	}{
		{shared, 0o666, true},
		{suid, 0o777, true},
		{private, 0, false},
	} {
		r, err := c.Create(bob, api.CreateRequest{Path: tc.before.Path, Overwrite: true, Rewrite: true, Mode: 0o600})
		if !tc.ok {
			if !errors.Is(err, api.ErrDenied) {
				t.Errorf("rewrite of %s: %v, want denied", tc.before.Path, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("rewrite of %s: %v", tc.before.Path, err)
			continue
		}
		f := r.File
		if f.ID != tc.before.ID || f.UID != 2001 || f.GID != tc.before.GID || f.Mode != tc.wantMode {
			t.Errorf("rewrite of %s: %+v, want inode %d, uid 2001, gid %d, mode %o", tc.before.Path, f, tc.before.ID, tc.before.GID, tc.wantMode)
		}
	}
	// A file that is not there is created, which needs the directory.
	if _, err := c.Create(bob, api.CreateRequest{Path: "/d/new", Rewrite: true}); !errors.Is(err, api.ErrDenied) {
		t.Fatalf("rewrite creating a file in a directory bob may not write: %v", err)
	}
}
