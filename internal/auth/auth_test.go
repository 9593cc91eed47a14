package auth

import (
	"strings"
	"testing"
)

func TestMay(t *testing.T) {
	alice := &Identity{UID: 10, GID: 100}
	bob := &Identity{UID: 11, GID: 200, Groups: []uint32{100}}
	carol := &Identity{UID: 12, GID: 300}
	adm := &Identity{UID: 13, GID: 300, Admin: true}
	for _, tc := range []struct {
		who        *Identity
		mode, want uint32
		ok         bool
	}{
		{alice, 0o600, Read | Write, true},
		{alice, 0o060, Read, false}, // the owner class decides, even when it grants less
		{bob, 0o640, Read, true},    // a supplementary group counts
		{bob, 0o640, Write, false},
		{carol, 0o640, Read, false},
		{carol, 0o604, Read, true},
		{carol, 0o775, Write, false},
		{carol, 0o711, Exec, true},
		{carol, 0o710, Exec, false},
		{adm, 0, Read | Write | Exec, true},
	} {
		if got := tc.who.May(tc.mode, 10, 100, tc.want); got != tc.ok {
			t.Errorf("uid %d mode %#o want %s: %v", tc.who.UID, tc.mode, WantName(tc.want), got)
		}
	}
}

func TestScopes(t *testing.T) {
	parse := func(s ...string) []Scope {
		var out []Scope
		for _, x := range s {
			sc, err := ParseScope(x)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sc)
		}
		return out
	}
	id := &Identity{Scopes: parse("storage.read:/proj", "storage.modify:/proj/out/", "stage:/tape")}
	for _, tc := range []struct {
		op, path string
		ok       bool
	}{
		{ScopeRead, "/proj", true},
		{ScopeRead, "/proj/a/b", true},
		{ScopeRead, "/project", false},
		{ScopeRead, "/", false},
		{ScopeCreate, "/proj/a", false},
		{ScopeCreate, "/proj/out/x", true}, // modify implies create
		{ScopeModify, "/proj/out", true},
		{ScopeStage, "/tape/x", true},
		{ScopeStage, "/proj/x", false},
	} {
		if got := id.Allows(tc.op, tc.path); got != tc.ok {
			t.Errorf("%s %s: %v", tc.op, tc.path, got)
		}
	}
	if !(&Identity{}).Allows(ScopeModify, "/x") {
		t.Error("no scopes: POSIX permissions alone")
	}
	for _, bad := range []string{"storage.write:/x", "read:relative", "", "storage.read:"} {
		if _, err := ParseScope(bad); err == nil && bad != "storage.read:" {
			t.Errorf("%q accepted", bad)
		}
	}
	if s, _ := ParseScope("storage.read:"); s.Path != "/" {
		t.Errorf("an empty path is the whole namespace: %+v", s)
	}
}

func TestTokenFormat(t *testing.T) {
	id, tok, hash := NewToken()
	gid, secret, err := ParseToken(tok)
	if err != nil || gid != id {
		t.Fatalf("parse %q: %v %v", tok, gid, err)
	}
	if !SecretMatches(secret, hash) || SecretMatches(secret[:42]+"x", hash) {
		t.Fatal("secret check")
	}
	if strings.Contains(hash, secret) {
		t.Fatal("hash holds the secret")
	}
	for _, bad := range []string{"", "strata_", "strata_" + id, "strata_" + id + "_short", "Strata_" + tok[7:], "strata_zzzzzzzzzzzzzzzz_" + secret, tok + "x"} {
		if _, _, err := ParseToken(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	_, tok, _ := NewToken()
	f.Add(tok)
	f.Add("strata_0123456789abcdef_" + strings.Repeat("A", 43))
	f.Add("strata__")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := ParseToken(s)
		if err == nil && (len(id) != 16 || len(secret) != 43 || s != tokenPrefix+id+"_"+secret) {
			t.Fatalf("%q parsed as %q %q", s, id, secret)
		}
	})
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"storage.read:/proj", "modify:/", "stage", "storage.create:/a//b/", "x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseScope(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(sc.Path, "/") || (sc.Path != "/" && strings.HasSuffix(sc.Path, "/")) {
			t.Fatalf("%q: path %q", s, sc.Path)
		}
		again, err := ParseScope(sc.String())
		if err != nil || again != sc {
			t.Fatalf("%q: %v does not survive its string %q: %v %v", s, sc, sc.String(), again, err)
		}
		if !(&Identity{Scopes: []Scope{sc}}).Allows(sc.Op, sc.Path) {
			t.Fatalf("%v does not allow its own path", sc)
		}
	})
}
