package s3

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/strata-storage/strata/client"
)

// An object's S3 metadata are the file's user.s3.* attributes.
const (
	xaETag     = "user.s3.etag"      // "ETAG FIXITY": the ETag, valid while the file's fixity is FIXITY
	xaHeader   = "user.s3.h."        // + lower-case header: Content-Type, Content-Encoding, …
	xaMeta     = "user.s3.meta."     // + name: x-amz-meta-NAME
	xaChecksum = "user.s3.checksum." // + algorithm: base64 of x-amz-checksum-ALG
	xaFolder   = "user.s3.folder"    // a directory made by PUT of "key/"
	// xaChecksumType is COMPOSITE for a multipart object whose checksum
	// is of its parts' (the others' are of the whole object).
	xaChecksumType = "user.s3.checksum-type"
)

// emptyETag is the MD5 of nothing.
var emptyETag = func() string { h := md5.Sum(nil); return hex.EncodeToString(h[:]) }()

// storedHeaders are the object headers S3 stores and returns with it.
var storedHeaders = []string{"Content-Type", "Content-Encoding", "Content-Disposition", "Content-Language", "Cache-Control", "Expires"}

// maxMetaSize is S3's limit on user metadata (names and values).
const maxMetaSize = 2 << 10

// metaAttrs reads a PUT's metadata headers into attributes.
func metaAttrs(h http.Header) (map[string][]byte, *Error) {
	attrs := map[string][]byte{}
	size := 0
	for name, vals := range h {
		l := strings.ToLower(name)
		if m, ok := strings.CutPrefix(l, "x-amz-meta-"); ok {
			v := strings.Join(vals, ",")
			size += len(m) + len(v)
			attrs[xaMeta+m] = []byte(v)
		}
	}
	if size > maxMetaSize {
		return nil, s3err("MetadataTooLarge", 400, "Your metadata headers exceed the maximum allowed metadata size (%d bytes)", maxMetaSize)
	}
	for _, name := range storedHeaders {
		v := h.Get(name)
		if name == "Content-Encoding" {
			v = withoutAWSChunked(v)
		}
		if v != "" {
			attrs[xaHeader+strings.ToLower(name)] = []byte(v)
		}
	}
	return attrs, nil
}

// withETag adds the ETag, bound to the fixity the file will have, and
// the verified checksums.
func withETag(attrs map[string][]byte, etag string, sums map[string]string) map[string][]byte {
	attrs[xaETag] = []byte(etag)
	for alg, v := range sums {
		attrs[xaChecksum+alg] = []byte(v)
	}
	return attrs
}

// etagOf is an object's ETag: the one stored with it while the file has
// not been written by other means since, else one made from its fixity
// (or its size and time): it changes whenever the content does.
func etagOf(fi *client.FileInfo, attrs map[string][]byte) string {
	if v, ok := attrs[xaETag]; ok {
		// A listing's entries carry no fixity: the stored ETag stands.
		etag, fix, _ := strings.Cut(string(v), " ")
		if fix == fi.Fixity || fi.Fixity == "" {
			return etag
		}
	}
	if _, d, ok := strings.Cut(fi.Fixity, ":"); ok && len(d) >= 32 {
		return d[:32]
	}
	return fmt.Sprintf("%x-%x", fi.Mtime.UnixNano(), fi.Size)
}

// setObjectHeaders writes an object's headers for GET and HEAD.
func (g *Gateway) setObjectHeaders(w http.ResponseWriter, fi *client.FileInfo, attrs map[string][]byte, etag string, checksums bool) {
	h := w.Header()
	h.Set("ETag", `"`+etag+`"`)
	h.Set("Last-Modified", fi.Mtime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "binary/octet-stream")
	for name, v := range attrs {
		switch {
		case strings.HasPrefix(name, xaHeader):
			h.Set(strings.TrimPrefix(name, xaHeader), string(v))
		case strings.HasPrefix(name, xaMeta):
			// As S3 sends them: lower case, which clients keep as the
			// metadata's names (Set would make "X-Amz-Meta-Run").
			h["x-amz-meta-"+strings.TrimPrefix(name, xaMeta)] = []string{string(v)}
		case checksums && strings.HasPrefix(name, xaChecksum):
			h.Set("x-amz-checksum-"+strings.TrimPrefix(name, xaChecksum), string(v))
			h.Set("x-amz-checksum-type", checksumType(attrs))
		}
	}
	if c := g.classOf(fi.COS); c != "STANDARD" {
		h.Set("x-amz-storage-class", c)
	}
	switch {
	case fi.Residency == client.ResidencyStaging:
		h.Set("x-amz-restore", `ongoing-request="true"`)
	case fi.PinnedUntil != nil && (fi.Residency == client.ResidencyDisk || fi.Residency == client.ResidencyBoth):
		h.Set("x-amz-restore", fmt.Sprintf(`ongoing-request="false", expiry-date="%s"`, fi.PinnedUntil.UTC().Format(http.TimeFormat)))
	}
}

// httpTime parses a conditional header's time.
func httpTime(v string) (time.Time, bool) {
	t, err := http.ParseTime(v)
	return t, err == nil
}

// withoutAWSChunked drops "aws-chunked" from a Content-Encoding: it
// describes the request's body, not the object.
func withoutAWSChunked(v string) string {
	var keep []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			keep = append(keep, e)
		}
	}
	return strings.Join(keep, ", ")
}

// checksumType is the type of an object's checksum: COMPOSITE for a
// multipart object's checksum of its parts' checksums, else FULL_OBJECT.
func checksumType(attrs map[string][]byte) string {
	if t := attrs[xaChecksumType]; len(t) > 0 {
		return string(t)
	}
	return "FULL_OBJECT"
}
