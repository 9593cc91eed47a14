package main_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/s3"
)

// s3Clients are the real S3 clients the gateway's tests drive; the
// project's scripts/test.sh installs them.
func needS3Clients(t *testing.T) {
	t.Helper()
	missing := []string{}
	if exec.Command("python3", "-c", "import boto3").Run() != nil {
		missing = append(missing, "python3 with boto3")
	}
	for _, c := range []string{"aws", "curl"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("STRATA_REQUIRE_S3CLIENTS") != "" {
		t.Fatalf("S3 clients missing: %s (scripts/test.sh installs them)", strings.Join(missing, ", "))
	}
	t.Skipf("S3 clients missing: %s (scripts/test.sh installs them)", strings.Join(missing, ", "))
}

// s3Key creates an access key for uid and returns its id and secret
// (global flags before the command: where the server is).
func (s *server) s3Key(user, uid string, flags ...string) (string, string) {
	var k struct {
		ID     string `json:"access_key_id"`
		Secret string `json:"secret_access_key"`
	}
	if err := json.Unmarshal([]byte(s.ok(append(flags, "s3", "keys", "create", "--user", user, "--uid", uid, "--json")...)), &k); err != nil || k.ID == "" || k.Secret == "" {
		s.t.Fatalf("s3 keys create: %v", err)
	}
	return k.ID, k.Secret
}

// TestS3Clients drives the gateway with boto3, the aws cli and curl
// (testdata/s3_clients.py): buckets, objects, ranges, conditions,
// checksums, listings, copies and multipart uploads (answered with
// keep-alive spaces), presigned URLs, the
// errors clients expect, and the Glacier restore cycle through the tape
// library.
func TestS3Clients(t *testing.T) {
	needS3Clients(t)
	s3addr := freePort(t)
	// keep_alive 1ms: every Complete and copy answers as a slow one does
	// (200, then spaces, then the document), which the clients must read.
	s := newServer(t, "reclaim_grace = \"0s\"\n[s3]\nlisten = \""+s3addr+"\"\nkeep_alive = \"1ms\"\n[library]\ntime_scale = \"x500\"\ndrives = 2\ncartridges = 4\n[hsm]\nrecall_min_files = 1\n")
	key, secret := s.s3Key("alice", "2101")
	okey, osecret := s.s3Key("bob", "2102")
	cmd := exec.Command("python3", "testdata/s3_clients.py")
	cmd.Env = append(os.Environ(), "S3_ENDPOINT=http://"+s3addr, "S3_KEY="+key, "S3_SECRET="+secret, "S3_OTHER_KEY="+okey, "S3_OTHER_SECRET="+osecret,
		"STRATA="+bin, "STRATA_SERVER="+s.scheme()+"://"+s.addr, "TMPDIR="+t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("s3_clients.py: %v\nserver log:\n%s", err, s.log.Tail(40))
	}
	// Revoked keys stop working (at once here: the gateway in strata
	// serve asks the core again after its cache time, 30 s; a fresh
	// key's first use is a lookup).
	s.ok("s3", "keys", "revoke", okey)
	if ls := s.ok("s3", "keys", "list"); !strings.Contains(ls, okey) || !strings.Contains(ls, "revoked") {
		t.Fatalf("keys list after revoke:\n%s", ls)
	}
	if tl := s.ok("token", "list"); strings.Contains(tl, key) {
		t.Fatalf("token list shows S3 keys:\n%s", tl)
	}
}

// TestS3BadBodies sends what no SDK would: bodies cut short (plain, and
// aws-chunked), a chunk longer than its size, a body longer than its
// declared length, an aws-chunked body whose trailer checksum is wrong.
// Each gets an error or a closed connection, the gateway keeps serving,
// and no object appears.
func TestS3BadBodies(t *testing.T) {
	s3addr := freePort(t)
	s := newServer(t, "[s3]\nlisten = \""+s3addr+"\"\n")
	key, secret := s.s3Key("alice", "2101")
	do := func(method, path string, body io.Reader, hdr map[string]string) int {
		r, _ := http.NewRequest(method, "http://"+s3addr+path, body)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		s3.Sign(r, key, secret, "us-east-1", time.Now())
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("PUT", "/bad", nil, nil); st != 200 {
		t.Fatalf("create bucket: %d", st)
	}
	// raw writes a signed request's head and then body as given, and
	// returns the status line (or "" if the gateway hung up).
	raw := func(path string, hdr map[string]string, body string) string {
		r, _ := http.NewRequest("PUT", "http://"+s3addr+path, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		s3.Sign(r, key, secret, "us-east-1", time.Now())
		c, err := net.Dial("tcp", s3addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var b strings.Builder
		fmt.Fprintf(&b, "PUT %s HTTP/1.1\r\nHost: %s\r\n", path, s3addr)
		for k, vs := range r.Header {
			fmt.Fprintf(&b, "%s: %s\r\n", k, vs[0])
		}
		b.WriteString("\r\n" + body)
		c.Write([]byte(b.String()))
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	}
	chunked := map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked", "X-Amz-Trailer": "x-amz-checksum-crc32"}
	withLen := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
		want string // the status line's code, "" for a hang-up
	}{
		{"plain body cut short", map[string]string{"Content-Length": "100"}, "only ten b", ""},
		{"aws-chunked cut inside a chunk", withLen(chunked, "Content-Length", "200", "X-Amz-Decoded-Content-Length", "10"), "a\r\nonly", "400"},
		{"aws-chunked chunk longer than its size", withLen(chunked, "Content-Length", "60", "X-Amz-Decoded-Content-Length", "5"), "5\r\nhello world\r\n0\r\n\r\n", "400"},
		{"aws-chunked more data than declared", withLen(chunked, "Content-Length", "60", "X-Amz-Decoded-Content-Length", "3"), "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n", "400"},
		{"aws-chunked wrong trailer checksum", withLen(chunked, "Content-Length", "60", "X-Amz-Decoded-Content-Length", "5"), "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", "400"},
		{"aws-chunked without its decoded length", withLen(chunked, "Content-Length", "40"), "5\r\nhello\r\n0\r\n\r\n", "411"},
	} {
		got := raw("/bad/obj", c.hdr, c.body)
		if c.want == "" && got != "" && !strings.Contains(got, " 400 ") || c.want != "" && !strings.Contains(got, " "+c.want+" ") {
			t.Errorf("%s: %q, want %s", c.name, got, c.want)
		}
		if st := do("HEAD", "/bad/obj", nil, nil); st != 404 {
			t.Fatalf("%s: the object is visible (HEAD %d)", c.name, st)
		}
	}
	// The gateway still serves, and a good aws-chunked body is stored.
	if st := do("PUT", "/bad/obj", strings.NewReader("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), withLen(chunked, "X-Amz-Decoded-Content-Length", "5")); st != 200 {
		t.Fatalf("good aws-chunked PUT: %d", st)
	}
	if st := do("HEAD", "/bad/obj", nil, nil); st != 200 {
		t.Fatalf("HEAD after a good PUT: %d", st)
	}
}

// TestS3OverTLS: with TLS on, the S3 listener speaks it as the control
// port does, with the server's certificate, and plain HTTP gets nothing.
func TestS3OverTLS(t *testing.T) {
	s3addr := freePort(t)
	s := newServer(t, "[tls]\nenabled = \"on\"\n[s3]\nlisten = \""+s3addr+"\"\n")
	key, secret := s.s3Key("alice", "2101", "--server", "unix:"+filepath.Join(s.dir, "data", "strata.sock"))
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(s.dir, "data", "tls", "ca.pem"))
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("the server's CA: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	r, _ := http.NewRequest("PUT", "https://"+s3addr+"/tls-bucket", nil)
	s3.Sign(r, key, secret, "us-east-1", time.Now())
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatalf("S3 over TLS, verified with the server's CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create bucket over TLS: %s", resp.Status)
	}
	if resp, err := http.Get("http://" + s3addr + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP answered %s", resp.Status)
		}
	}
}

// TestS3Standalone runs the gateway as its own process (strata s3) in
// front of a core: it serves a signed request, and it refuses plain
// HTTP off loopback.
func TestS3Standalone(t *testing.T) {
	s := newServer(t, "")
	key, secret := s.s3Key("alice", "2101")
	if _, errs, code := s.run("s3", "--listen", "0.0.0.0:0"); code == 0 || !strings.Contains(errs, "refusing to serve S3 in plain HTTP") {
		t.Fatalf("plain HTTP off loopback: exit %d %q", code, errs)
	}
	addr := freePort(t)
	gw := s.background("s3", "--listen", addr)
	defer func() { gw.Process.Signal(os.Interrupt); gw.Wait() }()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		r, _ := http.NewRequest("PUT", "http://"+addr+"/standalone", nil)
		s3.Sign(r, key, secret, "us-east-1", time.Now())
		var err error
		if resp, err = http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("create bucket through strata s3: %v", resp)
	}
	if ls := s.ok("ls", "-l", "/s3"); !strings.Contains(ls, "standalone") || !strings.Contains(ls, "2101") {
		t.Fatalf("the bucket is not alice's directory:\n%s", ls)
	}
}
