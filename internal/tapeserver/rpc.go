package tapeserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/internal/api"
	"github.com/strata-storage/strata/internal/tape"
)

// Registration is what a tape server tells the core, every few seconds:
// where it takes requests, its drives, and the cartridges it can see.
type Registration struct {
	ID         string               `json:"id"`
	URL        string               `json:"url"` // http(s)://host:port
	Generation string               `json:"generation"`
	Drives     []tape.DriveInfo     `json:"drives"`
	Cartridges []tape.CartridgeInfo `json:"cartridges"`
	Proof      string               `json:"proof"`
}

// Registered is the core's answer.
type Registered struct {
	Epoch int64 `json:"epoch"`
}

// Proof is the MAC a tape server's registration carries under the cluster
// secret: only a host with the secret can offer the core drives.
func Proof(secret []byte, r Registration) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "tape-server\x00%s\x00%s\x00%s", r.ID, r.URL, r.Generation)
	for _, d := range r.Drives {
		fmt.Fprintf(m, "\x00%s", d.ID)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// callKey is the key the core signs its requests to tape servers with.
func callKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("strata tape server calls v1"))
	return m.Sum(nil)
}

// authHeader carries a request's signature: the time and a MAC of the
// method, path and time. A tape server accepts it for callSkew either
// side of its own clock, so a captured request cannot be sent later or to
// another operation (TLS keeps it from being captured at all).
const authHeader = "Strata-Tape-Auth"

const callSkew = time.Minute

func signCall(key []byte, method, path string, now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s %s %s", method, path, ts)
	return ts + "." + hex.EncodeToString(m.Sum(nil))
}

func checkCall(key []byte, method, path, sig string, now time.Time) bool {
	ts, _, ok := strings.Cut(sig, ".")
	if !ok {
		return false
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(t, 0)); d > callSkew || d < -callSkew {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(signCall(key, method, path, time.Unix(t, 0))))
}

// tapeErrors are the library's errors by the name they travel under: the
// core tells them apart (retry on another drive, another copy, give up),
// so they must arrive as themselves.
var tapeErrors = []struct {
	kind string
	err  error
}{
	{"drive_failed", tape.ErrDriveFailed},
	{"write_failed", tape.ErrWriteFailed},
	{"unreadable", tape.ErrUnreadable},
	{"robot", tape.ErrRobot},
	{"full", tape.ErrFull},
	{"not_mounted", tape.ErrNotMounted},
	{"busy", tape.ErrBusy},
	{"no_such_file", tape.ErrNoSuchFile},
	{"no_such_volume", tape.ErrNoSuchVolume},
	{"no_such_drive", tape.ErrNoSuchDrive},
}

// errBody is an error as it travels.
type errBody struct {
	Kind  string `json:"kind"` // a tapeErrors kind or "api:" and an API code
	Msg   string `json:"msg"`
	Index *int   `json:"index,omitempty"` // a FileError's file
}

func encodeErr(err error) *errBody {
	if err == nil {
		return nil
	}
	b := &errBody{Msg: err.Error()}
	var fe *FileError
	if errors.As(err, &fe) {
		b.Index = &fe.Index
		b.Msg = fe.Err.Error()
	}
	for _, t := range tapeErrors {
		if errors.Is(err, t.err) {
			b.Kind = t.kind
			return b
		}
	}
	code, _ := api.CodeOf(err)
	b.Kind = "api:" + code
	return b
}

// remoteError is a library error from a tape server: its message, and
// the sentinel it is.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.is }

func (b *errBody) err() error {
	var err error = &api.Error{Code: strings.TrimPrefix(b.Kind, "api:"), Msg: b.Msg}
	for _, t := range tapeErrors {
		if t.kind == b.Kind {
			err = &remoteError{msg: b.Msg, is: t.err}
		}
	}
	if b.Index != nil {
		return &FileError{Index: *b.Index, Err: err}
	}
	return err
}

// ErrLost is a tape server that did not answer: its process or host is
// gone, or the network between. Its drives count as failed until it
// registers again; what it was writing is written again elsewhere.
var ErrLost = errors.New("tape server lost")
