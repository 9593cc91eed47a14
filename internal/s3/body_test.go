package s3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// failWriter fails every write, as an upload does once the request's
// context is cancelled.
type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// TestReadBodyCutShort: a body shorter than its declared length is the
// client's error (400 IncompleteBody) whether its end fails the read or,
// once net/http has cancelled the request's context at the client's end
// of the connection, the write of what it did send; a write failing on a
// live request is the server's (500).
func TestReadBodyCutShort(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		dst    io.Writer
		status int
	}{
		{"short body", context.Background(), io.Discard, 400},
		{"short body, write fails after the client hung up", gone, failWriter{context.Canceled}, 400},
		{"write fails on a live request", context.Background(), failWriter{errors.New("mover gone")}, 500},
	} {
		r, _ := http.NewRequest("PUT", "http://h/b/k", nil)
		body := strings.NewReader("only")
		bc, e := newBodyCheck(body, r, unsignedPayload, 10)
		if e != nil {
			t.Fatal(e)
		}
		q := &request{r: r, ctx: c.ctx, size: 10, object: "k"}
		e = q.readBody(c.dst, bc, make([]byte, 4096))
		bc.close()
		if e == nil || e.Status != c.status {
			t.Errorf("%s: %v, want status %d", c.name, e, c.status)
		}
	}
}
