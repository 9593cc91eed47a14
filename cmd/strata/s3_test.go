package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
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

// s3Key creates an access key for uid and returns its id and secret.
func (s *server) s3Key(user, uid string) (string, string) {
	var k struct {
		ID     string `json:"access_key_id"`
		Secret string `json:"secret_access_key"`
	}
	if err := json.Unmarshal([]byte(s.ok("s3", "keys", "create", "--user", user, "--uid", uid, "--json")), &k); err != nil || k.ID == "" || k.Secret == "" {
		s.t.Fatalf("s3 keys create: %v", err)
	}
	return k.ID, k.Secret
}

// TestS3Clients drives the gateway with boto3, the aws cli and curl
// (testdata/s3_clients.py): buckets, objects, ranges, conditions,
// checksums, listings, copies, multipart uploads, presigned URLs, the
// errors clients expect, and the Glacier restore cycle through the tape
// library.
func TestS3Clients(t *testing.T) {
	needS3Clients(t)
	s3addr := freePort(t)
	s := newServer(t, "reclaim_grace = \"0s\"\n[s3]\nlisten = \""+s3addr+"\"\n[library]\ntime_scale = \"x500\"\ndrives = 2\ncartridges = 4\n[hsm]\nrecall_min_files = 1\n")
	key, secret := s.s3Key("alice", "2101")
	okey, osecret := s.s3Key("bob", "2102")
	cmd := exec.Command("python3", "testdata/s3_clients.py")
	cmd.Env = append(os.Environ(), "S3_ENDPOINT=http://"+s3addr, "S3_KEY="+key, "S3_SECRET="+secret, "S3_OTHER_KEY="+okey, "S3_OTHER_SECRET="+osecret,
		"STRATA="+bin, "STRATA_SERVER="+s.scheme()+"://"+s.addr, "TMPDIR="+t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("s3_clients.py: %v\nserver log:\n%s", err, s.log.tail(40))
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
