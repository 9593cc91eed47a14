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
	"sync"

	md5simd "github.com/minio/md5-simd"
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

// md5Lanes hashes the MD5s of large bodies side by side, up to 16 at once
// in one core's AVX-512 lanes (8 in AVX2's; crypto/md5 where neither is
// there): every byte an S3 client PUTs is hashed with MD5 for its ETag,
// and MD5 is one serial chain a stream at ~0.55 GB/s a core here, the
// gateway's largest cost in a multipart upload (a third of both cores
// while the aws cli's CRT client sends 8 parts at once). Measured here
// with 8 streams of 1 MiB writes: crypto/md5 1.06 GB/s on two cores,
// md5-simd 2.67 GB/s on one; one stream alone hashes at the same pace
// either way (0.50 against 0.53 GB/s). MinIO hashes with it for the same
// reason.
var md5Lanes = sync.OnceValue(md5simd.NewServer)

// laneMin is the smallest body hashed in md5Lanes: below it the trips
// to the lanes' goroutine cost more than the hashing.
const laneMin = 1 << 20

// newMD5 returns an MD5 for a body of size bytes and what frees it.
func newMD5(size int64) (hash.Hash, func()) {
	if size >= laneMin {
		h := md5Lanes().NewHash()
		return h, h.Close
	}
	return md5.New(), func() {}
}

// bodyCheck hashes a request body as it is read: MD5 always (the ETag),
// SHA-256 when the signature covers the payload's hash, and each
// additional checksum the client declared.
type bodyCheck struct {
	r        io.Reader
	n        int64
	md5      hash.Hash
	md5Sum   []byte    // the MD5, once the body is read
	free     func()    // gives md5 back
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

// newBodyCheck reads what r's headers promise about its body of size
// bytes. e is InvalidDigest or InvalidRequest for a malformed promise.
// The caller closes it.
func newBodyCheck(body io.Reader, r *http.Request, payload string, size int64) (*bodyCheck, *Error) {
	b := &bodyCheck{r: body, sums: map[string]hash.Hash{}, declared: map[string]string{}}
	b.md5, b.free = newMD5(size)
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
	if b.wantMD5 != "" && base64.StdEncoding.EncodeToString(b.sumMD5()) != b.wantMD5 {
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

// sumMD5 is the MD5 of what was read.
func (b *bodyCheck) sumMD5() []byte {
	if b.md5Sum == nil {
		b.md5Sum = b.md5.Sum(nil)
	}
	return b.md5Sum
}

// etag is the body's MD5 in hex: a single-part object's ETag.
func (b *bodyCheck) etag() string { return hex.EncodeToString(b.sumMD5()) }

// close frees the body's hashes.
func (b *bodyCheck) close() { b.free() }

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
