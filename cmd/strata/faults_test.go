package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tape faults that do not go away, as a site would rehearse them with the
// emulator's faults on a running server: with every drive failed a recall
// waits and says why (no invented estimate) and a migration fails at once;
// a drive comes back when repaired and put online; a cartridge out of
// service is neither read nor written; a robot that fails every move makes
// a recall fail after bounded tries, with one line saying so.
func TestTapeFaultsThroughTheCLI(t *testing.T) {
	s := newServer(t, "[hsm]\nmount_retry = \"20ms\"") // rounds of mounts 20, 40, 80, 160 ms apart
	src := filepath.Join(s.dir, "src")
	data := writeRandom(t, src, 3<<20)
	out := filepath.Join(s.dir, "out")
	same := func(what string) {
		t.Helper()
		if b, _ := os.ReadFile(out); !bytes.Equal(b, data) {
			t.Fatalf("%s: other bytes", what)
		}
	}
	fails := func(want string, args ...string) {
		t.Helper()
		_, errs, code := s.run(args...)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) {
			t.Fatalf("strata %s: exit %d, %q (want one line with %q)", strings.Join(args, " "), code, errs, want)
		}
	}
	s.ok("put", src, "/f")
	s.ok("migrate", "/f")
	s.ok("purge", "/f")
	s.ok("put", src, "/g")
	var drives []struct{ ID, State, Volume string }
	json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &drives)
	if len(drives) < 2 {
		t.Fatalf("drives: %+v", drives)
	}

	for _, d := range drives {
		s.ok("admin", "library", "fail-drive", d.ID)
	}
	if st := s.ok("stage", "/f"); !strings.Contains(st, "waiting: no usable tape drive") {
		t.Fatalf("stage with every drive failed:\n%s", st)
	}
	if v := s.ok("admin", "drives"); strings.Count(v, "failed (the library reports it)") != len(drives) {
		t.Fatalf("every drive failed:\n%s", v)
	}
	fails("waiting: no usable tape drive", "get", "-f", "--no-wait", "/f", out)
	fails("no usable tape drive", "migrate", "/g")
	fails("still reports it failed", "admin", "drives", "online", drives[0].ID)
	s.ok("admin", "library", "repair-drive", drives[0].ID)
	s.ok("admin", "drives", "online", drives[0].ID)
	s.ok("get", "-f", "/f", out)
	same("recall after the repair")

	for _, d := range drives[1:] {
		s.ok("admin", "library", "repair-drive", d.ID)
		s.ok("admin", "drives", "online", d.ID)
	}
	s.ok("admin", "drives", "offline", drives[1].ID)
	if v := s.ok("admin", "drives"); !strings.Contains(v, drives[1].ID+"  offline") {
		t.Fatalf("a drive taken offline:\n%s", v)
	}
	s.ok("admin", "drives", "online", drives[1].ID)

	var st struct {
		Layout struct{ Tapes []struct{ Volume string } }
	}
	json.Unmarshal([]byte(s.ok("stat", "--json", "/f")), &st)
	vol := st.Layout.Tapes[0].Volume
	s.ok("purge", "/f")
	s.ok("admin", "tapes", "offline", vol)
	if v := s.ok("admin", "tapes"); !strings.Contains(v, "offline (admin)") {
		t.Fatalf("a cartridge taken offline:\n%s", v)
	}
	fails("out of service", "get", "-f", "/f", out)
	s.ok("migrate", "/g") // not to the cartridge out of service
	json.Unmarshal([]byte(s.ok("stat", "--json", "/g")), &st)
	if st.Layout.Tapes[0].Volume == vol {
		t.Fatalf("migrated to %s, which is out of service", vol)
	}
	s.ok("admin", "tapes", "online", vol)
	s.ok("get", "-f", "/f", out)
	same("recall from the cartridge back in service")

	// The cartridge must be moved by the robot: take the drives holding
	// cartridges out of service (they give them back) and bring them back.
	s.ok("purge", "/f")
	json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &drives)
	for _, d := range drives {
		if d.Volume != "" {
			s.ok("admin", "drives", "offline", d.ID)
			s.ok("admin", "drives", "online", d.ID)
		}
	}
	s.ok("admin", "library", "robot-fail", "1000")
	fails("cannot mount", "get", "-f", "/f", out)
	s.ok("admin", "library", "robot-fail", "0")
	s.ok("get", "-f", "/f", out)
	same("recall once the robot works")
}

// A cartridge whose writes fail, as a site rehearses it: the migration
// goes on on another cartridge, "admin tapes" says why the first is
// read-only, and "online" puts it back once an admin has looked at it.
func TestCartridgeWriteErrorsThroughTheCLI(t *testing.T) {
	s := newServer(t, "")
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 1<<20)
	s.ok("put", src, "/f")
	var tapes []struct {
		Volume       string
		OutOfService string `json:"out_of_service"`
	}
	json.Unmarshal([]byte(s.ok("admin", "tapes", "--json")), &tapes)
	if len(tapes) < 2 {
		t.Fatalf("tapes: %+v", tapes)
	}
	// A new library's cartridges are all empty: a migration takes the
	// first.
	bad := tapes[0].Volume
	s.ok("admin", "library", "write-errors", bad)
	s.ok("migrate", "/f")
	var st struct {
		Layout struct{ Tapes []struct{ Volume string } }
	}
	json.Unmarshal([]byte(s.ok("stat", "--json", "/f")), &st)
	if len(st.Layout.Tapes) != 1 || st.Layout.Tapes[0].Volume == bad {
		t.Fatalf("migrated to %+v with %s failing writes", st.Layout.Tapes, bad)
	}
	state := func(vol string) string {
		var now []struct {
			Volume       string
			OutOfService string `json:"out_of_service"`
		}
		json.Unmarshal([]byte(s.ok("admin", "tapes", "--json")), &now)
		for _, tp := range now {
			if tp.Volume == vol {
				return tp.OutOfService
			}
		}
		return "no such cartridge"
	}
	if why := state(bad); !strings.HasPrefix(why, "read-only: a write in") {
		t.Fatalf("%s after a failed write: %q", bad, why)
	}
	if v := s.ok("admin", "tapes"); !strings.Contains(v, "read-only: a write in") {
		t.Fatalf("admin tapes does not say why:\n%s", v)
	}
	s.ok("admin", "library", "writable", bad)
	s.ok("admin", "tapes", "online", bad)
	if why := state(bad); why != "" {
		t.Fatalf("%s back online: %q", bad, why)
	}
	_, errs, code := s.run("admin", "library", "write-errors", "T99999")
	if code == 0 || !strings.Contains(errs, "T99999") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("write-errors on no such cartridge: exit %d, %q", code, errs)
	}
}

// What an admin takes out of service stays out when the server restarts
// (a cartridge sent off site, a drive waiting for its engineer), until the
// admin brings it back: the catalog keeps it.
func TestOutOfServiceSurvivesRestart(t *testing.T) {
	s := newServer(t, "")
	var drives []struct{ ID string }
	json.Unmarshal([]byte(s.ok("admin", "drives", "--json")), &drives)
	var tapes []struct{ Volume string }
	json.Unmarshal([]byte(s.ok("admin", "tapes", "--json")), &tapes)
	if len(drives) < 2 || len(tapes) < 2 {
		t.Fatalf("drives %+v, tapes %+v", drives, tapes)
	}
	drive, vol := drives[0].ID, tapes[0].Volume
	s.ok("admin", "drives", "offline", drive)
	s.ok("admin", "tapes", "offline", vol)

	out := func(list string) []string {
		var rows []struct {
			ID, Volume   string
			OutOfService string `json:"out_of_service"`
		}
		json.Unmarshal([]byte(s.ok("admin", list, "--json")), &rows)
		var out []string
		for _, r := range rows {
			if r.OutOfService != "" {
				out = append(out, r.ID+r.Volume+": "+r.OutOfService)
			}
		}
		return out
	}
	s.stop()
	s.start()
	if got := out("drives"); len(got) != 1 || got[0] != drive+": offline (admin)" {
		t.Fatalf("drives out of service after a restart: %q", got)
	}
	if got := out("tapes"); len(got) != 1 || got[0] != vol+": offline (admin)" {
		t.Fatalf("cartridges out of service after a restart: %q", got)
	}
	src := filepath.Join(s.dir, "src")
	writeRandom(t, src, 1<<20)
	s.ok("put", src, "/f")
	s.ok("migrate", "/f")
	var st struct {
		Layout struct{ Tapes []struct{ Volume string } }
	}
	json.Unmarshal([]byte(s.ok("stat", "--json", "/f")), &st)
	if len(st.Layout.Tapes) == 0 || st.Layout.Tapes[0].Volume == vol {
		t.Fatalf("migrated to %+v; %s is out of service", st.Layout.Tapes, vol)
	}

	s.ok("admin", "drives", "online", drive)
	s.ok("admin", "tapes", "online", vol)
	s.stop()
	s.start()
	if got := append(out("drives"), out("tapes")...); len(got) != 0 {
		t.Fatalf("out of service after being brought back and a restart: %q", got)
	}
}
