package s3

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"
)

// The additional checksums S3 clients send (x-amz-checksum-ALG in a header
// or an aws-chunked trailer), each the base64 of the big-endian digest.
var checksumAlgs = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64nvme) },
	"sha1":      sha1.New,
	"sha256":    sha256.New,
}

// crc64nvme is CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5,
// initial and final XOR all ones, which is how hash/crc64 computes).
var crc64nvme = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// bodyCheck hashes a request body as it is read: MD5 always (the ETag),
// SHA-256 when the signature covers the payload's hash, and each
// additional checksum the client declared.
type bodyCheck struct {
	r        io.Reader
	n        int64
	md5      hash.Hash
	sha      hash.Hash // nil unless wantSHA is set
	wantSHA  string
	wantMD5  string // Content-MD5, base64; "" if none
	sums     map[string]hash.Hash
	declared map[string]string // alg → expected value; "" until a trailer says
	trailer  func() map[string]string
	// extra are checksums computed though the client sent none (also).
	extra map[string]hash.Hash
}

// also computes the checksum of algorithm alg of the body too, if the
// client did not declare it: a part of an upload whose FULL_OBJECT
// checksum Complete combines from its parts' (crccombine.go).
func (b *bodyCheck) also(alg string) {
	if mk := checksumAlgs[alg]; mk != nil && b.sums[alg] == nil {
		if b.extra == nil {
			b.extra = map[string]hash.Hash{}
		}
		b.extra[alg] = mk()
	}
}

// newBodyCheck reads what r's headers promise about its body. e is
// InvalidDigest or InvalidRequest for a malformed promise.
func newBodyCheck(body io.Reader, r *http.Request, payload string) (*bodyCheck, *Error) {
	b := &bodyCheck{r: body, md5: md5.New(), sums: map[string]hash.Hash{}, declared: map[string]string{}}
	if len(payload) == 64 {
		if _, err := hex.DecodeString(payload); err != nil {
			return nil, s3err("InvalidArgument", 400, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-… or a SHA-256 in hex")
		}
		b.sha, b.wantSHA = sha256.New(), payload
	} else if payload != "" && payload != unsignedPayload && !strings.HasPrefix(payload, "STREAMING-") {
		return nil, s3err("InvalidArgument", 400, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-… or a SHA-256 in hex")
	}
	if v := r.Header.Get("Content-MD5"); v != "" {
		if d, err := base64.StdEncoding.DecodeString(v); err != nil || len(d) != md5.Size {
			return nil, s3err("InvalidDigest", 400, "The Content-MD5 you specified was invalid")
		}
		b.wantMD5 = v
	}
	for alg, mk := range checksumAlgs {
		if v := r.Header.Get("X-Amz-Checksum-" + alg); v != "" {
			b.sums[alg], b.declared[alg] = mk(), v
		}
	}
	for _, t := range strings.Split(r.Header.Get("X-Amz-Trailer"), ",") {
		alg, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(t)), "x-amz-checksum-")
		if !ok {
			continue
		}
		mk := checksumAlgs[alg]
		if mk == nil {
			return nil, s3err("InvalidRequest", 400, "The trailer %q names an unsupported checksum", t)
		}
		b.sums[alg] = mk()
	}
	if len(b.sums) > 1 {
		return nil, s3err("InvalidRequest", 400, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
	}
	return b, nil
}

func (b *bodyCheck) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	b.md5.Write(p[:n])
	if b.sha != nil {
		b.sha.Write(p[:n])
	}
	for _, h := range b.sums {
		h.Write(p[:n])
	}
	for _, h := range b.extra {
		h.Write(p[:n])
	}
	return n, err
}

// verify compares what was read with what was promised, once the body
// has been read to its end.
func (b *bodyCheck) verify() *Error {
	if b.sha != nil && hex.EncodeToString(b.sha.Sum(nil)) != b.wantSHA {
		return s3err("XAmzContentSHA256Mismatch", 400, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	if b.wantMD5 != "" && base64.StdEncoding.EncodeToString(b.md5.Sum(nil)) != b.wantMD5 {
		return s3err("BadDigest", 400, "The Content-MD5 you specified did not match what we received.")
	}
	var trl map[string]string
	if b.trailer != nil {
		trl = b.trailer()
	}
	for alg, h := range b.sums {
		want := b.declared[alg]
		if want == "" {
			want = trl["x-amz-checksum-"+alg]
		}
		if want == "" {
			return s3err("InvalidRequest", 400, "The x-amz-checksum-%s the trailer announced did not come", alg)
		}
		if got := base64.StdEncoding.EncodeToString(h.Sum(nil)); got != want {
			return s3err("BadDigest", 400, "The %s you specified did not match the calculated checksum.", strings.ToUpper(alg))
		}
	}
	return nil
}

// etag is the body's MD5 in hex: a single-part object's ETag.
func (b *bodyCheck) etag() string { return hex.EncodeToString(b.md5.Sum(nil)) }

// checksums are the verified additional checksums, alg → base64 value.
func (b *bodyCheck) checksums() map[string]string {
	out := map[string]string{}
	for _, hs := range []map[string]hash.Hash{b.sums, b.extra} {
		for alg, h := range hs {
			out[alg] = base64.StdEncoding.EncodeToString(h.Sum(nil))
		}
	}
	return out
}
