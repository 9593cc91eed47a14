package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/config"
	"github.com/strata-storage/strata/internal/server"
	"github.com/strata-storage/strata/internal/testutil"
)

var ctx = context.Background()

func newClient(t *testing.T, edit func(*config.Config)) (*client.Client, string) {
	s := testutil.Start(t, edit)
	return testutil.Client(t, s), s.Cfg.DataDir
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func roundTrip(t *testing.T, c *client.Client, path string, data []byte, o client.PutOptions) *client.FileInfo {
	t.Helper()
	fi, err := c.Put(ctx, path, bytes.NewReader(data), int64(len(data)), o)
	if err != nil {
		t.Fatalf("put %s (%d bytes): %v", path, len(data), err)
	}
	var out bytes.Buffer
	if _, err := c.Get(ctx, path, &out, client.GetOptions{VerifyFixity: true}); err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("%s: %d bytes back differ from %d put", path, out.Len(), len(data))
	}
	return fi
}

func TestRoundTripSizes(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	const unit = 64 << 10
	sizes := []int{0, 1, unit - 1, unit, unit + 1, 4*unit - 1, 4 * unit, 4*unit + 1, 37*unit + 12345, 3<<20 + 7}
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 6; i++ {
		sizes = append(sizes, r.IntN(2<<20))
	}
	for i, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			fi := roundTrip(t, c, fmt.Sprintf("/f%d", i), randBytes(uint64(i), n), client.PutOptions{})
			if fi.Size != int64(n) {
				t.Fatalf("size %d", fi.Size)
			}
			st, err := c.Stat(ctx, fmt.Sprintf("/f%d", i))
			if err != nil {
				t.Fatal(err)
			}
			wantStripes := min(4, (n+unit-1)/unit)
			if n == 0 {
				if st.Layout != nil {
					t.Fatal("empty file has a layout")
				}
				return
			}
			if st.Layout.StripeWidth != wantStripes || len(st.Layout.Segments) != wantStripes || !strings.HasPrefix(st.Fixity, "blake3:") {
				t.Fatalf("stat: %+v", st.Layout)
			}
			var sum int64
			for _, s := range st.Layout.Segments {
				sum += s.Length
			}
			if sum != int64(n) {
				t.Fatalf("segments hold %d bytes", sum)
			}
		})
	}
}

func TestStripeOverride(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, func(c *config.Config) {
		for i := 4; i < 8; i++ {
			c.Devices = append(c.Devices, config.Device{ID: fmt.Sprintf("disk%d", i)})
		}
	})
	data := randBytes(3, 40*64<<10)
	for _, w := range []int{1, 2, 8} {
		fi := roundTrip(t, c, fmt.Sprintf("/w%d", w), data, client.PutOptions{Stripes: w})
		if fi.Layout.StripeWidth != w {
			t.Fatalf("asked %d stripes, got %d", w, fi.Layout.StripeWidth)
		}
		devs := map[string]bool{}
		for _, s := range fi.Layout.Segments {
			devs[s.Device] = true
		}
		if len(devs) != w {
			t.Fatalf("%d stripes on %d devices", w, len(devs))
		}
	}
	if _, err := c.Put(ctx, "/bad", bytes.NewReader(data), int64(len(data)), client.PutOptions{COS: "nope"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("unknown class: %v", err)
	}
}

func TestConcurrentPutGet(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	if _, err := c.Mkdir(ctx, "/conc", false, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				seed := uint64(w*100 + i)
				data := randBytes(seed, int(seed*7919)%(600<<10)+1)
				p := fmt.Sprintf("/conc/w%d-%d", w, i)
				if _, err := c.Put(ctx, p, bytes.NewReader(data), int64(len(data)), client.PutOptions{}); err != nil {
					errs <- err
					return
				}
				var out bytes.Buffer
				if _, err := c.Get(ctx, p, &out, client.GetOptions{}); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(out.Bytes(), data) {
					errs <- fmt.Errorf("%s: data differs", p)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l, err := c.List(ctx, "/conc")
	if err != nil || len(l) != 48 {
		t.Fatalf("list: %d entries, %v", len(l), err)
	}
}

func TestOverwriteIsAtomic(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	old := bytes.Repeat([]byte("old."), 100000)
	roundTrip(t, c, "/f", old, client.PutOptions{})
	neu := bytes.Repeat([]byte("NEW!"), 150000)
	if _, err := c.Put(ctx, "/f", bytes.NewReader(neu), int64(len(neu)), client.PutOptions{}); !errors.Is(err, client.ErrExist) {
		t.Fatalf("overwrite without flag: %v", err)
	}
	// Readers during the overwrite see the old or the new file whole.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var out bytes.Buffer
			if _, err := c.Get(ctx, "/f", &out, client.GetOptions{}); err != nil {
				// The old version's objects outlive the overwrite for
				// the reclaim grace, so a reader that has its layout
				// reads it whole.
				bad = fmt.Errorf("reader: %w", err)
				return
			}
			if !bytes.Equal(out.Bytes(), old) && !bytes.Equal(out.Bytes(), neu) {
				bad = fmt.Errorf("reader saw a mix of %d bytes", out.Len())
				return
			}
		}
	}()
	for i := 0; i < 5; i++ {
		data := neu
		if i%2 == 1 {
			data = old
		}
		if _, err := c.Put(ctx, "/f", bytes.NewReader(data), int64(len(data)), client.PutOptions{Overwrite: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	roundTrip(t, c, "/f", neu, client.PutOptions{Overwrite: true})
}

func TestNamespaceErrors(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	c.Mkdir(ctx, "/d", false, 0)
	c.Put(ctx, "/d/f", bytes.NewReader([]byte("x")), 1, client.PutOptions{})
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"stat missing", func() error { _, err := c.Stat(ctx, "/nope"); return err }(), client.ErrNotFound},
		{"mkdir exists", func() error { _, err := c.Mkdir(ctx, "/d", false, 0); return err }(), client.ErrExist},
		{"mkdir under file", func() error { _, err := c.Mkdir(ctx, "/d/f/x", true, 0); return err }(), client.ErrNotDir},
		{"put into missing dir", func() error {
			_, err := c.Put(ctx, "/missing/f", bytes.NewReader([]byte("x")), 1, client.PutOptions{})
			return err
		}(), client.ErrNotFound},
		{"put over dir", func() error {
			_, err := c.Put(ctx, "/d", bytes.NewReader([]byte("x")), 1, client.PutOptions{Overwrite: true})
			return err
		}(), client.ErrIsDir},
		{"relative path", func() error { _, err := c.Stat(ctx, "d/f"); return err }(), client.ErrInvalid},
		{"dotdot", func() error { _, err := c.Stat(ctx, "/d/../d"); return err }(), client.ErrInvalid},
		{"get dir", func() error { _, err := c.Get(ctx, "/d", &bytes.Buffer{}, client.GetOptions{}); return err }(), client.ErrIsDir},
		{"rm non-empty", c.Remove(ctx, "/d", false), client.ErrNotEmpty},
		{"mv to existing", func() error { c.Mkdir(ctx, "/e", false, 0); return c.Rename(ctx, "/e", "/d", false) }(), client.ErrExist},
		{"mv into self", c.Rename(ctx, "/d", "/d/sub", false), client.ErrInvalid},
		{"rm root", c.Remove(ctx, "/", true), client.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, tc.err)
			}
		})
	}
	if err := c.Rename(ctx, "/d/f", "/e/g", false); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.Get(ctx, "/e/g", &out, client.GetOptions{}); err != nil || out.String() != "x" {
		t.Fatalf("after mv: %q %v", out.String(), err)
	}
	if err := c.Remove(ctx, "/e", true); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	c, err := client.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/"); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("want unreachable, got %v", err)
	}
	if _, err := client.New("http://"); err == nil {
		t.Fatal("bad address accepted")
	}
}

// objects lists the segment objects stored under a data directory.
func objects(t *testing.T, dataDir string) []string {
	var out []string
	m, _ := filepath.Glob(filepath.Join(dataDir, "devices", "*", "objects", "*", "*"))
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Small files (one stripe each) spread over all devices.
func TestPlacementSpreads(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	count := map[string]int{}
	for i := 0; i < 40; i++ {
		fi, err := c.Put(ctx, fmt.Sprintf("/s%d", i), bytes.NewReader([]byte("small")), 5, client.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count[fi.Layout.Segments[0].Device]++
	}
	if len(count) != 4 {
		t.Fatalf("40 files landed on %d of 4 devices: %v", len(count), count)
	}
	for d, n := range count {
		if n < 5 {
			t.Fatalf("device %s got %d of 40 files: %v", d, n, count)
		}
	}
}

// Reading a file records the access (relatime-style), which purge policies
// rely on.
func TestReadRecordsAccessTime(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	fi := roundTrip(t, c, "/a", []byte("accessed"), client.PutOptions{})
	waitFor(t, func() bool {
		st, err := c.Stat(ctx, "/a")
		return err == nil && st.Atime.After(fi.Mtime)
	}, "atime to move past mtime after a read")
}

// A put records the whole-file hash it was asked for (SHA-256 unless told),
// through Put and through a streamed Upload alike, and a get verifies it
// with the algorithm the record names. An unknown algorithm fails before
// anything is created.
func TestFixityAlgorithms(t *testing.T) {
	t.Parallel()
	c, _ := newClient(t, nil)
	data := randBytes(7, 3<<20+5)
	for _, tc := range []struct{ alg, prefix string }{{"", "blake3:"}, {client.FixityBLAKE3, "blake3:"}, {client.FixitySHA256, "sha256:"}} {
		p := "/fx-" + tc.alg
		fi := roundTrip(t, c, p, data, client.PutOptions{Fixity: tc.alg})
		if !strings.HasPrefix(fi.Fixity, tc.prefix) {
			t.Errorf("%q: recorded %q", tc.alg, fi.Fixity)
		}
		u, err := c.Create(ctx, p+"-streamed", int64(len(data)), client.PutOptions{Fixity: tc.alg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Write(data); err != nil {
			t.Fatal(err)
		}
		sfi, err := u.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sfi.Fixity != fi.Fixity {
			t.Errorf("%q: streamed upload recorded %q, put %q", tc.alg, sfi.Fixity, fi.Fixity)
		}
	}
	if _, err := c.Put(ctx, "/fx-md5", bytes.NewReader(data), int64(len(data)), client.PutOptions{Fixity: "md5"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("md5: %v, want ErrInvalid", err)
	}
	if _, err := c.Stat(ctx, "/fx-md5"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("after a refused put: %v", err)
	}
}

// TestControlSocket: a client on the core's host moves from TCP to the
// core's Unix socket after its first request, and falls back to TCP
// whenever the socket is off, refused by the caller, or gone.
func TestControlSocket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		off     bool // server without a socket
		tcpOnly bool
		remove  bool // socket file removed after the client learned it
	}{
		{name: "local"},
		{name: "server-off", off: true},
		{name: "tcp-only", tcpOnly: true},
		{name: "socket-gone", remove: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := newClient(t, func(cfg *config.Config) {
				if tc.off {
					cfg.Socket = "off"
				}
			})
			c.TCPOnly(tc.tcpOnly)
			if _, err := c.Mkdir(ctx, "/d", false, 0); err != nil {
				t.Fatal(err)
			}
			sock, _ := filepath.Abs(filepath.Join(dir, "strata.sock"))
			want := sock
			if tc.off || tc.tcpOnly {
				want = ""
			}
			if got := c.ControlSocket(); got != want {
				t.Fatalf("control socket %q, want %q", got, want)
			}
			if tc.remove {
				if err := os.Remove(sock); err != nil {
					t.Fatal(err)
				}
				c.Close() // drop pooled connections: the next one is dialled
				want = ""
			}
			for i := range 3 {
				if _, err := c.Put(ctx, fmt.Sprintf("/d/f%d", i), bytes.NewReader([]byte("x")), 1, client.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.ControlSocket(); got != want {
				t.Fatalf("after requests: control socket %q, want %q", got, want)
			}
			if _, err := c.Stat(ctx, "/d/f2"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A client that learned "no socket" from a core asks again, once the answer
// is old, and finds the socket of the core restarted with one.
func TestControlSocketReprobe(t *testing.T) {
	t.Parallel()
	defer client.SetReprobeAfter(0)()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := testutil.Config(dir)
	cfg.Socket = "off"
	if err := cfg.Complete(); err != nil {
		t.Fatal(err)
	}
	s, err := server.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetToken(testutil.Token(t, s, "root", 0)) // no socket: TCP needs a token
	if _, err := c.Mkdir(ctx, "/d", false, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.ControlSocket(); got != "" {
		t.Fatalf("socket %q from a core without one", got)
	}
	addr := strings.TrimPrefix(s.URL(), "http://")
	s.Close()

	// The same core, same address, now with its socket.
	cfg = testutil.Config(dir)
	cfg.Listen = addr
	if err := cfg.Complete(); err != nil {
		t.Fatal(err)
	}
	s, err = server.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Close() // the pooled connections died with the first core
	if _, err := c.Stat(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs(filepath.Join(dir, "strata.sock"))
	if got := c.ControlSocket(); got != want {
		t.Fatalf("after the restart: socket %q, want %q", got, want)
	}
}

// A directory larger than the server's page lists whole, in name order,
// through as many requests as it takes; the cursor survives names that
// need escaping; a caller's page size and a stop from the callback are
// honoured; a file lists itself.
func TestListPages(t *testing.T) {
	t.Parallel()
	s := testutil.Start(t, func(cfg *config.Config) { cfg.ListPage = 4 })
	c := testutil.Client(t, s)
	if _, err := c.Mkdir(ctx, "/d", false, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"a b", "50%", "new line", "ü", "x&y=z", "+plus", "%2F", "z"}
	for i := 0; i < 13; i++ {
		names = append(names, fmt.Sprintf("f%02d", i))
	}
	for i, n := range names {
		var err error
		if i%4 == 0 {
			_, err = c.Mkdir(ctx, "/d/"+n, false, 0o755)
		} else {
			_, err = c.Put(ctx, "/d/"+n, bytes.NewReader(nil), 0, client.PutOptions{})
		}
		if err != nil {
			t.Fatalf("%q: %v", n, err)
		}
	}
	slices.Sort(names)
	got, err := c.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if n := namesOf(got); !slices.Equal(n, names) {
		t.Fatalf("list of 21 in pages of 4:\n%q\nwant\n%q", n, names)
	}
	for _, limit := range []int{1, 3, 4, 100} {
		var all []client.FileInfo
		var sizes []int
		err := c.ListPages(ctx, "/d", limit, func(page []client.FileInfo) error {
			all = append(all, page...)
			sizes = append(sizes, len(page))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := namesOf(all); !slices.Equal(n, names) {
			t.Fatalf("limit %d: %q", limit, n)
		}
		page := min(limit, 4) // the server's page bounds a caller's
		if want := (len(names) + page - 1) / page; len(sizes) != want || slices.Max(sizes) != page {
			t.Fatalf("limit %d: pages %v", limit, sizes)
		}
	}
	stop := errors.New("enough")
	calls := 0
	if err := c.ListPages(ctx, "/d", 0, func([]client.FileInfo) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("stopped listing: %v after %d pages", err, calls)
	}
	one, err := c.List(ctx, "/d/z")
	if err != nil || len(one) != 1 || one[0].Path != "/d/z" {
		t.Fatalf("a file lists itself: %+v %v", one, err)
	}
	if empty, err := c.List(ctx, "/d/a b"); err != nil || len(empty) != 0 {
		t.Fatalf("an empty directory: %+v %v", empty, err)
	}

	// The wire, as curl sees it.
	tok := testutil.Token(t, s, "root", 0)
	for _, tc := range []struct {
		query  string
		status int
		next   string
	}{
		{"path=/d&limit=2", 200, "%2Bplus"}, // "%2F", then "+plus"
		{"path=/d&after=new%20line&limit=1", 200, "x%26y%3Dz"},
		{"path=/d&after=z", 200, ""},
		{"path=/d&limit=x", 400, ""},
		{"path=/d&limit=-1", 400, ""},
		{"limit=1", 400, ""},
		{"path=/nope", 404, ""},
	} {
		req, _ := http.NewRequest("GET", c.Server()+"/v1/list?"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Strata-Next") != tc.next {
			t.Errorf("%s: %d, next %q; want %d, %q", tc.query, resp.StatusCode, resp.Header.Get("Strata-Next"), tc.status, tc.next)
		}
	}
}

func namesOf(l []client.FileInfo) []string {
	var out []string
	for _, fi := range l {
		out = append(out, fi.Name)
	}
	return out
}
