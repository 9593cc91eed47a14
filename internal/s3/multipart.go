package s3

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

// Multipart uploads: each upload is a directory of the bucket's
// uploadsDir, named by its upload ID, holding one file per part and the
// upload's key, class and metadata in its attributes. Complete writes the
// parts, in order, into a new file of the key, committed (data and
// metadata together) as one replacement; the directory then goes.
const (
	xaUploadKey  = "user.s3.upload.key"
	xaUploadCOS  = "user.s3.upload.cos"
	xaUploadTime = "user.s3.upload.initiated"
	// xaUploadSum is the upload's checksum: "ALG TYPE" (crc32 COMPOSITE).
	xaUploadSum = "user.s3.upload.checksum"
	// xaUploadDone marks an upload completed, with the object's ETag: a
	// Complete sent again (a client retrying) gets the same answer.
	xaUploadDone = "user.s3.upload.done"
	// xaParts are a multipart object's part sizes, comma-separated, for
	// GET and HEAD ?partNumber=.
	xaParts = "user.s3.parts"
	// xaPartSums are the parts' checksums (of the upload's algorithm),
	// comma-separated, for GET ?partNumber=.
	xaPartSums = "user.s3.part-checksums"
	// xaPartNode is a part's BLAKE3 tree nodes, "OFFSET LENGTH NODE …" (one
	// per aligned power-of-two block of the part; "OFFSET NODE" for a part
	// that is one block), hashed as it arrived for its place in the object
	// (client.TreeHash): Complete makes the joined object's fixity from the
	// parts' nodes.
	xaPartNode = "user.s3.part-node"
	// doneKept is how long a completed upload's record stays.
	doneKept    = 15 * time.Minute
	maxParts    = 10000
	minPartSize = 5 << 20 // every part but the last
	maxPartSize = 5 << 30
)

func (q *request) uploadDir(id string) string {
	return q.g.path(q.bucket, uploadsDir+"/"+id)
}

func partName(n int) string { return fmt.Sprintf("%05d", n) }

// upload returns an upload's attributes, NoSuchUpload unless it exists
// for this key.
func (q *request) upload(id string) (map[string][]byte, *Error) {
	if id == "" || strings.ContainsAny(id, "/.") || len(id) > 64 {
		return nil, errNoSuchUpload(id)
	}
	attrs, err := q.g.c.Xattrs(q.ctx, q.uploadDir(id))
	if errors.Is(err, api.ErrNotFound) {
		if e := q.bucketExists(); e != nil {
			return nil, e
		}
		return nil, errNoSuchUpload(id)
	}
	if err != nil {
		return nil, fromStrata(err, q.object)
	}
	if string(attrs[xaUploadKey]) != q.object || attrs[xaUploadDone] != nil && q.r.Method != http.MethodPost {
		return nil, errNoSuchUpload(id) // a completed upload: only Complete, again, finds it
	}
	return attrs, nil
}

// sweepDone removes the records of uploads completed more than doneKept
// ago.
func (q *request) sweepDone() {
	ents, err := q.g.c.List(q.ctx, q.g.path(q.bucket, uploadsDir))
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type == client.TypeDir && q.g.cfg.Now().Sub(e.Mtime) > doneKept {
			if attrs, err := q.g.c.Xattrs(q.ctx, e.Path); err == nil && attrs[xaUploadDone] != nil {
				q.g.c.Remove(q.ctx, e.Path, true)
			}
		}
	}
}

// createUpload serves CreateMultipartUpload.
func (q *request) createUpload() *Error {
	if strings.HasSuffix(q.object, "/") {
		return errInvalidArgument("A folder (a key ending in '/') holds no data")
	}
	cos, e := q.g.cosOf(q.r.Header.Get("x-amz-storage-class"))
	if e != nil {
		return e
	}
	attrs, e := metaAttrs(q.r.Header)
	if e != nil {
		return e
	}
	alg, typ, e := uploadChecksum(q.r.Header)
	if e != nil {
		return e
	}
	if alg != "" {
		attrs[xaUploadSum] = []byte(alg + " " + typ)
		q.w.Header().Set("x-amz-checksum-algorithm", strings.ToUpper(alg))
		q.w.Header().Set("x-amz-checksum-type", typ)
	}
	if e := q.bucketExists(); e != nil {
		return e
	}
	q.sweepDone()
	id := strings.ToLower(newRequestID()) + strings.ToLower(newRequestID())
	dir := q.uploadDir(id)
	if _, err := q.g.c.Mkdir(q.ctx, dir, true, 0o700); err != nil {
		return fromStrata(err, q.object)
	}
	attrs[xaUploadCOS] = []byte(cos)
	attrs[xaUploadTime] = []byte(q.g.cfg.Now().UTC().Format(time.RFC3339Nano))
	attrs[xaUploadKey] = []byte(q.object) // last: an upload without its key is not listed
	for _, name := range sortedKeys(attrs) {
		if err := q.g.c.SetXattr(q.ctx, dir, name, attrs[name], ""); err != nil {
			q.g.c.Remove(q.ctx, dir, true)
			return fromStrata(err, q.object)
		}
	}
	return q.reply(200, struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		NS       string   `xml:"xmlns,attr"`
		Bucket   string
		Key      string
		UploadID string `xml:"UploadId"`
	}{NS: s3NS, Bucket: q.bucket, Key: q.object, UploadID: id})
}

// uploadChecksum reads the checksum a multipart upload is to carry: its
// algorithm and type. FULL_OBJECT is a checksum of the whole object
// (only for the CRCs, which S3 can combine); COMPOSITE a checksum of the
// parts' checksums, "-N" (S3's default for CRC32, CRC32C, SHA-1 and
// SHA-256; CRC64NVME is always FULL_OBJECT).
func uploadChecksum(h http.Header) (alg, typ string, e *Error) {
	alg = strings.ToLower(h.Get("x-amz-checksum-algorithm"))
	typ = strings.ToUpper(h.Get("x-amz-checksum-type"))
	if alg == "" {
		if typ != "" {
			return "", "", errInvalidArgument("x-amz-checksum-type needs x-amz-checksum-algorithm")
		}
		return "", "", nil
	}
	if checksumAlgs[alg] == nil {
		return "", "", errInvalidArgument("Unsupported checksum algorithm %q", alg)
	}
	switch {
	case typ == "" && alg == "crc64nvme":
		typ = "FULL_OBJECT"
	case typ == "":
		typ = "COMPOSITE"
	case typ != "FULL_OBJECT" && typ != "COMPOSITE",
		typ == "FULL_OBJECT" && strings.HasPrefix(alg, "sha"),
		typ == "COMPOSITE" && alg == "crc64nvme":
		return "", "", errInvalidArgument("The checksum type %s is not valid for %s", typ, strings.ToUpper(alg))
	}
	return alg, typ, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// partNumber reads ?partNumber=, 1 to 10,000.
func (q *request) partNumber() (int, *Error) {
	v := q.r.URL.Query().Get("partNumber")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxParts {
		return 0, errInvalidArgument("Part number must be an integer between 1 and %d, inclusive", maxParts)
	}
	return n, nil
}

// uploadPart serves UploadPart and UploadPartCopy.
func (q *request) uploadPart() *Error {
	n, e := q.partNumber()
	if e != nil {
		return e
	}
	id := q.r.URL.Query().Get("uploadId")
	attrs, e := q.upload(id)
	if e != nil {
		return e
	}
	p := q.uploadDir(id) + "/" + partName(n)
	if q.r.Header.Get("x-amz-copy-source") != "" {
		return q.uploadPartCopy(p, string(attrs[xaUploadCOS]))
	}
	if q.size < 0 {
		return s3err("MissingContentLength", 411, "You must provide the Content-Length HTTP header.")
	}
	if q.size > maxPartSize {
		return s3err("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed part size (5 GiB)")
	}
	// A FULL_OBJECT upload's checksum is combined from its parts': a part
	// sent without its own gets one computed, so the parts can still be
	// joined.
	full := ""
	if alg, typ, _ := strings.Cut(string(attrs[xaUploadSum]), " "); typ == "FULL_OBJECT" {
		full = alg
	}
	return q.store(p, partOptions(string(attrs[xaUploadCOS])), map[string][]byte{}, partTree(n, q.size), full)
}

// uploadPartCopy makes part p from a range of another object.
func (q *request) uploadPartCopy(p, cos string) *Error {
	sb, sk, e := q.copySource()
	if e != nil {
		return e
	}
	rd, _, _, e := q.openSource(sb, sk)
	if e != nil {
		return e
	}
	off, n := int64(0), rd.Size()
	if v := q.r.Header.Get("x-amz-copy-source-range"); v != "" {
		var ok bool
		off, n, ok, e = parseRange(v, rd.Size())
		if e != nil || !ok || !strings.Contains(v, "-") || strings.HasPrefix(v, "bytes=-") {
			return errInvalidArgument("The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
		}
		if _, b, _ := strings.Cut(strings.TrimPrefix(v, "bytes="), "-"); b != "" {
			if last, _ := strconv.ParseInt(b, 10, 64); last >= rd.Size() {
				return s3err("InvalidRange", 416, "The requested range is not satisfiable")
			}
		}
	}
	if n > maxPartSize {
		return s3err("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed part size (5 GiB)")
	}
	return q.copyTo("CopyPartResult", p, rd, off, n, partOptions(cos), map[string][]byte{})
}

// partOptions is how a part is stored: one stripe, in the upload's
// class, so that Complete can join the parts as the stripes of the object
// (join); parts in flight at once keep the devices busy together. No
// digest of the part alone: the object's is made from the parts' tree
// nodes (partHash), or as a copied object is written.
func partOptions(cos string) client.PutOptions {
	return client.PutOptions{Overwrite: true, Stripes: 1, COS: cos, NoFixity: true}
}

// partHash hashes a part, as it arrives, into BLAKE3's tree nodes for its
// place in the object: part n of size bytes starts at (n-1) × size if all
// before it are as large, which Complete checks before it uses the nodes.
type partHash struct {
	h       *client.TreeHash
	w       *client.TreeWriter
	off, to int64
}

// treeUnit is the granule parts are hashed in (client.TreeWriter's block):
// a part of a whole number of them starts on one, so its blocks are
// subtrees of BLAKE3's tree.
const treeUnit = 1 << 20

// partTree returns the hasher of part n of size bytes, or nil when such
// parts cannot tile BLAKE3's tree (a size that is not a whole number of
// MiB: the last part, or parts of some clients' sizes).
func partTree(n int, size int64) *partHash {
	if size < treeUnit || size%treeUnit != 0 {
		return nil
	}
	h := client.NewTreeHash()
	off := int64(n-1) * size
	return &partHash{h: h, w: h.At(off), off: off, to: off + size}
}

// treeBlocks splits [off, to), both whole MiB, into the largest aligned
// blocks of a power of two of MiB, left to right: the subtrees of
// BLAKE3's tree the range is made of (one, for a power-of-two part: the
// aws cli's and boto3's 8 MiB; two or three for rclone's 5 MiB).
func treeBlocks(off, to int64) [][2]int64 {
	var out [][2]int64
	for off < to {
		b := int64(treeUnit)
		for off%(2*b) == 0 && off+2*b <= to {
			b *= 2
		}
		out = append(out, [2]int64{off, off + b})
		off += b
	}
	return out
}

// record adds the part's nodes to its attributes.
func (t *partHash) record(attrs map[string][]byte) {
	t.w.Close()
	var v []string
	for _, b := range treeBlocks(t.off, t.to) {
		enc, ok := t.h.Node(b[0], b[1])
		if !ok {
			return
		}
		v = append(v, strconv.FormatInt(b[0], 10), strconv.FormatInt(b[1]-b[0], 10), enc)
	}
	attrs[xaPartNode] = []byte(strings.Join(v, " "))
}

// addPartNodes adds to h the nodes a part hashed at [at, at+size) recorded
// (record), and reports whether they cover exactly that range.
func addPartNodes(h *client.TreeHash, v string, at, size int64) bool {
	f := strings.Fields(v)
	if len(f) == 2 { // one block, the whole part
		f = []string{f[0], strconv.FormatInt(size, 10), f[1]}
	}
	if len(f) == 0 || len(f)%3 != 0 {
		return false
	}
	next := at
	for i := 0; i < len(f); i += 3 {
		off, err1 := strconv.ParseInt(f[i], 10, 64)
		n, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || off != next || n <= 0 || h.AddNode(off, off+n, f[i+2]) != nil {
			return false
		}
		next += n
	}
	return next == at+size
}

// joinedFixity is the BLAKE3 fixity of the object the parts make, from
// the nodes they were hashed into as they arrived, and from the last part
// read again at its place: "" if the parts do not tile BLAKE3's tree (see
// partTree) or a node is missing. The nodes of every part make BLAKE3's
// tree whatever their blocks: client.TreeHash assembles it from any set
// of aligned subtrees that tiles the object.
func (q *request) joinedFixity(use []part, total int64) string {
	size := use[0].fi.Size
	h := client.NewTreeHash()
	for i, p := range use[:len(use)-1] {
		if !addPartNodes(h, string(p.attrs[xaPartNode]), int64(i)*size, size) {
			return ""
		}
	}
	last := use[len(use)-1]
	w := h.At(int64(len(use)-1) * size)
	if _, err := q.g.c.Get(q.ctx, last.fi.Path, w, client.GetOptions{}); err != nil {
		q.g.log.Warn("s3: the last part could not be read for the object's fixity", "key", q.object, "err", err)
		return ""
	}
	w.Close()
	sum, _ := h.Sum(total)
	return sum
}

// part is one stored part of an upload.
type part struct {
	n     int
	fi    client.FileInfo
	etag  string
	attrs map[string][]byte
}

// parts lists an upload's parts in order, with their ETags.
func (q *request) parts(id string) ([]part, *Error) {
	ents, err := q.g.c.List(q.ctx, q.uploadDir(id))
	if err != nil {
		return nil, fromStrata(err, q.object)
	}
	var objs []object
	var out []part
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name)
		if err != nil || e.Type != client.TypeFile || partName(n) != e.Name {
			continue
		}
		objs = append(objs, object{key: e.Name, fi: e})
		out = append(out, part{n: n, fi: e})
	}
	for i, attrs := range q.g.objAttrs(q.ctx, objs) {
		out[i].etag, out[i].attrs = etagOf(&out[i].fi, attrs), attrs
	}
	return out, nil
}

// listParts serves ListParts.
func (q *request) listParts() *Error {
	qs := q.r.URL.Query()
	id := qs.Get("uploadId")
	attrs, e := q.upload(id)
	if e != nil {
		return e
	}
	max, e := intParam(qs, "max-parts", 1000)
	if e != nil {
		return e
	}
	max = min(max, 1000)
	marker, e := intParam(qs, "part-number-marker", 0)
	if e != nil {
		return e
	}
	ps, e := q.parts(id)
	if e != nil {
		return e
	}
	type xpart struct {
		PartNumber   int
		LastModified string
		ETag         string
		Size         int64
	}
	var out []xpart
	truncated, next := false, 0
	for _, p := range ps {
		if p.n <= marker {
			continue
		}
		if len(out) == max {
			truncated = true
			break
		}
		out = append(out, xpart{p.n, p.fi.Mtime.UTC().Format("2006-01-02T15:04:05.000Z"), `"` + p.etag + `"`, p.fi.Size})
		next = p.n
	}
	me := owner{ID: strconv.FormatUint(uint64(q.key.UID), 10), DisplayName: q.key.User}
	return q.reply(200, struct {
		XMLName              xml.Name `xml:"ListPartsResult"`
		NS                   string   `xml:"xmlns,attr"`
		Bucket               string
		Key                  string
		UploadID             string `xml:"UploadId"`
		Initiator            owner
		Owner                owner
		StorageClass         string
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Parts                []xpart `xml:"Part"`
	}{NS: s3NS, Bucket: q.bucket, Key: q.object, UploadID: id, Initiator: me, Owner: me, StorageClass: q.g.classOf(string(attrs[xaUploadCOS])),
		PartNumberMarker: marker, NextPartNumberMarker: next, MaxParts: max, IsTruncated: truncated, Parts: out})
}

// completeUpload serves CompleteMultipartUpload.
func (q *request) completeUpload() *Error {
	id := q.r.URL.Query().Get("uploadId")
	if _, e := q.upload(id); e != nil {
		return e
	}
	var req struct {
		Parts []struct {
			PartNumber        int
			ETag              string
			ChecksumCRC32     string
			ChecksumCRC32C    string
			ChecksumCRC64NVME string
			ChecksumSHA1      string
			ChecksumSHA256    string
		} `xml:"Part"`
	}
	if err := xml.NewDecoder(io.LimitReader(q.body, 4<<20)).Decode(&req); err != nil {
		return errMalformedXML(err)
	}
	// One Complete of an upload at a time (a client that timed out sends
	// it again): a second waits, then finds the first's answer.
	unlock := q.g.lockUpload(id)
	defer unlock()
	attrs, err := q.g.c.Xattrs(q.ctx, q.uploadDir(id))
	if errors.Is(err, api.ErrNotFound) {
		return errNoSuchUpload(id) // aborted meanwhile
	} else if err != nil {
		return fromStrata(err, q.object)
	}
	if etag := attrs[xaUploadDone]; etag != nil {
		// Completed before: the same answer, checksum included.
		meta, _ := q.g.c.Xattrs(q.ctx, q.g.path(q.bucket, q.object))
		return q.completed(string(etag), meta)
	}
	if len(req.Parts) == 0 {
		return errMalformedXML(errors.New("no parts"))
	}
	stored, e := q.parts(id)
	if e != nil {
		return e
	}
	byNum := map[int]part{}
	for _, p := range stored {
		byNum[p.n] = p
	}
	var total int64
	sums := md5.New()
	use := make([]part, 0, len(req.Parts))
	for i, rp := range req.Parts {
		if i > 0 && rp.PartNumber <= req.Parts[i-1].PartNumber {
			return s3err("InvalidPartOrder", 400, "The list of parts was not in ascending order. The parts list must be specified in order by part number.")
		}
	}
	for i, rp := range req.Parts {
		p, ok := byNum[rp.PartNumber]
		if !ok || strings.Trim(rp.ETag, `"`) != p.etag {
			return s3err("InvalidPart", 400, "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part's entity tag (part %d).", rp.PartNumber)
		}
		if i < len(req.Parts)-1 && p.fi.Size < minPartSize {
			return s3err("EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed object size: part %d has %d bytes, every part but the last needs %d", rp.PartNumber, p.fi.Size, minPartSize)
		}
		for alg, got := range map[string]string{"crc32": rp.ChecksumCRC32, "crc32c": rp.ChecksumCRC32C, "crc64nvme": rp.ChecksumCRC64NVME, "sha1": rp.ChecksumSHA1, "sha256": rp.ChecksumSHA256} {
			if got != "" && got != string(p.attrs[xaChecksum+alg]) {
				return s3err("InvalidPart", 400, "The %s checksum of part %d is not the one it was uploaded with", strings.ToUpper(alg), rp.PartNumber)
			}
		}
		d, _ := hex.DecodeString(p.etag)
		sums.Write(d)
		total += p.fi.Size
		use = append(use, p)
	}
	alg, typ, _ := strings.Cut(string(attrs[xaUploadSum]), " ")
	// A FULL_OBJECT checksum is combined from the parts' (crccombine.go);
	// only parts uploaded without theirs make it read the bytes, as they
	// are copied.
	var whole hash.Hash
	if typ == "FULL_OBJECT" {
		if _, ok := fullSum(alg, use); !ok {
			whole = checksumAlgs[alg]()
		}
	}
	etag := fmt.Sprintf("%s-%d", hex.EncodeToString(sums.Sum(nil)), len(use))
	meta := map[string][]byte{}
	sizes := make([]string, len(use))
	for i, p := range use {
		sizes[i] = strconv.FormatInt(p.fi.Size, 10)
	}
	meta[xaParts] = []byte(strings.Join(sizes, ","))
	for k, v := range attrs {
		if strings.HasPrefix(k, xaMeta) || strings.HasPrefix(k, xaHeader) {
			meta[k] = v
		}
	}
	o := client.PutOptions{COS: string(attrs[xaUploadCOS]), Overwrite: true}
	if e := q.writeConditions(q.g.path(q.bucket, q.object), &o); e != nil {
		return e
	}
	// From here the answer may be slow: the parts may have to be copied.
	q.slow()
	if total > 0 && whole == nil {
		joined, e := q.join(use, o, meta, alg, typ, etag)
		if e != nil {
			return e
		}
		if joined {
			q.finishUpload(id, stored, etag)
			return q.completed(etag, meta)
		}
	}
	if total == 0 {
		o.Xattrs = withETag(meta, etag, nil)
	}
	u, e := q.create(q.g.path(q.bucket, q.object), total, o)
	if e != nil {
		return e
	}
	var dst io.Writer = u
	if whole != nil {
		dst = io.MultiWriter(u, whole)
	}
	spans := make([]span, len(use))
	for i, p := range use {
		spans[i] = span{open: func() (*client.Reader, error) { return q.g.c.Open(q.ctx, p.fi.Path, client.GetOptions{}) }, n: p.fi.Size}
	}
	if err := copySpans(dst, spans, copyAhead); err != nil {
		u.Abort()
		return fromStrata(err, q.object)
	}
	if e := q.sumMeta(meta, alg, typ, use, whole); e != nil {
		u.Abort()
		return e
	}
	if total > 0 {
		u.SetXattrs(withETag(meta, etag+" "+u.Fixity(), nil))
	}
	if _, err := u.Commit(q.ctx); err != nil {
		return q.writeError(err, o)
	}
	q.finishUpload(id, stored, etag)
	return q.completed(etag, meta)
}

// join makes the object the used parts themselves, joined by the catalog
// without a byte copied (client.Concat), and reports whether it could:
// every part must be stored as one stripe (as UploadPart stores them),
// all but the last of one size. Parts that cannot be joined
// (UploadPartCopy of another size, parts of different sizes, a part
// migrated to tape meanwhile) are copied instead, as are those of a
// FULL_OBJECT upload uploaded without their checksums.
func (q *request) join(use []part, o client.PutOptions, meta map[string][]byte, alg, typ, etag string) (bool, *Error) {
	for _, p := range use[:len(use)-1] {
		if p.fi.Size != use[0].fi.Size {
			return false, nil
		}
	}
	if e := q.sumMeta(meta, alg, typ, use, nil); e != nil {
		return false, e
	}
	paths := make([]string, len(use))
	for i, p := range use {
		paths[i] = p.fi.Path
	}
	var total int64
	for _, p := range use {
		total += p.fi.Size
	}
	fixity := q.joinedFixity(use, total)
	o.Xattrs = withETag(meta, etag+" "+fixity, nil)
	p := q.g.path(q.bucket, q.object)
	var invalid error
	e := q.inDirs(p, o, func() error {
		_, err := q.g.c.Concat(q.ctx, p, paths, fixity, o)
		if errors.Is(err, api.ErrInvalid) {
			invalid, err = err, nil
		}
		return err
	})
	if invalid != nil {
		q.g.log.Debug("s3: parts copied, not joined", "key", q.object, "err", invalid)
		return false, nil
	}
	return e == nil, e
}

// sumMeta adds to meta the object's checksum of algorithm alg (if the
// upload has one), its type, and its parts' checksums.
func (q *request) sumMeta(meta map[string][]byte, alg, typ string, use []part, whole hash.Hash) *Error {
	if alg == "" {
		return nil
	}
	sum, e := q.uploadSum(alg, typ, use, whole)
	if e != nil {
		return e
	}
	meta[xaChecksum+alg] = []byte(sum)
	meta[xaChecksumType] = []byte(typ)
	ps := make([]string, len(use))
	for i, p := range use {
		ps[i] = string(p.attrs[xaChecksum+alg])
	}
	meta[xaPartSums] = []byte(strings.Join(ps, ","))
	return nil
}

// fullSum is the FULL_OBJECT checksum of the parts in use, combined from
// theirs; false if one was uploaded without its checksum.
func fullSum(alg string, use []part) (string, bool) {
	sums := make([]string, len(use))
	sizes := make([]int64, len(use))
	for i, p := range use {
		sums[i], sizes[i] = string(p.attrs[xaChecksum+alg]), p.fi.Size
	}
	return combineSums(alg, sums, sizes)
}

// finishUpload removes a completed upload's parts (those joined are gone
// already) and marks the upload done: its directory stays a while as the
// record that answers a repeated Complete.
func (q *request) finishUpload(id string, stored []part, etag string) {
	for _, p := range stored {
		q.g.c.Remove(q.ctx, p.fi.Path, false)
	}
	if err := q.g.c.SetXattr(q.ctx, q.uploadDir(id), xaUploadDone, []byte(etag), ""); err != nil {
		q.g.log.Warn("s3: a completed upload was not marked done", "dir", q.uploadDir(id), "err", err)
	}
}

// completed answers a CompleteMultipartUpload that has succeeded, with
// the object's checksum if it has one.
func (q *request) completed(etag string, meta map[string][]byte) *Error {
	res := struct {
		XMLName           xml.Name `xml:"CompleteMultipartUploadResult"`
		NS                string   `xml:"xmlns,attr"`
		Location          string
		Bucket            string
		Key               string
		ETag              string
		ChecksumCRC32     string `xml:",omitempty"`
		ChecksumCRC32C    string `xml:",omitempty"`
		ChecksumCRC64NVME string `xml:",omitempty"`
		ChecksumSHA1      string `xml:",omitempty"`
		ChecksumSHA256    string `xml:",omitempty"`
		ChecksumType      string `xml:",omitempty"`
	}{NS: s3NS, Location: "/" + q.bucket + "/" + q.object, Bucket: q.bucket, Key: q.object, ETag: `"` + etag + `"`}
	res.ChecksumCRC32, res.ChecksumCRC32C, res.ChecksumCRC64NVME = string(meta[xaChecksum+"crc32"]), string(meta[xaChecksum+"crc32c"]), string(meta[xaChecksum+"crc64nvme"])
	res.ChecksumSHA1, res.ChecksumSHA256, res.ChecksumType = string(meta[xaChecksum+"sha1"]), string(meta[xaChecksum+"sha256"]), string(meta[xaChecksumType])
	return q.reply(200, res)
}

// abortUpload serves AbortMultipartUpload.
func (q *request) abortUpload() *Error {
	id := q.r.URL.Query().Get("uploadId")
	if _, e := q.upload(id); e != nil {
		return e
	}
	if err := q.g.c.Remove(q.ctx, q.uploadDir(id), true); err != nil && !errors.Is(err, api.ErrNotFound) {
		return fromStrata(err, q.object)
	}
	q.w.WriteHeader(204)
	return nil
}

// listUploads serves ListMultipartUploads.
func (q *request) listUploads() *Error {
	if e := q.bucketExists(); e != nil {
		return e
	}
	qs := q.r.URL.Query()
	prefix, delim, keyMarker, idMarker := qs.Get("prefix"), qs.Get("delimiter"), qs.Get("key-marker"), qs.Get("upload-id-marker")
	max, e := intParam(qs, "max-uploads", 1000)
	if e != nil {
		return e
	}
	max = min(max, 1000)
	ents, err := q.g.c.List(q.ctx, q.g.path(q.bucket, uploadsDir))
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return fromStrata(err, q.bucket)
	}
	type upload struct {
		Key          string
		UploadID     string `xml:"UploadId"`
		Initiator    owner
		Owner        owner
		StorageClass string
		Initiated    string
	}
	var all []upload
	for _, e := range ents {
		attrs, err := q.g.c.Xattrs(q.ctx, e.Path)
		key := string(attrs[xaUploadKey])
		if err != nil || key == "" || attrs[xaUploadDone] != nil || !strings.HasPrefix(key, prefix) {
			continue
		}
		t, _ := time.Parse(time.RFC3339Nano, string(attrs[xaUploadTime]))
		o := ownerOf(&e)
		all = append(all, upload{key, e.Name, o, o, q.g.classOf(string(attrs[xaUploadCOS])), t.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Key != all[j].Key {
			return all[i].Key < all[j].Key
		}
		return all[i].Initiated < all[j].Initiated
	})
	type cp struct{ Prefix string }
	var out []upload
	var prefixes []cp
	truncated := false
	var nextKey, nextID string
	for _, u := range all {
		if u.Key < keyMarker || u.Key == keyMarker && (idMarker == "" || u.UploadID <= idMarker) {
			continue
		}
		if len(out)+len(prefixes) == max {
			truncated = true
			break
		}
		if delim != "" {
			if i := strings.Index(u.Key[len(prefix):], delim); i >= 0 {
				p := u.Key[:len(prefix)+i+len(delim)]
				if len(prefixes) == 0 || prefixes[len(prefixes)-1].Prefix != p {
					prefixes = append(prefixes, cp{p})
				}
				continue
			}
		}
		out = append(out, u)
		nextKey, nextID = u.Key, u.UploadID
	}
	return q.reply(200, struct {
		XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
		NS                 string   `xml:"xmlns,attr"`
		Bucket             string
		KeyMarker          string
		UploadIDMarker     string `xml:"UploadIdMarker"`
		NextKeyMarker      string
		NextUploadIDMarker string `xml:"NextUploadIdMarker"`
		Prefix             string
		Delimiter          string `xml:",omitempty"`
		MaxUploads         int
		IsTruncated        bool
		Uploads            []upload `xml:"Upload"`
		CommonPrefixes     []cp
	}{NS: s3NS, Bucket: q.bucket, KeyMarker: keyMarker, UploadIDMarker: idMarker, NextKeyMarker: nextKey, NextUploadIDMarker: nextID, Prefix: prefix, Delimiter: delim,
		MaxUploads: max, IsTruncated: truncated, Uploads: out, CommonPrefixes: prefixes})
}

// uploadSum is a completed upload's checksum: of the whole object
// (FULL_OBJECT: whole's, having hashed the parts as they were copied, or
// when nil combined from the parts' own), or of the parts' checksums
// with "-N" (COMPOSITE). A checksum the Complete request
// declares (x-amz-checksum-ALG) must be it.
func (q *request) uploadSum(alg, typ string, use []part, whole hash.Hash) (string, *Error) {
	var sum string
	switch {
	case whole != nil:
		sum = base64.StdEncoding.EncodeToString(whole.Sum(nil))
	case typ == "FULL_OBJECT":
		var ok bool
		if sum, ok = fullSum(alg, use); !ok {
			return "", s3err("InvalidRequest", 400, "a part was uploaded without its %s checksum", strings.ToUpper(alg))
		}
	default:
		h := checksumAlgs[alg]()
		for _, p := range use {
			d, err := base64.StdEncoding.DecodeString(string(p.attrs[xaChecksum+alg]))
			if err != nil || len(d) == 0 {
				return "", s3err("InvalidRequest", 400, "part %d was uploaded without its %s checksum", p.n, strings.ToUpper(alg))
			}
			h.Write(d)
		}
		sum = fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(use))
	}
	if want := q.r.Header.Get("x-amz-checksum-" + alg); want != "" && want != sum {
		return "", s3err("BadDigest", 400, "The %s you specified did not match the calculated checksum.", strings.ToUpper(alg))
	}
	return sum, nil
}
