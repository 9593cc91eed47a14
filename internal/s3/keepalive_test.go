package s3

import (
	"bytes"
	"encoding/xml"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestKeepAlive: a slow answer that ends before KeepAlive is an ordinary
// response; one that runs longer sends 200, the XML declaration and
// spaces, then its result or its error as the body, which parses as the
// document it is.
func TestKeepAlive(t *testing.T) {
	type result struct {
		XMLName xml.Name `xml:"CompleteMultipartUploadResult"`
		ETag    string
	}
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		fail      bool
		status    int
		spaces    bool
	}{
		{"fast result", time.Hour, false, 200, false},
		{"fast error", time.Hour, true, 500, false},
		{"slow result", time.Millisecond, false, 200, true},
		{"slow error", time.Millisecond, true, 200, true},
		{"never", -1, false, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			q := &request{g: New(nil, Config{KeepAlive: tc.keepAlive}), w: rec, r: httptest.NewRequest("POST", "/b/k?uploadId=x", nil), id: "REQ"}
			q.slow()
			if tc.spaces {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
					q.ka.mu.Lock()
					sent := q.ka.sent
					q.ka.mu.Unlock()
					if sent {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("no keep-alive sent")
					}
				}
				time.Sleep(5 * time.Millisecond) // a few spaces
			}
			if tc.fail {
				q.fail(s3err("InternalError", 500, "the copy failed"))
			} else if e := q.reply(200, result{ETag: `"e-2"`}); e != nil {
				t.Fatal(e)
			}
			q.ka.end() // as ServeHTTP does; a second end is harmless
			body := rec.Body.Bytes()
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if !bytes.HasPrefix(body, []byte(xml.Header)) || bytes.Count(body, []byte("<?xml")) != 1 {
				t.Fatalf("body does not start with one XML declaration: %q", body)
			}
			if got := bytes.HasPrefix(body[len(xml.Header):], []byte(" ")); got != tc.spaces {
				t.Fatalf("spaces after the declaration: %v, want %v: %q", got, tc.spaces, body)
			}
			if tc.fail {
				var e xmlError
				if err := xml.Unmarshal(body, &e); err != nil || e.Code != "InternalError" || !strings.Contains(e.Message, "copy failed") {
					t.Fatalf("error body %q: %v %+v", body, err, e)
				}
				return
			}
			var r result
			if err := xml.Unmarshal(body, &r); err != nil || r.ETag != `"e-2"` {
				t.Fatalf("result body %q: %v %+v", body, err, r)
			}
		})
	}
}

// TestLockUpload: Completes of one upload run one at a time; the lock
// of an upload nobody holds is forgotten.
func TestLockUpload(t *testing.T) {
	g := New(nil, Config{})
	unlock := g.lockUpload("u1")
	got := make(chan struct{})
	go func() {
		u := g.lockUpload("u1")
		close(got)
		u()
	}()
	other := g.lockUpload("u2") // another upload is not held up
	other()
	select {
	case <-got:
		t.Fatal("a second Complete of the same upload did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	unlock()
	<-got
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.uploads) != 0 {
		t.Fatalf("locks left: %v", g.uploads)
	}
}
