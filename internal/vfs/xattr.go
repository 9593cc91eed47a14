package vfs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// Extended attributes. user.* attributes are stored in the catalog with
// the entry (S3 user metadata uses the same store). Under user.strata.
// Strata shows what it knows of a file, computed, never stored:
//
//	user.strata.residency  disk, tape, disk+tape or staging
//	user.strata.cos        the class of service (set it to change the class)
//	user.strata.copies     how many copies exist (the disk copy and each tape copy)
//	user.strata.fixity     the whole-file digest recorded at put (blake3:…)
//	user.strata.recall     a queued or running recall: its state, place and ETA
//	user.strata.stage      write-only: setting it asks for a recall without reading
//
// Other namespaces (security.*, system.* — ACLs —, trusted.*) are not
// supported: reads find nothing (ENODATA), writes get ENOTSUP, which
// cp -a, rsync -X and tar --xattrs take in their stride.
const strataNS = "user.strata."

// setxattr(2) flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

// Getxattr returns one attribute of p.
func (fs *FS) Getxattr(ctx context.Context, p, name string) ([]byte, error) {
	if v, ok := strings.CutPrefix(name, strataNS); ok {
		return fs.strataAttr(ctx, p, v)
	}
	if !strings.HasPrefix(name, "user.") {
		return nil, syscall.ENODATA
	}
	if h := fs.writer(p); h != nil {
		if v, ok, stored := h.pendingXattr(name); !stored {
			if !ok {
				return nil, syscall.ENODATA
			}
			return v, nil
		}
	}
	attrs, err := fs.c.Xattrs(ctx, p)
	if err != nil {
		return nil, err
	}
	v, ok := attrs[name]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// Listxattr returns the names of p's attributes, Strata's own included.
func (fs *FS) Listxattr(ctx context.Context, p string) ([]string, error) {
	var names []string
	if h := fs.writer(p); h != nil {
		if pending, stored := h.pendingXattrs(); !stored {
			return pending, nil
		}
	}
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	attrs, err := fs.c.Xattrs(ctx, p)
	if err != nil {
		return nil, err
	}
	for n := range attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, v := range []string{"residency", "cos", "copies", "fixity"} {
		if _, err := strataValue(fi, v, nil); err == nil {
			names = append(names, strataNS+v)
		}
	}
	if fi.Residency == api.ResidencyStaging {
		names = append(names, strataNS+"recall")
	}
	return names, nil
}

// Setxattr sets one attribute of p; flags are setxattr(2)'s.
func (fs *FS) Setxattr(ctx context.Context, p, name string, value []byte, flags uint32) error {
	if v, ok := strings.CutPrefix(name, strataNS); ok {
		switch v {
		case "cos":
			k := string(value)
			_, err := fs.c.SetAttr(ctx, client.SetAttr{Path: p, COS: &k})
			return err
		case "stage":
			_, err := fs.c.Stage(ctx, []string{p}, 0)
			return err
		}
		return syscall.EPERM // computed, not set
	}
	if !strings.HasPrefix(name, "user.") {
		return syscall.ENOTSUP
	}
	how := ""
	switch {
	case flags&xattrCreate != 0:
		how = "create"
	case flags&xattrReplace != 0:
		how = "replace"
	}
	if h := fs.writer(p); h != nil {
		if kept, err := h.setPendingXattr(name, value, how); kept {
			return err
		}
	}
	return fs.c.SetXattr(ctx, p, name, value, how)
}

// Removexattr removes one attribute of p.
func (fs *FS) Removexattr(ctx context.Context, p, name string) error {
	if strings.HasPrefix(name, strataNS) {
		return syscall.EPERM
	}
	if !strings.HasPrefix(name, "user.") {
		return syscall.ENODATA
	}
	if h := fs.writer(p); h != nil {
		if kept, err := h.setPendingXattr(name, nil, "remove"); kept {
			return err
		}
	}
	return fs.c.RemoveXattr(ctx, p, name)
}

func (fs *FS) strataAttr(ctx context.Context, p, v string) ([]byte, error) {
	fi, err := fs.c.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	var st *client.StageStatus
	if v == "recall" && fi.Residency == api.ResidencyStaging {
		if st, err = fs.c.StageStatus(ctx, p); err != nil {
			return nil, err
		}
	}
	s, err := strataValue(fi, v, st)
	return []byte(s), err
}

// strataValue is the computed attribute v of fi (st: its recall).
func strataValue(fi *client.FileInfo, v string, st *client.StageStatus) (string, error) {
	isFile := fi.Type == client.TypeFile
	switch {
	case v == "cos" && fi.COS != "":
		return fi.COS, nil
	case v == "residency" && isFile && fi.Residency != "":
		return fi.Residency, nil
	case v == "copies" && isFile && fi.Layout != nil:
		return strconv.Itoa(copies(fi.Layout)), nil
	case v == "fixity" && fi.Fixity != "":
		return fi.Fixity, nil
	case v == "recall" && st != nil:
		s := st.State
		if st.Volume != "" {
			s += " on " + st.Volume
		}
		switch {
		case st.Waiting != "":
			s += fmt.Sprintf(", %d ahead, waiting: %s", st.Position, st.Waiting)
		case st.State == api.StageQueued:
			s += fmt.Sprintf(", %d ahead, about %.0f s", st.Position, st.ETA)
		}
		return s, nil
	}
	return "", syscall.ENODATA
}

// copies counts a layout's distinct copies, on disk and on tape.
func copies(l *client.Layout) int {
	seen := map[int]bool{}
	for _, s := range l.Segments {
		seen[s.Copy] = true
	}
	for _, t := range l.Tapes {
		seen[t.Copy] = true
	}
	return len(seen)
}
