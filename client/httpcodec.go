package client

// The control plane's HTTP/1.1 messages, written and parsed here rather
// than by net/http's Request.Write and ReadResponse: those build a URL, a
// header map with canonicalised keys for every response and a transfer
// writer for every request — about 10 µs of a control call's client CPU,
// a fifth of a stat's on this 2-core machine. A call here is one request
// line and at most four header lines out, and a status line, the framing
// headers (Content-Length, Transfer-Encoding, Connection) and whatever
// else the core sends (kept in an http.Header, made only when there is
// any) back. Chunked bodies are read by net/http/httputil.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/internal/api"
)

// request is one control call as the transport writes it.
type request struct {
	method string
	uri    string // the path and query, escaped
	token  string // bearer token, or ""
	actor  string // api.OnBehalfOf, or ""
	body   []byte
	// hasBody: send body (JSON) even when empty; a POST without one
	// says Content-Length: 0.
	hasBody bool
}

// check reports whether r can be written for host: a request line of
// three words, header values without control characters.
func (r *request) check(host string) error {
	for _, v := range []string{r.method, r.uri, host} {
		if v == "" || strings.ContainsAny(v, " \t") || !validHeaderValue(v) {
			return fmt.Errorf("request %q %q for %q: not a request line", r.method, r.uri, host)
		}
	}
	if !validHeaderValue(r.token) || !validHeaderValue(r.actor) {
		return fmt.Errorf("request %s %s: a control character in a header value", r.method, r.uri)
	}
	return nil
}

// write writes r, checked, for host.
func (r *request) write(bw *bufio.Writer, host string) error {
	bw.WriteString(r.method)
	bw.WriteByte(' ')
	bw.WriteString(r.uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if r.hasBody {
		bw.WriteString("Content-Type: application/json\r\n")
	}
	if r.hasBody || r.method == http.MethodPost {
		var n [20]byte
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(n[:0], int64(len(r.body)), 10))
		bw.WriteString("\r\n")
	}
	if r.token != "" {
		bw.WriteString("Authorization: Bearer ")
		bw.WriteString(r.token)
		bw.WriteString("\r\n")
	}
	if r.actor != "" {
		bw.WriteString(api.OnBehalfOf)
		bw.WriteString(": ")
		bw.WriteString(r.actor)
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	_, err := bw.Write(r.body)
	return err
}

// validHeaderValue reports whether v may go into a header line: no
// control characters but tab (a CR or LF would start a header of its own).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// response is a reply as the transport reads it.
type response struct {
	status int
	// statusText is the status line after the version ("404 Not Found").
	statusText string
	// header holds every header but Content-Length, Transfer-Encoding
	// and Connection; nil when there are none such.
	header http.Header
	body   io.Reader // framed: ends where the reply does
	// close: the connection ends with this reply.
	close bool
}

var errMalformed = errors.New("malformed HTTP response")

// maxHeaderLines bounds a reply's header, as net/http bounds it in bytes.
const maxHeaderLines = 100

// readResponse reads a reply's status line and header from br; its body
// is read through resp.body.
func readResponse(br *bufio.Reader) (*response, error) {
	line, err := readLine(br)
	if err != nil {
		return nil, err
	}
	resp := &response{}
	// HTTP/1.x NNN[ reason]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[7] < '0' || line[7] > '9' || line[8] != ' ' {
		return nil, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	http10 := line[7] == '0'
	resp.close = http10 // HTTP/1.0 closes unless it says keep-alive
	code := line[9:12]
	for _, c := range code {
		if c < '0' || c > '9' {
			return nil, fmt.Errorf("%w: status line %q", errMalformed, line)
		}
	}
	if len(line) > 12 && line[12] != ' ' {
		return nil, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	resp.status, _ = strconv.Atoi(string(code))
	if resp.status < 100 {
		return nil, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	resp.statusText = string(line[9:])
	length, chunked := int64(-1), false
	err = eachLine(br, "header", func(line []byte) error {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(k) == 0 || bytes.ContainsAny(k, " \t") {
			return fmt.Errorf("%w: header line %q", errMalformed, line)
		}
		v = bytes.Trim(v, " \t")
		switch {
		case equalFold(k, "Content-Length"):
			l, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || l < 0 || length >= 0 && l != length {
				return fmt.Errorf("%w: Content-Length %q", errMalformed, v)
			}
			length = l
		case equalFold(k, "Transfer-Encoding"):
			if !equalFold(v, "chunked") {
				return fmt.Errorf("%w: Transfer-Encoding %q", errMalformed, v)
			}
			chunked = !http10 // HTTP/1.0 has no chunks (RFC 9112, 6.1)
		case equalFold(k, "Connection"):
			switch {
			case equalFold(v, "close"):
				resp.close = true
			case equalFold(v, "keep-alive"):
				resp.close = false
			}
		default:
			if !validHeaderValue(string(v)) {
				return fmt.Errorf("%w: header line %q", errMalformed, line)
			}
			if resp.header == nil {
				resp.header = http.Header{}
			}
			resp.header.Add(string(k), string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case resp.status < 200:
		return nil, fmt.Errorf("%w: informational status %d", errMalformed, resp.status)
	case resp.status == http.StatusNoContent || resp.status == http.StatusNotModified:
		resp.body = eof{}
	case chunked:
		resp.body = &chunkedBody{r: httputil.NewChunkedReader(br), br: br}
	case length >= 0:
		resp.body = &io.LimitedReader{R: br, N: length}
		if length == 0 {
			resp.body = eof{}
		}
	default:
		resp.body, resp.close = br, true // to the end of the connection
	}
	return resp, nil
}

// chunkedBody reads a chunked body and then its trailer, up to the blank
// line that ends the reply (the chunked reader stops after the last
// chunk's size line).
type chunkedBody struct {
	r  io.Reader
	br *bufio.Reader
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != io.EOF {
		return n, err
	}
	if err := eachLine(b.br, "trailer", func([]byte) error { return nil }); err != nil {
		return n, err
	}
	b.r = eof{}
	return n, io.EOF
}

// eachLine calls fn with each line up to a blank one, at most
// maxHeaderLines of them (what names them in an error).
func eachLine(br *bufio.Reader, what string, fn func([]byte) error) error {
	for n := 0; ; n++ {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if n == maxHeaderLines {
			return fmt.Errorf("%w: more than %d %s lines", errMalformed, maxHeaderLines, what)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// eof is an empty body.
type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// readLine returns the next line without its CRLF (or LF); a line longer
// than br's buffer is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, fmt.Errorf("%w: a line of more than %d bytes", errMalformed, br.Size())
	case err == io.EOF && len(line) > 0:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// equalFold is ASCII case-insensitive equality of b and s.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
