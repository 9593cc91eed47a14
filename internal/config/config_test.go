package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"0", 0, false}, {"4096", 4096, false}, {"4MiB", 4 << 20, false}, {"4M", 4 << 20, false},
		{"200MB/s", 200e6, false}, {"1.5G", 3 << 29, false}, {"2 GiB", 2 << 30, false}, {"10kb", 10000, false},
		{"", 0, true}, {"-1", 0, true}, {"4XB", 0, true}, {"MiB", 0, true},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d (bad=%v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.toml")
	os.WriteFile(p, []byte(`
data_dir = "/srv/strata"
[[device]]
id = "fast0"
bandwidth = "200MB/s"
capacity = "10GiB"
[[cos]]
name = "default"
pool = "disk"
stripe_width = 2
stripe_unit = "1MiB"
`), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Devices) != 1 || c.Devices[0].Bandwidth != 200e6 || c.Devices[0].Capacity != 10<<30 || c.Devices[0].Path != "/srv/strata/devices/fast0" {
		t.Fatalf("devices: %+v", c.Devices)
	}
	if c.Catalog.Path != "/srv/strata/catalog.db" || c.Listen != "127.0.0.1:7420" || c.COS[0].StripeUnit != 1<<20 {
		t.Fatalf("config: %+v", c)
	}
	if c.Socket != "/srv/strata/strata.sock" || c.Mover.Socket != "/srv/strata/mover.sock" {
		t.Fatalf("sockets: %q, %q", c.Socket, c.Mover.Socket)
	}
	os.WriteFile(p, []byte("data_dir = \"/srv/strata\"\nsocket = \"off\"\n[mover]\nsocket = \"off\"\n"), 0o644)
	if c, err = Load(p); err != nil || c.Socket != "" || c.Mover.Socket != "" {
		t.Fatalf("sockets off: %q, %q, %v", c.Socket, c.Mover.Socket, err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4MiB", "1.5G", "200MB/s", "", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSize(s); err == nil && v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
	})
}

func TestPostgresCatalog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(p, []byte("device = []\n[catalog]\ndriver = \"postgres\"\ndsn = \"postgres://strata@db1/strata\"\nsync = \"normal\"\nstandby = true\n"), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	// A core with standbys keeps no data itself: device = [] leaves it
	// none.
	if len(c.Devices) != 0 {
		t.Fatalf("device = []: %d devices", len(c.Devices))
	}
	if c.Catalog.Driver != "postgres" || c.Catalog.DSN != "postgres://strata@db1/strata" || c.Catalog.Sync != "normal" || !c.Catalog.Standby {
		t.Fatalf("catalog: %+v", c.Catalog)
	}
}

func TestLoadRejects(t *testing.T) {
	cases := map[string]string{
		"unknown key":       "listne = \"x\"\n",
		"syntax":            "listen = \n",
		"bad size":          "[[device]]\nid = \"a\"\ncapacity = \"lots\"\n",
		"dup device":        "[[device]]\nid = \"a\"\n[[device]]\nid = \"a\"\n",
		"bad cos":           "[[cos]]\nname = \"x\"\n",
		"bad catalog":       "[catalog]\ndriver = \"oracle\"\n",
		"no dsn":            "[catalog]\ndriver = \"postgres\"\n",
		"standby on sqlite": "[catalog]\nstandby = true\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(p, []byte(body), 0o644)
			_, err := Load(p)
			if err == nil || strings.Count(err.Error(), "\n") > 0 {
				t.Fatalf("want a one-line error, got %q", err)
			}
		})
	}
}

// A TOML mistake is one line naming where it is and which key: the server's
// configuration and strata sim's studies both decode with DecodeStrict.
func TestDecodeStrict(t *testing.T) {
	var v struct {
		Name string `toml:"name"`
		Sub  struct {
			N int `toml:"n"`
		} `toml:"sub"`
	}
	for _, c := range []struct{ doc, want string }{
		{"name = \"a\"\n", ""},
		{"nmae = \"a\"\n", "line 1: unknown key nmae"},
		{"name = \"a\"\n[sub]\nn = 1\nm = 2\nx.y = 3\n", "line 4: unknown key sub.m; line 5: unknown key sub.x.y"},
		{"name = 3\n", "line 1, column 8: cannot decode TOML integer into string (key name)"},
		{"[sub]\nn = \"x\"\n", "(key sub.n)"},
		{"name = \n", "line 1, column"},
	} {
		err := DecodeStrict([]byte(c.doc), &v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.doc, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q: got %v, want one line with %q", c.doc, err, c.want)
		}
	}
}
