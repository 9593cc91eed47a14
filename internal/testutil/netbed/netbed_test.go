package netbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two hosts reach each other over the bridge (and only there), the shaped
// one's link carries a token bucket each way, and a link taken down
// carries nothing until it is up again.
func TestBed(t *testing.T) {
	b := New(t)
	srv := b.Host("server", "100mbit")
	cli := b.Host("client", "")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("across the bridge"), 0o644)
	web := srv.Start("python3", "-m", "http.server", "--bind", srv.IP, "--directory", dir, "8000")
	fetch := func(h *Host) (string, error) {
		out, err := h.Command("python3", "-c", `import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=1).read().decode())`, "http://"+srv.Addr(8000)+"/f").CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	var got string
	var err error
	for i := 0; i < 100; i++ {
		if got, err = fetch(cli); err == nil {
			break
		}
		if !web.Running() {
			t.Fatalf("server exited: %s", web.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != "across the bridge" {
		t.Fatalf("fetch: %q, %v", got, err)
	}
	// The machine's own namespace has no way in.
	if out, err := exec.Command("python3", "-c", `import urllib.request
urllib.request.urlopen("http://`+srv.Addr(8000)+`/f", timeout=1)`).CombinedOutput(); err == nil {
		t.Fatalf("reached the bed from outside: %s", out)
	}
	for _, q := range []*exec.Cmd{exec.Command("tc", "qdisc", "show", "dev", srv.peer), srv.Command("tc", "qdisc", "show", "dev", "eth0")} {
		out, _ := q.CombinedOutput()
		if !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 100Mbit") {
			t.Fatalf("%v: %s, want a 100 Mbit token bucket", q.Args, out)
		}
	}
	srv.Down()
	if _, err := fetch(cli); err == nil {
		t.Fatal("fetched across a link that is down")
	}
	srv.Up()
	if got, err := fetch(cli); err != nil || got != "across the bridge" {
		t.Fatalf("after the link came back: %q, %v", got, err)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{"100mbit": 100e6, "1gbit": 1e9, "512kbit": 512e3, "fast": 0, "0mbit": 0, "mbit": 0} {
		got, err := parseRate(in)
		if got != want || (err == nil) != (want > 0) {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// A proxy delays what it forwards each way and cuts its connections on
// demand; loss drops packets at random and TCP still delivers.
func TestProxyAndLoss(t *testing.T) {
	b := New(t)
	srv := b.Host("server", "")
	mid := b.Host("proxy", "")
	cli := b.Host("client", "")
	dir := t.TempDir()
	want := strings.Repeat("delayed and lossy ", 50000)
	os.WriteFile(filepath.Join(dir, "f"), []byte(want), 0o644)
	web := srv.Start("python3", "-m", "http.server", "--bind", srv.IP, "--directory", dir, "8000")
	p := mid.Proxy(9000, srv.Addr(8000), 50*time.Millisecond)
	fetch := func() (string, time.Duration, error) {
		start := time.Now()
		out, err := cli.Command("python3", "-c", `import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())`, "http://"+p.Addr+"/f").Output()
		return string(out), time.Since(start), err
	}
	var got string
	var took time.Duration
	var err error
	for i := 0; i < 100; i++ {
		if got, took, err = fetch(); err == nil {
			break
		}
		if !web.Running() {
			t.Fatalf("server exited: %s", web.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("through the proxy: %d bytes, %v", len(got), err)
	}
	// A connection and a request each cross it both ways: at least two
	// round trips of 2 × 50 ms.
	if took < 200*time.Millisecond {
		t.Fatalf("through a 50 ms proxy in %v", took)
	}
	p.Reset(true)
	if _, _, err := fetch(); err == nil {
		t.Fatal("fetched through a proxy that refuses")
	}
	p.Restore()
	cli.Loss(5)
	if out, _ := cli.Command("nft", "list", "ruleset").CombinedOutput(); !strings.Contains(string(out), "numgen random mod 100 < 5 drop") {
		t.Fatalf("no loss rule: %s", out)
	}
	if got, _, err := fetch(); err != nil || got != want {
		t.Fatalf("with 5 %% loss: %d bytes, %v", len(got), err)
	}
}
