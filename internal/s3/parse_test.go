package s3

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		v         string
		size      int64
		off, n    int64
		ok, inval bool
	}{
		{"bytes=0-9", 100, 0, 10, true, false},
		{"bytes=90-", 100, 90, 10, true, false},
		{"bytes=-10", 100, 90, 10, true, false},
		{"bytes=-1000", 100, 0, 100, true, false},
		{"bytes=50-5000", 100, 50, 50, true, false},
		{"bytes=100-", 100, 0, 0, false, true},
		{"bytes=-0", 100, 0, 0, false, true},
		{"bytes=5-1", 100, 0, 0, false, false}, // unusable: the whole object
		{"bytes=0-1,5-6", 100, 0, 0, false, false},
		{"items=0-1", 100, 0, 0, false, false},
		{"bytes=x-1", 100, 0, 0, false, false},
		{"", 100, 0, 0, false, false},
		{"bytes=-1", 0, 0, 0, false, true},
		{"bytes=0-", 0, 0, 0, false, true},
	} {
		off, n, ok, e := parseRange(c.v, c.size)
		if off != c.off || n != c.n || ok != c.ok || (e != nil) != c.inval {
			t.Errorf("%q of %d: %d+%d %v %v", c.v, c.size, off, n, ok, e)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	f.Add("bytes=0-9", int64(100))
	f.Add("bytes=-5", int64(3))
	f.Fuzz(func(t *testing.T, v string, size int64) {
		if size < 0 {
			return
		}
		off, n, ok, _ := parseRange(v, size)
		if ok && (off < 0 || n <= 0 || off+n > size) {
			t.Fatalf("%q of %d: %d+%d", v, size, off, n)
		}
	})
}

func TestValidKeyAndBucket(t *testing.T) {
	for k, code := range map[string]string{
		"a": "", "a/b/c.txt": "", "dir/": "", "ünïcode/ключ": "", "a b+c%d": "",
		strings.Repeat("k", 1025): "KeyTooLongError", strings.Repeat("k", 256): "KeyTooLongError",
		"a//b": "InvalidArgument", "/a": "InvalidArgument", "a/../b": "InvalidArgument", "./a": "InvalidArgument", "..": "InvalidArgument",
		"a\x00b": "InvalidArgument", "bad\xff": "InvalidArgument", uploadsDir + "/x": "InvalidArgument",
	} {
		e := validKey(k)
		if got := ""; e != nil {
			got = e.Code
			if got != code {
				t.Errorf("key %.40q: %s, want %q", k, got, code)
			}
		} else if code != "" {
			t.Errorf("key %.40q accepted, want %s", k, code)
		}
	}
	for b, ok := range map[string]bool{"abc": true, "my-bucket.data": true, "ab": false, "ABC": false, "a_b": false, "-ab": false, "ab-": false,
		"a..b": false, "192.168.1.1": false, strings.Repeat("a", 64): false, strings.Repeat("a", 63): true} {
		if (validBucket(b) == nil) != ok {
			t.Errorf("bucket %q: valid %v, want %v", b, !ok, ok)
		}
	}
}
