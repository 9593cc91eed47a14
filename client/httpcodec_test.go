package client

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-storage/strata/internal/api"
)

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, raw  string
		status     int
		body       string
		close      bool
		header     map[string]string // kept headers to check
		err        bool
		afterReply string // what the connection holds after the body
	}{
		{name: "length", raw: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}next", status: 200, body: "{}", header: map[string]string{"Content-Type": "application/json"}, afterReply: "next"},
		{name: "list page", raw: "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nStrata-Next: b%20c\r\n\r\n[]\n", status: 200, body: "[]\n", header: map[string]string{api.ListNextHeader: "b%20c"}},
		{name: "chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nnext", status: 200, body: "abcde", afterReply: "next"},
		{name: "no framing: to the end", raw: "HTTP/1.1 500 Internal Server Error\r\n\r\noops", status: 500, body: "oops", close: true},
		{name: "a TLS server's answer to plain HTTP", raw: "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n", status: 400, body: "Client sent an HTTP request to an HTTPS server.\n", close: true},
		{name: "close", raw: "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", status: 404, close: true},
		{name: "no content", raw: "HTTP/1.1 204 No Content\r\n\r\nnext", status: 204, afterReply: "next"},
		{name: "LF only", raw: "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", status: 200, body: "x"},
		{name: "no reason", raw: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", status: 200},
		{name: "two lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", err: true},
		{name: "bad length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: true},
		{name: "gzip", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: true},
		{name: "not HTTP", raw: "SSH-2.0-OpenSSH_9.2\r\n", err: true},
		{name: "bad code", raw: "HTTP/1.1 2x0 OK\r\n\r\n", err: true},
		{name: "informational", raw: "HTTP/1.1 100 Continue\r\n\r\n", err: true},
		{name: "header without colon", raw: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", err: true},
		{name: "space before colon", raw: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", err: true},
		{name: "cut short", raw: "HTTP/1.1 200 OK\r\nContent-Len", err: true},
		{name: "empty", raw: "", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.raw))
			resp, err := readResponse(br)
			if tc.err {
				if err == nil {
					t.Fatalf("read %q: no error", tc.raw)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.status != tc.status || string(b) != tc.body || resp.close != tc.close {
				t.Fatalf("status %d, body %q, close %v; want %d, %q, %v", resp.status, b, resp.close, tc.status, tc.body, tc.close)
			}
			for k, v := range tc.header {
				if got := resp.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if rest, _ := io.ReadAll(br); string(rest) != tc.afterReply {
				t.Errorf("after the reply %q, want %q", rest, tc.afterReply)
			}
		})
	}
}

// What request.write sends is what net/http's server reads.
func TestRequestWrite(t *testing.T) {
	for _, r := range []request{
		{method: "GET", uri: "/v1/stat?path=%2Fa+b"},
		{method: "POST", uri: "/v1/creates", body: []byte(`{"items":[]}`), hasBody: true, token: "strata_x_y"},
		{method: "POST", uri: "/v1/migrate"},
		{method: "POST", uri: "/prefix/v1/remove", body: []byte(`{"path":"/f"}`), hasBody: true, actor: "alice"},
	} {
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		if err := r.check("127.0.0.1:7420"); err != nil {
			t.Fatal(err)
		}
		if err := r.write(bw, "127.0.0.1:7420"); err != nil {
			t.Fatal(err)
		}
		bw.Flush()
		req, err := http.ReadRequest(bufio.NewReader(&buf))
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.uri, err)
		}
		body, _ := io.ReadAll(req.Body)
		switch {
		case req.Method != r.method || req.RequestURI != r.uri || req.Host != "127.0.0.1:7420" || !bytes.Equal(body, r.body):
			t.Errorf("read %s %s host %s body %q, wrote %+v", req.Method, req.RequestURI, req.Host, body, r)
		case r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token:
			t.Errorf("Authorization %q", req.Header.Get("Authorization"))
		case req.Header.Get(api.OnBehalfOf) != r.actor:
			t.Errorf("%s %q, want %q", api.OnBehalfOf, req.Header.Get(api.OnBehalfOf), r.actor)
		case r.hasBody && req.Header.Get("Content-Type") != "application/json":
			t.Errorf("Content-Type %q", req.Header.Get("Content-Type"))
		}
	}
	for _, r := range []request{
		{method: "GET", uri: "/v1/stat", token: "a\r\nX-Evil: 1"},
		{method: "GET", uri: "/v1/stat", actor: "bob\n"},
		{method: "GET", uri: "/v1/stat x"},
		{method: "", uri: "/v1/stat"},
	} {
		if err := r.check("h"); err == nil {
			t.Errorf("%q %q token %q actor %q: checked as fine", r.method, r.uri, r.token, r.actor)
		}
	}
}

// FuzzReadResponse holds readResponse to net/http's ReadResponse: it never
// panics, and where both read a reply they agree on its status, its body
// (where both read it whole: they differ on what trailers they allow
// after the last chunk) and the headers the client uses.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
		"HTTP/1.1 200 OK\r\nStrata-Next: b\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ours, err := readResponse(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		ourBody, ourErr := io.ReadAll(io.LimitReader(ours.body, 1<<20))
		theirs, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			return // stricter than ours: our own core's replies are checked above
		}
		theirBody, theirErr := io.ReadAll(io.LimitReader(theirs.Body, 1<<20))
		if ours.status != theirs.StatusCode {
			t.Fatalf("%q: status %d, net/http %d", raw, ours.status, theirs.StatusCode)
		}
		if ourErr == nil && theirErr == nil && !bytes.Equal(ourBody, theirBody) {
			t.Fatalf("%q: body %q, net/http %q", raw, ourBody, theirBody)
		}
		if got, want := ours.header.Get(api.ListNextHeader), theirs.Header.Get(api.ListNextHeader); got != want {
			t.Fatalf("%q: %s %q, net/http %q", raw, api.ListNextHeader, got, want)
		}
	})
}
