package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTapeREST stages 1,000 small files spread over several cartridges in
// one WLCG Tape REST request (testdata/taperest_client.py, a client
// written from the reference document), cancels half, and checks that
// the recall mounted each cartridge it read at most once, and that
// archiveinfo agrees with strata ls -l.
func TestTapeREST(t *testing.T) {
	needS3Clients(t) // python3, which scripts/test.sh installs with them
	s := newServer(t, "[library]\ntime_scale = \"instant\"\ndrives = 2\ncartridges = 12\ncapacity = \"12MiB\"\n[hsm]\naggregate = \"1MiB\"\nrecall_min_files = 1000\nrecall_max_age = \"2s\"\nmigrate_drives = 1\n")
	local := filepath.Join(s.dir, "small")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	args := []string{"put"}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("f%04d", i)
		writeRandom(t, filepath.Join(local, name), 50<<10)
		args = append(args, filepath.Join(local, name))
		paths = append(paths, "/stage/"+name)
	}
	s.ok("mkdir", "/stage")
	s.ok(append(args, "/stage/")...)
	s.ok("migrate")
	s.ok(append([]string{"purge"}, paths...)...)
	// Which cartridges hold the files, and the drives' mounts before.
	var tapes []struct {
		Volume    string `json:"volume"`
		TapeFiles int    `json:"tape_files"`
	}
	json.Unmarshal([]byte(s.ok("admin", "tapes", "--json")), &tapes)
	used := 0
	for _, c := range tapes {
		if c.TapeFiles > 0 {
			used++
		}
	}
	if used < 4 {
		t.Fatalf("the files are on %d cartridges; the test wants them spread", used)
	}
	mounts := func() int64 {
		var ds []struct {
			Mounts int64 `json:"mounts"`
		}
		json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &ds)
		var n int64
		for _, d := range ds {
			n += d.Mounts
		}
		return n
	}
	before := mounts()
	tok := strings.TrimSpace(s.ok("token", "create", "--user", "root", "--scope", "storage.stage:/stage", "--scope", "storage.read:/stage"))
	list := filepath.Join(s.dir, "paths")
	os.WriteFile(list, []byte(strings.Join(paths, "\n")), 0o644)
	out := filepath.Join(s.dir, "summary.json")
	cmd := exec.Command("python3", "testdata/taperest_client.py")
	cmd.Env = append(os.Environ(), "TAPE_REST="+s.scheme()+"://"+s.addr, "TOKEN="+tok, "FILES="+list, "OUT="+out)
	o, err := cmd.CombinedOutput()
	t.Logf("%s", o)
	if err != nil {
		t.Fatalf("taperest_client.py: %v\nserver log:\n%s", err, s.log.Tail(30))
	}
	var sum struct {
		Cancelled, Completed int
		Locality             map[string]string
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if n := mounts() - before; n > int64(used) {
		t.Errorf("the stage request took %d mounts for files on %d cartridges", n, used)
	}
	// Once the recalls have all ended (those of cancelled files too,
	// which still run), archiveinfo says what ls -l says.
	var ls string
	for i := 0; ; i++ {
		ls = s.ok("ls", "-l", "/stage")
		if !strings.Contains(ls, "staging") && !strings.Contains(s.ok("admin", "queue"), "/stage") || i > 600 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, _ := json.Marshal(map[string][]string{"paths": paths})
	req, _ := http.NewRequest("POST", s.scheme()+"://"+s.addr+"/api/v1/archiveinfo", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info []struct{ Path, Locality string }
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || len(info) != len(paths) {
		t.Fatalf("archiveinfo: %d entries, %v", len(info), err)
	}
	locality := map[string]string{}
	for _, i := range info {
		locality[i.Path] = i.Locality
	}
	want := map[string]string{"disk+tape": "DISK_AND_TAPE", "tape": "TAPE", "staging": "TAPE", "disk": "DISK"}
	for _, line := range strings.Split(strings.TrimSpace(ls), "\n") {
		f := strings.Fields(line)
		p := "/stage/" + f[len(f)-1]
		if got := locality[p]; got != want[f[len(f)-2]] {
			t.Errorf("%s: archiveinfo %s, ls -l %s", p, got, f[len(f)-2])
		}
	}
	if sum.Completed != 500 {
		t.Errorf("%d files of the half not cancelled completed", sum.Completed)
	}
}
