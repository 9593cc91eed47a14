package tapeserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/tape"
)

// A signature checks for its method, path and time, and nothing else.
func TestCallSignature(t *testing.T) {
	key := callKey([]byte("secret"))
	now := time.Unix(1_800_000_000, 0)
	sig := signCall(key, "POST", "/v1/tape/mount", now)
	for _, c := range []struct {
		name, method, path, sig string
		at                      time.Time
		ok                      bool
	}{
		{"as signed", "POST", "/v1/tape/mount", sig, now, true},
		{"a little later", "POST", "/v1/tape/mount", sig, now.Add(30 * time.Second), true},
		{"too late", "POST", "/v1/tape/mount", sig, now.Add(2 * time.Minute), false},
		{"from the future", "POST", "/v1/tape/mount", sig, now.Add(-2 * time.Minute), false},
		{"another path", "POST", "/v1/tape/erase", sig, now, false},
		{"another method", "GET", "/v1/tape/mount", sig, now, false},
		{"another key", "POST", "/v1/tape/mount", signCall(callKey([]byte("other")), "POST", "/v1/tape/mount", now), now, false},
		{"none", "POST", "/v1/tape/mount", "", now, false},
		{"no time", "POST", "/v1/tape/mount", sig[len("1800000000"):], now, false},
	} {
		if got := checkCall(key, c.method, c.path, c.sig, c.at); got != c.ok {
			t.Errorf("%s: accepted %v, want %v", c.name, got, c.ok)
		}
	}
}

// Errors arrive as the sentinels they were: the core tells a failed drive
// from a full cartridge from a damaged disk copy.
func TestErrorsTravel(t *testing.T) {
	for _, sent := range []error{tape.ErrDriveFailed, tape.ErrWriteFailed, tape.ErrFull, tape.ErrNotMounted, tape.ErrUnreadable, tape.ErrRobot,
		tape.ErrBusy, tape.ErrNoSuchFile, tape.ErrNoSuchVolume, tape.ErrNoSuchDrive, api.ErrCorrupt, api.ErrOffline, api.ErrInvalid} {
		b, _ := json.Marshal(encodeErr(&FileError{Index: 3, Err: sent}))
		var e errBody
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		got := e.err()
		var fe *FileError
		if !errors.Is(got, sent) || !errors.As(got, &fe) || fe.Index != 3 {
			t.Errorf("%v arrived as %#v", sent, got)
		}
	}
}

// Whatever arrives in a signature header or an error body is checked or
// decoded without a panic.
func FuzzWire(f *testing.F) {
	key := callKey([]byte("secret"))
	now := time.Unix(1_800_000_000, 0)
	f.Add(signCall(key, "POST", "/v1/tape/mount", now), []byte(`{"kind":"full","msg":"x","index":2}`))
	f.Add("1800000000.zz", []byte(`{"kind":"api:corrupt","msg":"bad"}`))
	f.Add("", []byte(`{"kind":"api:","index":-1}`))
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		checkCall(key, "POST", "/v1/tape/mount", sig, now)
		var e errBody
		if json.Unmarshal(body, &e) == nil {
			if err := e.err(); err == nil || !strings.HasSuffix(err.Error(), e.Msg) {
				t.Fatalf("%+v decoded as %v", e, err)
			}
		}
	})
}
