package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/strata-storage/strata/client"
)

// TestConcat: files of one stripe joined by the catalog read back as
// their concatenation, through Get (21 stripes: read a window at a
// time) and ranges across their seams; the sources are gone. Files that
// cannot be joined change nothing, and a caller that may not read a
// source may not join it.
func TestConcat(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	const unit = 100_000
	var all []byte
	var parts []string
	for i := 0; i < 21; i++ {
		n := unit
		if i == 20 {
			n = 12_345
		}
		b := randBytes(uint64(100+i), n)
		p := fmt.Sprintf("/up/%05d", i+1)
		if _, err := c.Mkdir(ctx, "/up", true, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, p, bytes.NewReader(b), int64(n), client.PutOptions{Stripes: 1}); err != nil {
			t.Fatal(err)
		}
		all, parts = append(all, b...), append(parts, p)
	}
	// Refused: a part of another size than the first, a striped file.
	if _, err := c.Concat(ctx, "/obj", []string{parts[20], parts[0]}, "", client.PutOptions{}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a short part first: %v", err)
	}
	striped := randBytes(1, 4*unit)
	if _, err := c.Put(ctx, "/striped", bytes.NewReader(striped), int64(len(striped)), client.PutOptions{Stripes: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Concat(ctx, "/obj", []string{"/striped"}, "", client.PutOptions{}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a striped source: %v", err)
	}
	// Another user may not join files only root may read.
	other := client.OnBehalfOf(ctx, 4321, 4321, nil)
	if _, err := c.Concat(other, "/obj", parts, "", client.PutOptions{}); !errors.Is(err, client.ErrDenied) {
		t.Fatalf("another user: %v", err)
	}
	fi, err := c.Concat(ctx, "/obj", parts, "", client.PutOptions{Xattrs: map[string][]byte{"user.k": []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != int64(len(all)) || fi.Layout == nil || fi.Layout.StripeWidth != 21 || fi.Layout.StripeUnit != unit {
		t.Fatalf("joined: %+v %+v", fi, fi.Layout)
	}
	if ents, err := c.List(ctx, "/up"); err != nil || len(ents) != 0 {
		t.Fatalf("sources left: %v %v", ents, err)
	}
	var out bytes.Buffer
	if _, err := c.Get(ctx, "/obj", &out, client.GetOptions{}); err != nil || !bytes.Equal(out.Bytes(), all) {
		t.Fatalf("get: %v (%d of %d bytes, equal %v)", err, out.Len(), len(all), bytes.Equal(out.Bytes(), all))
	}
	rd, err := c.Open(ctx, "/obj", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{unit - 10, 30}, {0, len(all)}, {20*unit - 1, 12_346}, {5*unit + 7, 3 * unit}} {
		b := make([]byte, r[1])
		if n, err := rd.ReadAt(b, int64(r[0])); (err != nil && err != io.EOF) || n != r[1] || !bytes.Equal(b, all[r[0]:r[0]+r[1]]) {
			t.Fatalf("ReadAt(%d, %d): %d %v", r[0], r[1], n, err)
		}
	}
	if x, err := c.Xattrs(ctx, "/obj"); err != nil || string(x["user.k"]) != "v" {
		t.Fatalf("xattrs %v %v", x, err)
	}
}
