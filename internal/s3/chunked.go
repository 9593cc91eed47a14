package s3

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// maxChunkLine bounds a chunk header or trailer line, maxTrailers the
// trailer lines: a body is the client's to shape, the gateway's memory
// is not.
const (
	maxChunkLine = 4096
	maxTrailers  = 16
)

// chunkedReader decodes an aws-chunked body: "SIZE[;chunk-signature=SIG]
// \r\n DATA \r\n" chunks, a zero-size last chunk, then trailer lines
// ("x-amz-checksum-crc32:…") and, when the trailer is signed,
// "x-amz-trailer-signature:…", then an empty line. With a signing key it
// checks each chunk's signature, chained from the request's: a body
// altered in flight fails before it could be committed, since the caller
// commits only after reading to EOF.
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html
type chunkedReader struct {
	br        *bufio.Reader
	key       []byte // nil: unsigned chunks
	sig       *sigRequest
	prev      string // the previous signature in the chain
	signedTrl bool   // the trailer carries x-amz-trailer-signature
	left      int64  // bytes of the current chunk still to read
	chunkSig  string
	h         hash.Hash
	trailers  map[string]string
	err       error
}

func newChunkedReader(body io.Reader, key []byte, s *sigRequest) *chunkedReader {
	cr := &chunkedReader{br: bufio.NewReaderSize(body, 64<<10), key: key, sig: s, left: -1, trailers: map[string]string{}}
	if key != nil {
		cr.prev, cr.h = s.signature, sha256.New()
		cr.signedTrl = s.payload == streamingSignedTrailer
	}
	return cr
}

var errChunkSig = s3err("SignatureDoesNotMatch", 403, "The chunk signature we calculated does not match the signature you provided")

func errChunked(format string, args ...any) *Error {
	return s3err("IncompleteBody", 400, "aws-chunked body: "+format, args...)
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		if c.left == 0 { // the end of a chunk's data
			if err := c.endChunk(); err != nil {
				c.err = err
				return 0, err
			}
		}
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	if err == io.EOF {
		err = errChunked("the body ended inside a chunk")
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// line reads one CRLF-terminated line.
func (c *chunkedReader) line() (string, error) {
	var b []byte
	for {
		frag, err := c.br.ReadSlice('\n')
		b = append(b, frag...)
		if len(b) > maxChunkLine {
			return "", errChunked("a line longer than %d bytes", maxChunkLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", errChunked("the body ended early")
		}
		if err != nil {
			return "", err
		}
		break
	}
	s := string(b)
	if !strings.HasSuffix(s, "\r\n") {
		return "", errChunked("a line not ended by CRLF")
	}
	return s[:len(s)-2], nil
}

// chunkStringToSign is what a chunk's signature signs.
func (c *chunkedReader) chunkStringToSign(sum []byte) string {
	return "AWS4-HMAC-SHA256-PAYLOAD\n" + c.sig.amzDate + "\n" + c.sig.scope() + "\n" + c.prev + "\n" + emptySHA256 + "\n" + hex.EncodeToString(sum)
}

// endChunk reads the CRLF after a chunk's data and checks its signature.
func (c *chunkedReader) endChunk() error {
	if l, err := c.line(); err != nil || l != "" {
		if err == nil {
			err = errChunked("chunk data longer than its size")
		}
		return err
	}
	return c.checkChunk()
}

func (c *chunkedReader) checkChunk() error {
	if c.key == nil {
		return nil
	}
	want := hex.EncodeToString(hmacSHA256(c.key, c.chunkStringToSign(c.h.Sum(nil))))
	if !hmac.Equal([]byte(want), []byte(c.chunkSig)) {
		return errChunkSig
	}
	c.prev = want
	c.h.Reset()
	return nil
}

// nextChunk reads a chunk header; at the last chunk it reads the
// trailer and returns io.EOF.
func (c *chunkedReader) nextChunk() error {
	l, err := c.line()
	if err != nil {
		return err
	}
	size, ext, _ := strings.Cut(l, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return errChunked("chunk size %q", size)
	}
	c.chunkSig = ""
	if sig, ok := strings.CutPrefix(ext, "chunk-signature="); ok {
		c.chunkSig = sig
	}
	if c.key != nil && c.chunkSig == "" {
		return errChunked("a chunk without its signature")
	}
	if n > 0 {
		c.left = n
		return nil
	}
	if err := c.checkChunk(); err != nil { // the empty last chunk is signed too
		return err
	}
	if err := c.readTrailer(); err != nil {
		return err
	}
	return io.EOF
}

// readTrailer reads the trailer lines up to the empty line that ends the
// body, checking the trailer's signature when it has one.
func (c *chunkedReader) readTrailer() error {
	var signed strings.Builder
	var trlSig string
	for i := 0; ; i++ {
		l, err := c.line()
		if err != nil {
			if i == 0 && c.key != nil && !c.signedTrl {
				return nil // a body without a trailer may just end (some clients)
			}
			return err
		}
		if l == "" {
			break
		}
		if i >= maxTrailers {
			return errChunked("more than %d trailer lines", maxTrailers)
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return errChunked("trailer line %q", l)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "x-amz-trailer-signature" {
			trlSig = strings.TrimSpace(v)
			continue
		}
		c.trailers[k] = strings.TrimSpace(v)
		signed.WriteString(k + ":" + strings.TrimSpace(v) + "\n")
	}
	if !c.signedTrl {
		return nil
	}
	sum := sha256.Sum256([]byte(signed.String()))
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + c.sig.amzDate + "\n" + c.sig.scope() + "\n" + c.prev + "\n" + hex.EncodeToString(sum[:])
	want := hex.EncodeToString(hmacSHA256(c.key, sts))
	if !hmac.Equal([]byte(want), []byte(trlSig)) {
		return fmt.Errorf("%w (trailer)", errChunkSig)
	}
	return nil
}
