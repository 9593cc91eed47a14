package s3

import (
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// Limits S3 sets.
const (
	maxKey       = 1024
	maxPutObject = 5 << 30 // a single PUT; larger objects go multipart
	maxDeletes   = 1000
)

// validKey checks that a key can be a path: at most 1,024 bytes of UTF-8
// without NUL, made of names that are neither empty, "." nor "..", and
// not the bucket's multipart area. A trailing '/' names a folder.
func validKey(key string) *Error {
	if len(key) > maxKey {
		return s3err("KeyTooLongError", 400, "Your key is too long (%d bytes; at most %d)", len(key), maxKey)
	}
	if !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return errInvalidArgument("Object key must be UTF-8 without NUL")
	}
	for i, name := range strings.Split(strings.TrimSuffix(key, "/"), "/") {
		switch {
		case name == "" || name == "." || name == "..":
			return errInvalidArgument("Object key %q: Strata keeps keys as paths, so a key may not have an empty, \".\" or \"..\" component", key)
		case len(name) > 255:
			return s3err("KeyTooLongError", 400, "Your key has a component longer than 255 bytes")
		case i == 0 && name == uploadsDir:
			return errInvalidArgument("Object key %q: %s is reserved for multipart uploads", key, uploadsDir)
		}
	}
	return nil
}

// objectOp serves requests to "/bucket/key".
func (q *request) objectOp() *Error {
	if e := validBucket(q.bucket); e != nil {
		return errNoSuchBucket(q.bucket)
	}
	if e := validKey(q.object); e != nil {
		return e
	}
	qs := q.r.URL.Query()
	if qs.Has("attributes") && q.r.Method == http.MethodGet {
		return q.objectAttributes()
	}
	for _, sub := range []string{"tagging", "retention", "legal-hold", "torrent", "attributes"} {
		if qs.Has(sub) {
			if sub == "tagging" && q.r.Method == http.MethodGet {
				return q.reply(200, struct {
					XMLName xml.Name `xml:"Tagging"`
					NS      string   `xml:"xmlns,attr"`
					TagSet  struct{}
				}{NS: s3NS})
			}
			return errNotImplemented("object " + sub)
		}
	}
	switch q.r.Method {
	case http.MethodPut:
		switch {
		case qs.Has("acl"):
			return q.putACL()
		case qs.Has("uploadId"):
			return q.uploadPart()
		case q.r.Header.Get("x-amz-copy-source") != "":
			return q.copyObject()
		}
		return q.putObject()
	case http.MethodGet:
		switch {
		case qs.Has("acl"):
			return q.getACL(q.object)
		case qs.Has("uploadId"):
			return q.listParts()
		}
		return q.getObject(true)
	case http.MethodHead:
		return q.getObject(false)
	case http.MethodDelete:
		if qs.Has("uploadId") {
			return q.abortUpload()
		}
		return q.deleteObject()
	case http.MethodPost:
		switch {
		case qs.Has("uploads"):
			return q.createUpload()
		case qs.Has("uploadId"):
			return q.completeUpload()
		case qs.Has("restore"):
			return q.restore()
		case qs.Has("select"):
			return errNotImplemented("SelectObjectContent")
		}
	}
	return s3err("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
}

// readBody reads a request body of the declared length through check,
// into dst, then to its end (where an aws-chunked body's last signature
// and trailer are), and verifies it. Nothing may be committed unless it
// returns nil.
func (q *request) readBody(dst io.Writer, bc *bodyCheck, buf []byte) *Error {
	n, err := copyFull(dst, io.LimitReader(bc, q.size), buf)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		// A body cut short fails the read, or (net/http cancels the
		// request's context when the client's side of the connection
		// ends) the write of the bytes it did send: either way the
		// client's, not the server's.
		if n < q.size && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "body") || q.ctx.Err() != nil) {
			return s3err("IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header")
		}
		return fromStrata(err, q.object)
	}
	if n < q.size {
		return s3err("IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header")
	}
	extra, err := io.Copy(io.Discard, io.LimitReader(bc, 1<<20))
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return s3err("IncompleteBody", 400, "reading the body: %v", err)
	}
	if extra > 0 {
		return s3err("InvalidRequest", 400, "The body is longer than its declared length")
	}
	return bc.verify()
}

// copyFull copies src to dst in writes of all of buf but the last, as
// io.Copy does in writes of whatever each read returned: a write of a
// whole buffer is hashed into BLAKE3's tree where it lies, and streamed
// into every stripe, without being gathered again.
func copyFull(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	var written int64
	for {
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return written, werr
			}
			written += int64(n)
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return written, nil // the caller compares written with what was declared
		case err != nil:
			return written, err
		}
	}
}

// copyBuf is the buffer a PUT's body is copied through: large writes
// keep every stripe of the upload busy.
const copyBuf = 4 << 20

// putObject stores a PUT's body as the key's file, replacing what was
// there only once the new data and its metadata are committed together.
func (q *request) putObject() *Error {
	if q.size < 0 {
		return s3err("MissingContentLength", 411, "You must provide the Content-Length HTTP header.")
	}
	if q.size > maxPutObject {
		return s3err("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size (5 GiB for a single PUT; use a multipart upload)")
	}
	cos, e := q.g.cosOf(q.r.Header.Get("x-amz-storage-class"))
	if e != nil {
		return e
	}
	attrs, e := metaAttrs(q.r.Header)
	if e != nil {
		return e
	}
	if strings.HasSuffix(q.object, "/") {
		return q.putFolder()
	}
	p := q.g.path(q.bucket, q.object)
	o := client.PutOptions{COS: cos, Overwrite: true}
	if e := q.writeConditions(p, &o); e != nil {
		return e
	}
	return q.store(p, o, attrs, nil, "")
}

// store writes the request's body as the file p, and commits it with
// attrs, its ETag and its checksums once the whole body has been read
// and verified; on any failure nothing is committed. A part is hashed
// into its tree nodes (tree) and, for also, a checksum the client did not
// send.
func (q *request) store(p string, o client.PutOptions, attrs map[string][]byte, tree *partHash, also string) *Error {
	bc, e := newBodyCheck(q.body, q.r, q.sig.payload, q.size)
	if e != nil {
		return e
	}
	defer bc.close()
	bc.also(also)
	bc.trailer = q.trl
	if q.size == 0 {
		// An empty file is committed at create: read (and check) the
		// body first, so its metadata go in with it.
		if e := q.readBody(io.Discard, bc, make([]byte, 4096)); e != nil {
			return e
		}
		o.Xattrs = withETag(attrs, bc.etag(), bc.checksums())
	}
	u, e := q.create(p, q.size, o)
	if e != nil {
		return e
	}
	if q.size > 0 {
		var dst io.Writer = u
		if tree != nil {
			dst = io.MultiWriter(u, tree.w)
		}
		if e := q.readBody(dst, bc, make([]byte, copyBuf)); e != nil {
			u.Abort()
			return e
		}
		if tree != nil {
			tree.record(attrs)
		}
		u.SetXattrs(withETag(attrs, bc.etag()+" "+u.Fixity(), bc.checksums()))
	}
	if _, err := u.Commit(q.ctx); err != nil {
		return q.writeError(err, o)
	}
	q.w.Header().Set("ETag", `"`+bc.etag()+`"`)
	for alg, v := range bc.checksums() {
		q.w.Header().Set("x-amz-checksum-"+alg, v)
	}
	q.w.WriteHeader(200)
	return nil
}

// create starts writing p, making the directories above it in the
// bucket as needed (S3 has none; a key's prefix is one here).
func (q *request) create(p string, size int64, o client.PutOptions) (*client.Upload, *Error) {
	var u *client.Upload
	e := q.inDirs(p, o, func() (err error) {
		u, err = q.g.c.Create(q.ctx, p, size, o)
		return err
	})
	return u, e
}

// inDirs runs fn, which makes the file p; when p's directory is missing
// it makes the directories above p in the bucket and runs fn again.
func (q *request) inDirs(p string, o client.PutOptions, fn func() error) *Error {
	err := fn()
	if errors.Is(err, api.ErrNotFound) {
		if e := q.bucketExists(); e != nil {
			return e
		}
		if _, err = q.g.c.Mkdir(q.ctx, path.Dir(p), true, 0); err == nil {
			err = fn()
		}
	}
	if err != nil {
		return q.writeError(err, o)
	}
	return nil
}

// writeError maps a failed create or commit: a name taken where the
// write asked for none (If-None-Match: *) is S3's 412.
func (q *request) writeError(err error, o client.PutOptions) *Error {
	if !o.Overwrite && errors.Is(err, api.ErrExist) {
		return errPreconditionFailed
	}
	return fromStrata(err, q.object)
}

// writeConditions applies a write's If-None-Match and If-Match (S3's
// conditional writes) to o. "If-None-Match: *" is a create that must
// not replace, which the catalog decides atomically at commit;
// If-Match compares the current ETag before the write (a writer in
// between may still win).
func (q *request) writeConditions(p string, o *client.PutOptions) *Error {
	im, inm := q.r.Header.Get("If-Match"), q.r.Header.Get("If-None-Match")
	if inm == "*" {
		o.Overwrite = false
		inm = ""
	}
	if im == "" && inm == "" {
		return nil
	}
	fi, err := q.g.c.Stat(q.ctx, p)
	switch {
	case errors.Is(err, api.ErrNotFound) || err == nil && fi.Type != client.TypeFile:
		if im != "" {
			return errNoSuchKey(q.object)
		}
		return nil // If-None-Match: ETAG holds for a key with no object
	case err != nil:
		return fromStrata(err, q.object)
	}
	attrs, err := q.g.c.Xattrs(q.ctx, p)
	if err != nil {
		return fromStrata(err, q.object)
	}
	h := http.Header{}
	if im != "" {
		h.Set("If-Match", im)
	}
	if inm != "" {
		h.Set("If-None-Match", inm)
	}
	return conditions(h, "", etagOf(fi, attrs), fi.Mtime, false)
}

// putFolder makes the directory a key "name/" names: the empty object
// consoles create to show a folder.
func (q *request) putFolder() *Error {
	if q.size != 0 {
		return errInvalidArgument("An object whose key ends in '/' is a folder here and holds no data")
	}
	bc, e := newBodyCheck(q.body, q.r, q.sig.payload, q.size)
	if e != nil {
		return e
	}
	defer bc.close()
	bc.trailer = q.trl
	if e := q.readBody(io.Discard, bc, make([]byte, 512)); e != nil {
		return e
	}
	if e := q.bucketExists(); e != nil {
		return e
	}
	p := q.g.path(q.bucket, q.object)
	if _, err := q.g.c.Mkdir(q.ctx, p, true, 0); err != nil {
		return fromStrata(err, q.object)
	}
	if err := q.g.c.SetXattr(q.ctx, p, xaFolder, nil, ""); err != nil {
		return fromStrata(err, q.object)
	}
	q.w.Header().Set("ETag", `"`+emptyETag+`"`)
	q.w.WriteHeader(200)
	return nil
}

// conditions applies If-Match, If-None-Match, If-Modified-Since and
// If-Unmodified-Since (with prefix "x-amz-copy-source-" for a copy's
// source), in RFC 7232's order. It returns 304 or 412 as an Error.
func conditions(h http.Header, prefix, etag string, mtime time.Time, read bool) *Error {
	get := func(n string) string { return h.Get(prefix + n) }
	match := func(list string) bool {
		for _, t := range strings.Split(list, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.Trim(t, `"`) == etag {
				return true
			}
		}
		return false
	}
	mtime = mtime.Truncate(time.Second)
	notModified := &Error{Code: "NotModified", Status: 304, Message: "Not Modified"}
	if prefix != "" {
		notModified = errPreconditionFailed // a copy answers 412 to both
	}
	if v := get("If-Match"); v != "" {
		if !match(v) {
			return errPreconditionFailed
		}
	} else if v := get("If-Unmodified-Since"); v != "" {
		if t, ok := httpTime(v); ok && mtime.After(t) {
			return errPreconditionFailed
		}
	}
	if v := get("If-None-Match"); v != "" {
		if match(v) {
			if read {
				return notModified
			}
			return errPreconditionFailed
		}
	} else if v := get("If-Modified-Since"); v != "" && read {
		if t, ok := httpTime(v); ok && !mtime.After(t) {
			return notModified
		}
	}
	return nil
}

// parseRange reads a single "bytes=a-b", "bytes=a-" or "bytes=-n" of an
// object of size bytes. ok is false when there is no usable range (S3
// then sends the whole object); e is InvalidRange when it lies wholly
// beyond the end.
func parseRange(v string, size int64) (off, n int64, ok bool, e *Error) {
	spec, found := strings.CutPrefix(v, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false, nil
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, nil
	}
	invalid := s3err("InvalidRange", 416, "The requested range is not satisfiable")
	if a == "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last < 0 {
			return 0, 0, false, nil
		}
		if last == 0 || size == 0 { // RFC 9110: no byte of an empty object can satisfy it
			return 0, 0, false, invalid
		}
		last = min(last, size)
		return size - last, last, true, nil
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 {
		return 0, 0, false, nil
	}
	end := size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < first {
			return 0, 0, false, nil
		}
		end = min(end, size-1)
	}
	if first >= size {
		return 0, 0, false, invalid
	}
	return first, end - first + 1, true, nil
}

// responseOverrides are the query parameters a (presigned) GET may set
// response headers with.
var responseOverrides = map[string]string{
	"response-content-type": "Content-Type", "response-content-language": "Content-Language", "response-expires": "Expires",
	"response-cache-control": "Cache-Control", "response-content-disposition": "Content-Disposition", "response-content-encoding": "Content-Encoding",
}

// getObject serves GET (body) and HEAD (no body) of an object.
func (q *request) getObject(body bool) *Error {
	p := q.g.path(q.bucket, q.object)
	var rd *client.Reader
	var fi *client.FileInfo
	var err error
	if body {
		if rd, err = q.open(p); err == nil {
			fi = rd.Info()
		}
	} else {
		fi, err = q.g.c.Stat(q.ctx, p)
	}
	switch {
	case errors.Is(err, api.ErrIsDir) || err == nil && fi.Type == client.TypeDir:
		return q.getFolder()
	case errors.Is(err, api.ErrOffline):
		return errInvalidObjectState(q.object)
	case errors.Is(err, api.ErrNotFound), errors.Is(err, api.ErrNotDir), err == nil && fi.Type != client.TypeFile, err == nil && strings.HasSuffix(q.object, "/"):
		if e := q.bucketExists(); e != nil {
			return e
		}
		return errNoSuchKey(q.object)
	case err != nil:
		return fromStrata(err, q.object)
	}
	if body && fi.Residency == client.ResidencyStaging {
		return errInvalidObjectState(q.object)
	}
	attrs, err := q.g.c.Xattrs(q.ctx, p)
	if err != nil {
		return fromStrata(err, q.object)
	}
	etag := etagOf(fi, attrs)
	if e := conditions(q.r.Header, "", etag, fi.Mtime, true); e != nil {
		if e.Status == 304 {
			q.w.Header().Set("ETag", `"`+etag+`"`)
			q.w.WriteHeader(304)
			return nil
		}
		return e
	}
	off, n, ranged, e := parseRange(q.r.Header.Get("Range"), fi.Size)
	if v := q.r.URL.Query().Get("partNumber"); v != "" && e == nil {
		off, n, ranged, e = q.partRange(v, fi.Size, attrs)
	}
	if e != nil {
		q.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", fi.Size))
		return e
	}
	// A checksum covers the whole object, so a range gets none.
	q.g.setObjectHeaders(q.w, fi, attrs, etag, !ranged && strings.EqualFold(q.r.Header.Get("x-amz-checksum-mode"), "ENABLED"))
	for param, h := range responseOverrides {
		if v := q.r.URL.Query().Get(param); v != "" {
			q.w.Header().Set(h, v)
		}
	}
	status := 200
	if !ranged {
		off, n = 0, fi.Size
	} else {
		status = 206
		q.w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, fi.Size))
	}
	q.w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	q.w.WriteHeader(status)
	if !body || n == 0 {
		return nil
	}
	if err := copyRange(q.w, rd, off, n, getAhead); err != nil {
		// The status is sent: all the client can learn is a short body.
		q.g.log.Warn("s3: get failed after the headers were sent", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// partRange is the byte range of part v of an object (?partNumber=): of
// a multipart upload's object, the part as uploaded; of any other, the
// whole object as its only part.
func (q *request) partRange(v string, size int64, attrs map[string][]byte) (off, n int64, ranged bool, e *Error) {
	pn, err := strconv.Atoi(v)
	if err != nil || pn < 1 || pn > maxParts {
		return 0, 0, false, errInvalidArgument("Part number must be an integer between 1 and %d, inclusive", maxParts)
	}
	bad := s3err("InvalidPart", 400, "The requested part number is not satisfiable: the object has fewer parts")
	if attrs[xaParts] == nil {
		if pn != 1 {
			return 0, 0, false, bad
		}
		return 0, size, false, nil
	}
	sizes := strings.Split(string(attrs[xaParts]), ",")
	if pn > len(sizes) {
		return 0, 0, false, bad
	}
	for i := 0; i < pn; i++ {
		n, err = strconv.ParseInt(sizes[i], 10, 64)
		if err != nil {
			return 0, 0, false, s3err("InternalError", 500, "part sizes %q", attrs[xaParts])
		}
		if i < pn-1 {
			off += n
		}
	}
	q.w.Header().Set("x-amz-mp-parts-count", strconv.Itoa(len(sizes)))
	// A part has its own checksum, as uploaded.
	if sums := strings.Split(string(attrs[xaPartSums]), ","); len(sums) == len(sizes) && sums[pn-1] != "" && strings.EqualFold(q.r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		for name := range attrs {
			if alg, ok := strings.CutPrefix(name, xaChecksum); ok {
				q.w.Header().Set("x-amz-checksum-"+alg, sums[pn-1])
				q.w.Header().Set("x-amz-checksum-type", checksumType(attrs))
			}
		}
	}
	return off, n, true, nil
}

// getFolder answers GET or HEAD of a directory as the empty folder
// object "key/", or NoSuchKey for a key without the slash.
func (q *request) getFolder() *Error {
	if !strings.HasSuffix(q.object, "/") {
		return errNoSuchKey(q.object)
	}
	q.w.Header().Set("ETag", `"`+emptyETag+`"`)
	q.w.Header().Set("Content-Type", "application/x-directory")
	q.w.Header().Set("Content-Length", "0")
	q.w.WriteHeader(200)
	return nil
}

// copyChunk is the size of the reads a copy or a GET makes: a few stripe
// units of every stripe of a default layout.
const copyChunk = 8 << 20

// getAhead and copyAhead are how many of them are fetched at once ahead
// of the writer, for a GET and for a copy (Complete, CopyObject): a read
// waits for a round trip to each mover it spans, so one at a time leaves
// the movers idle between reads. Measured on a 1 GiB Complete of 64 MiB
// parts here: 1.9 s with one read ahead, 1.46 s with 4, 1.30 s with 8.
// A GET's 4 keep 16 clients' large GETs within 512 MiB.
const (
	getAhead  = 4
	copyAhead = 8
)

var chunkPool = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// span is a range of a file to copy; open is called when the copy gets
// there.
type span struct {
	open   func() (*client.Reader, error)
	off, n int64
}

type chunk struct {
	bp     *[]byte
	pooled bool
	b      []byte
	err    error
	ready  chan struct{}
}

func (c *chunk) free() {
	if c.pooled {
		chunkPool.Put(c.bp)
	}
}

// copyRange writes n bytes from off of rd to w, ahead chunks fetched at
// once.
func copyRange(w io.Writer, rd *client.Reader, off, n int64, ahead int) error {
	return copySpans(w, []span{{open: func() (*client.Reader, error) { return rd, nil }, off: off, n: n}}, ahead)
}

// copySpans writes the spans to w in order, ahead chunks fetched at once,
// across the spans' boundaries, and delivered in order.
func copySpans(w io.Writer, spans []span, ahead int) error {
	queue := make(chan *chunk, ahead-1)
	stop := make(chan struct{})
	defer close(stop)
	failed := func(err error) *chunk {
		c := &chunk{err: err, ready: make(chan struct{})}
		close(c.ready)
		return c
	}
	go func() {
		defer close(queue)
		for _, s := range spans {
			if s.n == 0 {
				continue
			}
			rd, err := s.open()
			if err != nil {
				select {
				case queue <- failed(err):
				case <-stop:
				}
				return
			}
			for pos := s.off; pos < s.off+s.n; pos += copyChunk {
				c := &chunk{ready: make(chan struct{})}
				if left := s.off + s.n - pos; left < copyChunk {
					b := make([]byte, left) // a small object's GET takes no pooled 8 MiB
					c.bp = &b
				} else {
					c.bp, c.pooled = chunkPool.Get().(*[]byte), true
				}
				select {
				case queue <- c:
				case <-stop:
					c.free()
					return
				}
				go func(pos int64) {
					defer close(c.ready)
					b := (*c.bp)[:min(copyChunk, s.off+s.n-pos)]
					m, err := rd.ReadAt(b, pos)
					if err == io.EOF && m == len(b) {
						err = nil
					}
					c.b, c.err = b[:m], err
				}(pos)
			}
		}
	}()
	for c := range queue {
		<-c.ready
		if c.err != nil {
			return c.err
		}
		_, err := w.Write(c.b)
		c.free()
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteObject removes a key (S3 answers 204 whether or not it was
// there), then the directories above it that it leaves empty.
func (q *request) deleteObject() *Error {
	p := q.g.path(q.bucket, q.object)
	err := q.g.c.Remove(q.ctx, p, false)
	if strings.HasSuffix(q.object, "/") && errors.Is(err, api.ErrNotEmpty) {
		err = nil // the folder object goes; the keys below it stay
	}
	if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrIsDir) || errors.Is(err, api.ErrNotDir) || errors.Is(err, api.ErrNotEmpty) {
		if e := q.bucketExists(); e != nil {
			return e
		}
		err = nil
	}
	if err != nil {
		return fromStrata(err, q.object)
	}
	q.g.prune(q, path.Dir(p))
	q.w.WriteHeader(204)
	return nil
}

// prune removes the empty directories from dir up to the bucket, except
// folders made by a PUT of "key/": they are objects of their own.
func (g *Gateway) prune(q *request, dir string) {
	top := g.path(q.bucket, "")
	for dir != top && strings.HasPrefix(dir, top+"/") {
		if attrs, err := g.c.Xattrs(q.ctx, dir); err != nil || attrs[xaFolder] != nil {
			return
		}
		if err := g.c.Remove(q.ctx, dir, false); err != nil {
			return
		}
		dir = path.Dir(dir)
	}
}

// deleteObjects serves DeleteObjects: up to 1,000 keys in one request.
func (q *request) deleteObjects() *Error {
	var req struct {
		Quiet   bool
		Objects []struct {
			Key       string
			VersionID string `xml:"VersionId"`
		} `xml:"Object"`
	}
	if err := xml.NewDecoder(io.LimitReader(q.body, 2<<20)).Decode(&req); err != nil {
		return errMalformedXML(err)
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeletes {
		return errMalformedXML(fmt.Errorf("%d objects; 1 to %d may be deleted at once", len(req.Objects), maxDeletes))
	}
	if e := q.bucketExists(); e != nil {
		return e
	}
	type deleted struct {
		Key string
	}
	type failed struct {
		Key, Code, Message string
	}
	var res struct {
		XMLName xml.Name `xml:"DeleteResult"`
		NS      string   `xml:"xmlns,attr"`
		Deleted []deleted
		Errors  []failed `xml:"Error"`
	}
	res.NS = s3NS
	for _, o := range req.Objects {
		e := validKey(o.Key)
		if e == nil {
			p := q.g.path(q.bucket, o.Key)
			err := q.g.c.Remove(q.ctx, p, false)
			if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrIsDir) || errors.Is(err, api.ErrNotDir) {
				err = nil
			}
			if err != nil {
				e = fromStrata(err, o.Key)
			} else {
				q.g.prune(q, path.Dir(p))
			}
		}
		if e != nil {
			res.Errors = append(res.Errors, failed{o.Key, e.Code, e.Message})
		} else if !req.Quiet {
			res.Deleted = append(res.Deleted, deleted{o.Key})
		}
	}
	return q.reply(200, res)
}

// copySource reads x-amz-copy-source: "[/]bucket/key[?versionId=…]",
// URL-encoded.
func (q *request) copySource() (bucket, key string, e *Error) {
	src := q.r.Header.Get("x-amz-copy-source")
	if i := strings.Index(src, "?"); i >= 0 {
		src = src[:i]
	}
	src, err := url.PathUnescape(src)
	if err != nil {
		return "", "", errInvalidArgument("Invalid copy source encoding")
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(src, "/"), "/")
	if validBucket(bucket) != nil || key == "" {
		return "", "", errInvalidArgument("Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	if e := validKey(key); e != nil {
		return "", "", e
	}
	return bucket, key, nil
}

// open opens an object's file for a GET or a copy. An object of an
// archive class (GLACIER, DEEP_ARCHIVE) whose disk copy is gone fails with
// ErrOffline, S3's InvalidObjectState, and queues nothing: only
// RestoreObject recalls it. A STANDARD object has no such state in S3: its
// disk copy went because the HSM purged it (the disk's watermarks) or
// dropped it as damaged, so its GET waits for a recall, as an open on the
// mount does. A client that gives up first finds the recall under way
// when it asks again.
func (q *request) open(p string) (*client.Reader, error) {
	rd, err := q.g.c.Open(q.ctx, p, client.GetOptions{NoRecall: true})
	if !errors.Is(err, api.ErrOffline) {
		return rd, err
	}
	fi, serr := q.g.c.Stat(q.ctx, p)
	if serr != nil || q.g.classOf(fi.COS) != "STANDARD" {
		return nil, err
	}
	return q.g.c.Open(q.ctx, p, client.GetOptions{})
}

// openSource opens a copy's source after its conditions.
func (q *request) openSource(bucket, key string) (*client.Reader, map[string][]byte, string, *Error) {
	p := q.g.path(bucket, key)
	rd, err := q.open(p)
	switch {
	case errors.Is(err, api.ErrOffline):
		return nil, nil, "", errInvalidObjectState(key)
	case errors.Is(err, api.ErrNotFound), errors.Is(err, api.ErrIsDir), errors.Is(err, api.ErrNotDir):
		if _, serr := q.g.c.Stat(q.ctx, q.g.path(bucket, "")); serr != nil {
			return nil, nil, "", errNoSuchBucket(bucket)
		}
		return nil, nil, "", errNoSuchKey(key)
	case err != nil:
		return nil, nil, "", fromStrata(err, key)
	}
	if rd.Info().Residency == client.ResidencyStaging {
		return nil, nil, "", errInvalidObjectState(key)
	}
	attrs, err := q.g.c.Xattrs(q.ctx, p)
	if err != nil {
		return nil, nil, "", fromStrata(err, key)
	}
	etag := etagOf(rd.Info(), attrs)
	if e := conditions(q.r.Header, "x-amz-copy-source-", etag, rd.Info().Mtime, true); e != nil {
		return nil, nil, "", e
	}
	return rd, attrs, etag, nil
}

// copyObject serves CopyObject: the copy is made on the server side, the
// data going from the source's movers to the destination's through the
// gateway, never through the client.
func (q *request) copyObject() *Error {
	sb, sk, e := q.copySource()
	if e != nil {
		return e
	}
	directive := q.r.Header.Get("x-amz-metadata-directive")
	if directive != "" && directive != "COPY" && directive != "REPLACE" {
		return errInvalidArgument("Unknown metadata directive %q", directive)
	}
	class := q.r.Header.Get("x-amz-storage-class")
	if sb == q.bucket && sk == q.object && directive != "REPLACE" && class == "" {
		return s3err("InvalidRequest", 400, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
	}
	rd, srcAttrs, _, e := q.openSource(sb, sk)
	if e != nil {
		return e
	}
	cos, e := q.g.cosOf(class)
	if e != nil {
		return e
	}
	if class == "" {
		cos = rd.Info().COS // the copy keeps the source's class
	}
	attrs := map[string][]byte{}
	if directive == "REPLACE" {
		if attrs, e = metaAttrs(q.r.Header); e != nil {
			return e
		}
	} else {
		// A composite checksum is of parts the copy does not have.
		whole := checksumType(srcAttrs) == "FULL_OBJECT"
		for k, v := range srcAttrs {
			if strings.HasPrefix(k, xaMeta) || strings.HasPrefix(k, xaHeader) || whole && strings.HasPrefix(k, xaChecksum) {
				attrs[k] = v
			}
		}
	}
	size := rd.Size()
	if size > maxPutObject {
		return errInvalidArgument("The specified copy source is larger than the maximum allowable size for a copy source: %d", int64(maxPutObject))
	}
	return q.copyTo("CopyObjectResult", q.g.path(q.bucket, q.object), rd, 0, size, client.PutOptions{COS: cos}, attrs)
}

// copyTo writes the copy (laid out as o asks) and answers with its
// result document (result names it: CopyObjectResult, CopyPartResult).
func (q *request) copyTo(result, p string, rd *client.Reader, off, n int64, o client.PutOptions, attrs map[string][]byte) *Error {
	fi, etag, e := q.writeCopy(p, rd, off, n, o, attrs)
	if e != nil {
		return e
	}
	return q.reply(200, struct {
		XMLName      xml.Name
		NS           string `xml:"xmlns,attr"`
		LastModified string
		ETag         string
	}{XMLName: xml.Name{Local: result}, NS: s3NS, LastModified: fi.Mtime.UTC().Format("2006-01-02T15:04:05.000Z"), ETag: `"` + etag + `"`})
}

// writeCopy writes n bytes of rd from off as p, with attrs and the MD5 of
// what was copied as its ETag.
func (q *request) writeCopy(p string, rd *client.Reader, off, n int64, o client.PutOptions, attrs map[string][]byte) (*client.FileInfo, string, *Error) {
	o.Overwrite = true
	if n == 0 {
		o.Xattrs = withETag(attrs, emptyETag, nil)
	}
	u, e := q.create(p, n, o)
	if e != nil {
		return nil, "", e
	}
	h, free := newMD5(n)
	defer free()
	if n > 0 {
		q.slow()
		if err := copyRange(io.MultiWriter(u, h), rd, off, n, copyAhead); err != nil {
			u.Abort()
			return nil, "", fromStrata(err, q.object)
		}
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if n > 0 {
		u.SetXattrs(withETag(attrs, etag+" "+u.Fixity(), nil))
	}
	fi, err := u.Commit(q.ctx)
	if err != nil {
		return nil, "", fromStrata(err, q.object)
	}
	return fi, etag, nil
}

// restore serves RestoreObject: a recall of an archived object, whose
// disk copy is then kept (pinned) for the days asked.
func (q *request) restore() *Error {
	var req struct {
		Days int
		Tier string `xml:"GlacierJobParameters>Tier"`
		Type string
	}
	req.Days = 1
	if q.size != 0 {
		if err := xml.NewDecoder(io.LimitReader(q.body, 64<<10)).Decode(&req); err != nil {
			return errMalformedXML(err)
		}
	}
	if req.Type == "SELECT" {
		return errNotImplemented("restore with SELECT")
	}
	if req.Days < 1 {
		return errInvalidArgument("Days must be at least 1")
	}
	p := q.g.path(q.bucket, q.object)
	fi, e := q.statObject(p)
	if e != nil {
		return e
	}
	switch fi.Residency {
	case client.ResidencyStaging:
		return s3err("RestoreAlreadyInProgress", 409, "Object restore is already in progress")
	case client.ResidencyDisk, "":
		return s3err("InvalidObjectState", 403, "Restore is not allowed for the object's current storage class: it has no archived copy")
	}
	if _, err := q.g.c.StagePinned(q.ctx, []string{p}, time.Duration(req.Days)*24*time.Hour); err != nil {
		return fromStrata(err, q.object)
	}
	if fi.Residency == client.ResidencyTape {
		q.w.WriteHeader(202) // the recall is queued
	} else {
		q.w.WriteHeader(200) // restored already: the expiry moves
	}
	return nil
}

// statObject describes the object at p: NoSuchKey (or NoSuchBucket) if
// no file is there.
func (q *request) statObject(p string) (*client.FileInfo, *Error) {
	fi, err := q.g.c.Stat(q.ctx, p)
	switch {
	case errors.Is(err, api.ErrNotFound), err == nil && fi.Type != client.TypeFile:
		if e := q.bucketExists(); e != nil {
			return nil, e
		}
		return nil, errNoSuchKey(q.object)
	case err != nil:
		return nil, fromStrata(err, q.object)
	}
	return fi, nil
}

// objectAttributes serves GetObjectAttributes: the attributes named in
// x-amz-object-attributes (ETag, Checksum, ObjectParts, StorageClass,
// ObjectSize) without the data.
func (q *request) objectAttributes() *Error {
	p := q.g.path(q.bucket, q.object)
	fi, e := q.statObject(p)
	if e != nil {
		return e
	}
	attrs, err := q.g.c.Xattrs(q.ctx, p)
	if err != nil {
		return fromStrata(err, q.object)
	}
	want := map[string]bool{}
	for _, v := range q.r.Header.Values("x-amz-object-attributes") {
		for _, a := range strings.Split(v, ",") {
			want[strings.TrimSpace(a)] = true
		}
	}
	type checksum struct {
		ChecksumCRC32     string `xml:",omitempty"`
		ChecksumCRC32C    string `xml:",omitempty"`
		ChecksumCRC64NVME string `xml:",omitempty"`
		ChecksumSHA1      string `xml:",omitempty"`
		ChecksumSHA256    string `xml:",omitempty"`
		ChecksumType      string `xml:",omitempty"`
	}
	type xpart struct {
		PartNumber int
		Size       int64
		checksum
	}
	type parts struct {
		TotalPartsCount      int `xml:"PartsCount"`
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Parts                []xpart `xml:"Part"`
	}
	res := struct {
		XMLName      xml.Name `xml:"GetObjectAttributesResponse"`
		NS           string   `xml:"xmlns,attr"`
		ETag         string   `xml:",omitempty"`
		Checksum     *checksum
		ObjectParts  *parts
		StorageClass string `xml:",omitempty"`
		ObjectSize   *int64
	}{NS: s3NS}
	if want["ETag"] {
		res.ETag = etagOf(fi, attrs) // unquoted, as S3 returns it here
	}
	if want["StorageClass"] {
		res.StorageClass = q.g.classOf(fi.COS)
	}
	if want["ObjectSize"] {
		res.ObjectSize = &fi.Size
	}
	if want["Checksum"] {
		c := &checksum{ChecksumCRC32: string(attrs[xaChecksum+"crc32"]), ChecksumCRC32C: string(attrs[xaChecksum+"crc32c"]), ChecksumCRC64NVME: string(attrs[xaChecksum+"crc64nvme"]),
			ChecksumSHA1: string(attrs[xaChecksum+"sha1"]), ChecksumSHA256: string(attrs[xaChecksum+"sha256"])}
		if *c != (checksum{}) {
			c.ChecksumType = checksumType(attrs)
			res.Checksum = c
		}
	}
	if want["ObjectParts"] && attrs[xaParts] != nil {
		max, e := intParam(q.r.URL.Query(), "max-parts", 1000)
		if e != nil {
			return e
		}
		if v := q.r.Header.Get("x-amz-max-parts"); v != "" {
			max, _ = strconv.Atoi(v)
		}
		marker, _ := strconv.Atoi(q.r.Header.Get("x-amz-part-number-marker"))
		sizes := strings.Split(string(attrs[xaParts]), ",")
		sums := strings.Split(string(attrs[xaPartSums]), ",")
		op := &parts{TotalPartsCount: len(sizes), PartNumberMarker: marker, MaxParts: max}
		for i, s := range sizes {
			if i+1 <= marker {
				continue
			}
			if len(op.Parts) == max {
				op.IsTruncated = true
				break
			}
			n, _ := strconv.ParseInt(s, 10, 64)
			xp := xpart{PartNumber: i + 1, Size: n}
			if len(sums) == len(sizes) {
				switch {
				case attrs[xaChecksum+"crc32"] != nil:
					xp.ChecksumCRC32 = sums[i]
				case attrs[xaChecksum+"crc32c"] != nil:
					xp.ChecksumCRC32C = sums[i]
				case attrs[xaChecksum+"crc64nvme"] != nil:
					xp.ChecksumCRC64NVME = sums[i]
				case attrs[xaChecksum+"sha1"] != nil:
					xp.ChecksumSHA1 = sums[i]
				case attrs[xaChecksum+"sha256"] != nil:
					xp.ChecksumSHA256 = sums[i]
				}
			}
			op.Parts = append(op.Parts, xp)
			op.NextPartNumberMarker = i + 1
		}
		res.ObjectParts = op
	}
	q.w.Header().Set("Last-Modified", fi.Mtime.UTC().Format(http.TimeFormat))
	return q.reply(200, res)
}
