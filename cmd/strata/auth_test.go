package main_test

// Identity and access control end to end: the real binary run as real
// (numeric) users of this host through SysProcAttr.Credential, over the
// Unix socket, where the kernel tells the server who they are, and over
// TCP with bearer tokens.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// osUser is a user the tests act as: no account needed, the kernel takes
// any uid for a process root starts.
type osUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

var (
	alice = osUser{"alice", 2001, 3000, nil}          // owns the fixtures
	bob   = osUser{"bob", 2002, 3100, []uint32{3000}} // in alice's group (supplementary)
	carol = osUser{"carol", 2003, 4000, nil}          // anyone else
)

func (u osUser) cred() *syscall.Credential {
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}

// reachable lets other users reach the test's server: the binary, and the
// temporary directories above the data directory (whose own mode the
// server sets).
func reachable(t *testing.T, s *server) {
	t.Helper()
	for _, d := range []string{filepath.Dir(bin), s.dir, filepath.Dir(s.dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// access runs commands as users, over the socket or over TCP with a token
// the admin issued for them.
type access struct {
	s      *server
	tcp    bool
	tokens map[uint32]string
	files  string // a directory every user can read and write, for get's output
}

func (a *access) run(u osUser, args ...string) (string, string, int) {
	var env []string
	if a.tcp {
		tok, ok := a.tokens[u.uid]
		if !ok {
			groups := make([]string, len(u.groups))
			for i, g := range u.groups {
				groups[i] = fmt.Sprint(g)
			}
			tok = strings.TrimSpace(a.s.ok("token", "create", "--user", u.name, "--uid", fmt.Sprint(u.uid), "--gid", fmt.Sprint(u.gid), "--groups", strings.Join(groups, ","), "--ttl", "1h"))
			a.tokens[u.uid] = tok
		}
		env = []string{"STRATA_TOKEN=" + tok}
		args = append([]string{"--tcp-only"}, args...)
	}
	return a.s.runAs(u.cred(), env, args...)
}

// TestPermissionMatrix: every operation as owner, group member and other,
// allowed and denied, over the socket and over TCP with tokens. Every
// denied case must fail with one "permission denied" line, every allowed
// one succeed.
func TestPermissionMatrix(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as other users needs root") // CI runs as root
	}
	s := newServer(t, "")
	reachable(t, s)
	files := filepath.Join(s.dir, "files")
	if err := os.Mkdir(files, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(files, 0o777)
	src := filepath.Join(files, "src")
	writeRandom(t, src, 200<<10)

	for _, transport := range []string{"socket", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			a := &access{s: s, tcp: transport == "tcp", tokens: map[uint32]string{}, files: files}
			root := "/" + transport
			// The fixtures: alice's project, group 3000.
			s.ok("mkdir", root)
			s.ok("chown", "2001:3000", root)
			s.ok("mkdir", "-p", root+"/tmp")
			s.ok("chmod", "1777", root+"/tmp")
			must := func(u osUser, args ...string) {
				t.Helper()
				if _, errs, code := a.run(u, args...); code != 0 {
					t.Fatalf("%s: strata %s: %s", u.name, strings.Join(args, " "), errs)
				}
			}
			for _, m := range []string{"700", "750", "755", "770", "777"} {
				must(alice, "mkdir", root+"/d"+m)
				must(alice, "chmod", m, root+"/d"+m)
				must(alice, "put", src, root+"/d"+m+"/f")
			}
			for _, m := range []string{"600", "640", "644"} {
				must(alice, "put", src, root+"/f"+m)
				must(alice, "chmod", m, root+"/f"+m)
			}
			must(bob, "put", src, root+"/tmp/bobs")
			// Alice's files of one stripe each, for concat: a pair for
			// each user to try, in directories anyone may change.
			for _, m := range []string{"644", "600"} {
				must(alice, "mkdir", root+"/p"+m)
				must(alice, "chmod", "777", root+"/p"+m)
				for _, u := range []osUser{alice, bob, carol} {
					for _, f := range []string{"/a-", "/b-"} {
						must(alice, "put", "--stripes", "1", src, root+"/p"+m+f+u.name)
						must(alice, "chmod", m, root+"/p"+m+f+u.name)
					}
				}
			}

			out := func(u osUser) string { return filepath.Join(files, u.name+"-"+transport+".out") }
			type want struct{ owner, group, other bool }
			cases := []struct {
				name string
				args func(u osUser) []string
				want want
			}{
				{"get 0600", func(u osUser) []string { return []string{"get", "-f", root + "/f600", out(u)} }, want{true, false, false}},
				{"get 0640", func(u osUser) []string { return []string{"get", "-f", root + "/f640", out(u)} }, want{true, true, false}},
				{"get 0644", func(u osUser) []string { return []string{"get", "-f", root + "/f644", out(u)} }, want{true, true, true}},
				{"ls 0700", func(u osUser) []string { return []string{"ls", root + "/d700"} }, want{true, false, false}},
				{"ls 0750", func(u osUser) []string { return []string{"ls", root + "/d750"} }, want{true, true, false}},
				{"ls 0755", func(u osUser) []string { return []string{"ls", root + "/d755"} }, want{true, true, true}},
				{"stat below 0700", func(u osUser) []string { return []string{"stat", root + "/d700/f"} }, want{true, false, false}},
				{"stat below 0750", func(u osUser) []string { return []string{"stat", root + "/d750/f"} }, want{true, true, false}},
				{"put in 0755", func(u osUser) []string { return []string{"put", src, root + "/d755/" + u.name} }, want{true, false, false}},
				{"put in 0770", func(u osUser) []string { return []string{"put", src, root + "/d770/" + u.name} }, want{true, true, false}},
				{"put in 0777", func(u osUser) []string { return []string{"put", src, root + "/d777/" + u.name} }, want{true, true, true}},
				{"mkdir in 0770", func(u osUser) []string { return []string{"mkdir", root + "/d770/m-" + u.name} }, want{true, true, false}},
				{"overwrite in 0755", func(u osUser) []string { return []string{"put", "-f", src, root + "/d755/f"} }, want{true, false, false}},
				{"mv in 0770", func(u osUser) []string { return []string{"mv", root + "/d770/" + u.name, root + "/d770/mv-" + u.name} }, want{true, true, false}},
				{"rm in 0755", func(u osUser) []string { return []string{"rm", root + "/d755/f"} }, want{true, false, false}},
				{"concat 0600 files", func(u osUser) []string {
					return []string{"concat", root + "/d777/c600-" + u.name, root + "/p600/a-" + u.name, root + "/p600/b-" + u.name}
				}, want{true, false, false}},
				{"concat 0644 files into 0770", func(u osUser) []string {
					return []string{"concat", root + "/d770/c644-" + u.name, root + "/p644/a-" + u.name, root + "/p644/b-" + u.name}
				}, want{true, true, false}},
				{"chmod", func(u osUser) []string { return []string{"chmod", "644", root + "/f640"} }, want{true, false, false}},
				{"chown away", func(u osUser) []string { return []string{"chown", "2999", root + "/f644"} }, want{false, false, false}},
				{"chgrp to own group", func(u osUser) []string { return []string{"chown", ":" + fmt.Sprint(u.gid), root + "/f600"} }, want{true, false, false}},
				{"rm bob's file in a sticky dir", func(u osUser) []string { return []string{"rm", root + "/tmp/bobs"} }, want{false, true, false}},
				{"migrate (admin)", func(u osUser) []string { return []string{"migrate", root + "/f644"} }, want{false, false, false}},
				{"purge (admin)", func(u osUser) []string { return []string{"purge", root + "/f644"} }, want{false, false, false}},
				{"admin tapes", func(u osUser) []string { return []string{"admin", "tapes"} }, want{false, false, false}},
				{"admin lost", func(u osUser) []string { return []string{"admin", "lost"} }, want{false, false, false}},
				{"scrub (admin)", func(u osUser) []string { return []string{"scrub", root + "/f644"} }, want{false, false, false}},
				{"drive offline (admin)", func(u osUser) []string { return []string{"admin", "drives", "offline", "drive0"} }, want{false, false, false}},
				{"token create", func(u osUser) []string { return []string{"token", "create", "--user", "x", "--uid", "7"} }, want{false, false, false}},
				{"rm -r a tree holding others' files", func(u osUser) []string { return []string{"rm", "-r", root + "/d777"} }, want{true, false, false}},
			}
			// The refused run first, so that what an allowed run changes
			// (a chmod, an rm) does not decide them.
			type run struct {
				u       osUser
				allowed bool
			}
			for _, tc := range cases {
				runs := []run{{carol, tc.want.other}, {bob, tc.want.group}, {alice, tc.want.owner}}
				slices.SortStableFunc(runs, func(x, y run) int { return cmp.Compare(btoi(x.allowed), btoi(y.allowed)) })
				for _, who := range runs {
					_, errs, code := a.run(who.u, tc.args(who.u)...)
					denied := code != 0
					switch {
					case who.allowed && denied:
						t.Errorf("%s as %s: refused: %s", tc.name, who.u.name, errs)
					case !who.allowed && !denied:
						t.Errorf("%s as %s: allowed, want permission denied", tc.name, who.u.name)
					case denied && (!strings.Contains(errs, "permission denied") || strings.Count(errs, "\n") != 1):
						t.Errorf("%s as %s: want one permission denied line, got %q", tc.name, who.u.name, errs)
					}
				}
			}
			// A refusal names the path and what was missing, nothing else.
			name := "uid:2003" // the host has no name for carol's uid; her token does
			if a.tcp {
				name = "carol"
			}
			if _, errs, _ := a.run(carol, "put", src, root+"/d755/x"); errs != "strata: permission denied: "+root+"/d755/x ("+name+" needs write and search on "+root+"/d755)\n" {
				t.Errorf("refusal: %q", errs)
			}
			// An admin (root) may do what the others may not.
			s.ok("chown", "2003", root+"/f644")
			s.ok("rm", "-r", root+"/d770")
		})
	}

	// Who the server takes each to be.
	a := &access{s: s, tokens: map[uint32]string{}}
	if out, _, _ := a.run(bob, "whoami"); !strings.Contains(out, "uid=2002 gid=3100 groups=3000 via peercred") {
		t.Errorf("bob on the socket: %q", out)
	}
	if out := s.ok("whoami"); !strings.Contains(out, "uid=0") || !strings.Contains(out, "admin") {
		t.Errorf("root on the socket: %q", out)
	}
	a.tcp = true
	if out, _, _ := a.run(carol, "whoami"); !strings.Contains(out, "uid=2003 gid=4000") || !strings.Contains(out, "via token") {
		t.Errorf("carol over TCP: %q", out)
	}
	// Without a token, TCP is refused with 401 and one line saying what to do.
	_, errs, code := s.runAs(carol.cred(), nil, "--tcp-only", "ls", "/")
	if code == 0 || !strings.Contains(errs, "STRATA_TOKEN") || strings.Count(errs, "\n") != 1 {
		t.Errorf("no token over TCP: exit %d %q", code, errs)
	}
}

// TestTokens: a token is refused when expired, revoked, forged, unknown,
// or used beyond its scopes; the catalog holds no secret; list and revoke
// are the admin's.
func TestTokens(t *testing.T) {
	s := newServer(t, "")
	s.ok("mkdir", "-p", "/proj/in", "/other")
	s.ok("chmod", "777", "/proj", "/proj/in", "/other")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 1000)
	s.ok("put", src, "/proj/f")
	s.ok("put", src, "/other/f")

	mk := func(args ...string) string {
		t.Helper()
		out, errs, code := s.run(append([]string{"token", "create", "--user", "dave", "--uid", "2004"}, args...)...)
		if code != 0 {
			t.Fatalf("token create %v: %s", args, errs)
		}
		if !strings.Contains(errs, "it is shown only now") {
			t.Errorf("token create says: %q", errs)
		}
		return strings.TrimSpace(out)
	}
	tcp := func(tok string, args ...string) (string, int) {
		_, errs, code := s.runAs(nil, []string{"STRATA_TOKEN=" + tok}, append([]string{"--tcp-only"}, args...)...)
		return errs, code
	}
	good := mk()
	if errs, code := tcp(good, "stat", "/proj/f"); code != 0 {
		t.Fatalf("a good token: %s", errs)
	}
	expiring := mk("--ttl", "1s")
	revoked := mk()
	s.ok("token", "revoke", strings.Split(revoked, "_")[1])
	forged := good[:len(good)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(good, "AA")]
	readProj := mk("--scope", "storage.read:/proj")
	createIn := mk("--scope", "storage.create:/proj/in")
	time.Sleep(1100 * time.Millisecond)

	for _, tc := range []struct {
		name string
		tok  string
		args []string
		msg  string
	}{
		{"expired", expiring, []string{"stat", "/proj/f"}, "expired"},
		{"revoked", revoked, []string{"stat", "/proj/f"}, "revoked"},
		{"forged", forged, []string{"stat", "/proj/f"}, "wrong secret"},
		{"unknown", "strata_00000000000000ff_" + strings.Repeat("A", 43), []string{"stat", "/proj/f"}, "not known"},
		{"malformed", "hello", []string{"stat", "/proj/f"}, "malformed"},
		{"read scope, other path", readProj, []string{"stat", "/other/f"}, "no storage.read scope"},
		{"read scope, a write", readProj, []string{"put", src, "/proj/g"}, "no storage.create scope"},
		{"read scope, a path that only starts the same", readProj, []string{"stat", "/projX"}, "no storage.read scope"},
		{"create scope, a replace", createIn, []string{"put", src, "/proj/in/x"}, ""},
		{"create scope, a second put -f", createIn, []string{"put", "-f", src, "/proj/in/x"}, "no storage.modify scope"},
		{"create scope, a remove", createIn, []string{"rm", "/proj/in/x"}, "no storage.modify scope"},
		{"create scope, a read", createIn, []string{"get", "/proj/in/x", filepath.Join(s.dir, "o")}, "no storage.read scope"},
		{"scoped token, admin work", readProj, []string{"token", "list"}, "not an admin"},
	} {
		errs, code := tcp(tc.tok, tc.args...)
		if tc.msg == "" {
			if code != 0 {
				t.Errorf("%s: refused: %s", tc.name, errs)
			}
			continue
		}
		if code == 0 || !strings.Contains(errs, tc.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d %q, want one line with %q", tc.name, code, errs, tc.msg)
		}
	}
	if errs, code := tcp(readProj, "stat", "/proj/f"); code != 0 {
		t.Errorf("read scope on its path: %s", errs)
	}
	// A token in use (the server has it cached) is refused from the
	// moment it is revoked.
	s.ok("token", "revoke", strings.Split(good, "_")[1])
	if errs, code := tcp(good, "stat", "/proj/f"); code == 0 || !strings.Contains(errs, "revoked") {
		t.Errorf("a revoked token in use: exit %d %q", code, errs)
	}

	// The list shows states, never a secret; the catalog holds none either.
	list := s.ok("token", "list")
	for _, want := range []string{"expired", "revoked", "valid", "storage.read:/proj"} {
		if !strings.Contains(list, want) {
			t.Errorf("token list lacks %q:\n%s", want, list)
		}
	}
	db, err := os.ReadFile(filepath.Join(s.dir, "data", "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{good, readProj} {
		// strata_<id>_<secret>, where the secret (base64url) may hold
		// underscores of its own.
		secret := strings.SplitN(tok, "_", 3)[2]
		if strings.Contains(list, secret) || strings.Contains(string(db), secret) {
			t.Errorf("a token's secret is stored or listed")
		}
	}
}

// TestBadNames: names that cannot be typed or would rewrite a terminal,
// modes outside 07777 and paths past the limits are refused with one line.
func TestBadNames(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 10)
	deep := strings.Repeat("/d", 257)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"put", src, "/new\nline"}, "control character"},
		{[]string{"mkdir", "/esc\x1b[31mred"}, "control character"},
		{[]string{"mkdir", "/bad\xffutf8"}, "not valid UTF-8"},
		{[]string{"mkdir", "-p", deep}, "deeper than 256"},
		{[]string{"mkdir", "/" + strings.Repeat("x", 256)}, "longer than 255"},
		{[]string{"stat", "/" + strings.Repeat("a/", 2100)}, "longer than 4096"},
	} {
		_, errs, code := s.run(tc.args...)
		if code == 0 || !strings.Contains(errs, tc.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d %q, want one line with %q", tc.args, code, errs, tc.msg)
		}
	}
	s.ok("put", src, "/f")
	// The API refuses a mode with bits outside 07777 (the CLI could not
	// send one).
	tok := strings.TrimSpace(s.ok("token", "create", "--user", "root", "--ttl", "1h"))
	for _, body := range []string{`{"path":"/f","mode":4294967295}`, `{"path":"/f","mode":65535}`} {
		code, reply := postJSON(t, "http://"+s.addr+"/v1/setattr", tok, body)
		if code != 400 || !strings.Contains(reply, "outside 07777") {
			t.Errorf("setattr %s: %d %s", body, code, reply)
		}
	}
	// A uid in a request body is refused: the server decides the owner.
	code, reply := postJSON(t, "http://"+s.addr+"/v1/mkdir", tok, `{"path":"/mine","uid":0}`)
	if code != 400 || !strings.Contains(reply, "unknown field") {
		t.Errorf("mkdir with a uid: %d %s", code, reply)
	}
}

// TestDataAtRestPrivate: what the server keeps on disk is readable by the
// server's user only (the data directory itself stays searchable, for
// the sockets in it).
func TestDataAtRestPrivate(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 3<<20)
	s.ok("put", src, "/f")
	s.ok("migrate", "/f")
	data := filepath.Join(s.dir, "data")
	n := 0
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		switch {
		case p == data:
			if mode.Perm() != 0o711 {
				t.Errorf("%s: %v, want drwx--x--x", p, mode)
			}
		case mode.Type() == fs.ModeSocket:
			// connectable by everyone: the server checks who connects
		case mode.Perm()&0o077 != 0:
			t.Errorf("%s: %v: readable by others", p, mode)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("walked only %d entries", n)
	}
	// And the server's own socket still serves another user.
	if os.Getuid() == 0 {
		reachable(t, s)
		if out, errs, code := s.runAs(carol.cred(), nil, "whoami"); code != 0 || !strings.Contains(out, "uid=2003") {
			t.Errorf("another user on the socket: %q %q", out, errs)
		}
	}

}

// postJSON posts body with a bearer token and returns the status and reply.
func postJSON(t *testing.T, url, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAudit: changes and refusals are in the audit log with who, how,
// from where, what and the result; `strata audit` filters them.
func TestAudit(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	s := newServer(t, "")
	reachable(t, s)
	s.ok("mkdir", "/proj")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 1234)
	os.Chmod(src, 0o644)
	s.ok("put", src, "/proj/f")
	if _, _, code := s.runAs(carol.cred(), nil, "rm", "/proj/f"); code == 0 {
		t.Fatal("carol removed root's file")
	}
	s.runAs(nil, []string{"STRATA_TOKEN=strata_00000000000000ff_" + strings.Repeat("A", 43)}, "--tcp-only", "mkdir", "/x")
	data := filepath.Join(s.dir, "data")

	out := s.ok("audit", "--data", data, "--user", "2003", "--denied") // carol has no name on this host
	if !strings.Contains(out, `"/proj/f"`) || !strings.Contains(out, "POST /v1/remove") || !strings.Contains(out, "403") || !strings.Contains(out, "peercred") || !strings.Contains(out, "needs write and search on /proj") {
		t.Errorf("carol's refused rm:\n%s", out)
	}
	if strings.Count(out, "\n") != 2 { // the header and the one line
		t.Errorf("carol has one refused request:\n%s", out)
	}
	var sawPut, saw401 bool
	for _, line := range strings.Split(strings.TrimSpace(s.ok("audit", "--data", data, "--json", "--since", "1h")), "\n") {
		var r struct {
			User, Auth, Remote, Op, Error string
			UID                           *uint32
			Paths                         []string
			Status                        int
			Bytes                         int64
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch {
		case r.Op == "POST /v1/create" && len(r.Paths) == 1 && r.Paths[0] == "/proj/f":
			sawPut = r.User == "root" && r.UID != nil && *r.UID == 0 && r.Auth == "peercred" && r.Remote == "unix" && r.Status == 200 && r.Bytes == 1234
		case r.Status == 401:
			saw401 = r.User == "" && strings.HasPrefix(r.Remote, "127.0.0.1:") && strings.Contains(r.Error, "not known")
		case r.Op == "GET /v1/stat" && r.Status == 200:
			t.Errorf("a read that was allowed is logged: %s", line)
		}
	}
	if !sawPut || !saw401 {
		t.Errorf("root's put logged: %v; the unknown token's 401: %v", sawPut, saw401)
	}
	if out := s.ok("audit", "--data", data, "--since", "2030-01-01T00:00:00Z"); strings.Count(out, "\n") != 1 {
		t.Errorf("nothing since 2030:\n%s", out)
	}
}

// TestQuota: an admin sets a user's limits; the user's put past them fails
// with one line naming the quota; `strata quota` and `df` report usage
// against the limits; a removal gives the room back.
func TestQuota(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	s := newServer(t, "")
	reachable(t, s)
	s.ok("mkdir", "/home")
	s.ok("chmod", "777", "/home")
	s.ok("quota", "set", "--user", "2001", "--bytes", "1MiB", "--files", "5")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 600<<10)
	os.Chmod(src, 0o644)
	as := func(args ...string) (string, string, int) { return s.runAs(alice.cred(), nil, args...) }
	if _, errs, code := as("put", src, "/home/a"); code != 0 {
		t.Fatalf("first put: %s", errs)
	}
	// The quota names the user as the host does: by name where it has
	// one for uid 2001, else by number.
	name := "uid:2001"
	if u, err := user.LookupId("2001"); err == nil {
		name = u.Username
	}
	_, errs, code := as("put", src, "/home/b")
	if code == 0 || !strings.Contains(errs, "quota exceeded") || !strings.Contains(errs, "user "+name+" may hold 1.0 MiB") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("put past the quota: exit %d %q", code, errs)
	}
	out, _, _ := as("quota")
	if !strings.Contains(out, name) || !strings.Contains(out, "600.0 KiB") || !strings.Contains(out, "1.0 MiB") {
		t.Errorf("strata quota:\n%s", out)
	}
	if out, _, _ := as("df"); !strings.Contains(out, "QUOTA") || !strings.Contains(out, "600.0 KiB") {
		t.Errorf("df lacks the quota:\n%s", out)
	}
	if _, errs, code := as("quota", "set", "--user", "2001", "--bytes", "1TiB"); code == 0 || !strings.Contains(errs, "not an admin") {
		t.Errorf("a user raised its own quota: %q", errs)
	}
	if _, errs, code := as("quota", "--user", "root"); code == 0 || !strings.Contains(errs, "permission denied") {
		t.Errorf("a user read root's quota: %q", errs)
	}
	if _, errs, code := as("rm", "/home/a"); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := as("put", src, "/home/b"); code != 0 {
		t.Fatalf("put after a removal: %s", errs)
	}
	// The limits and usage survive a restart (limits in the catalog, usage
	// counted from it).
	s.stop()
	s.start()
	if _, errs, code := as("put", src, "/home/c"); code == 0 || !strings.Contains(errs, "quota exceeded") {
		t.Fatalf("after a restart: exit %d %q", code, errs)
	}
}
