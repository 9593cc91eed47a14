package s3

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/api"
)

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

type owner struct {
	ID          string
	DisplayName string
}

func ownerOf(fi *client.FileInfo) owner {
	id := strconv.FormatUint(uint64(fi.UID), 10)
	return owner{ID: id, DisplayName: id}
}

// reply sends v as an XML document.
func (q *request) reply(status int, v any) *Error {
	body, err := xml.Marshal(v)
	if err != nil {
		return s3err("InternalError", 500, "%v", err)
	}
	if q.ka.end() {
		q.w.Write(body) // after the keep-alive's status and declaration
		return nil
	}
	q.w.Header().Set("Content-Type", "application/xml")
	q.w.WriteHeader(status)
	q.w.Write([]byte(xml.Header))
	q.w.Write(body)
	return nil
}

// serviceOp serves requests to "/": ListBuckets.
func (q *request) serviceOp() *Error {
	if q.r.Method != http.MethodGet {
		return s3err("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
	}
	ents, err := q.g.c.List(q.ctx, q.g.cfg.Root)
	if err != nil {
		return fromStrata(err, q.g.cfg.Root)
	}
	type bucket struct {
		Name         string
		CreationDate string
	}
	var res struct {
		XMLName           xml.Name `xml:"ListAllMyBucketsResult"`
		NS                string   `xml:"xmlns,attr"`
		Owner             owner
		Buckets           []bucket `xml:"Buckets>Bucket"`
		ContinuationToken string   `xml:",omitempty"`
		Prefix            string   `xml:",omitempty"`
	}
	qs := q.r.URL.Query()
	max, e := intParam(qs, "max-buckets", 10000)
	if e != nil || max < 1 {
		return errInvalidArgument("max-buckets must be an integer from 1 to 10000")
	}
	after := ""
	if t := qs.Get("continuation-token"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil {
			return errInvalidArgument("The continuation token provided is incorrect")
		}
		after = string(b)
	}
	res.NS, res.Prefix = s3NS, qs.Get("prefix")
	res.Owner = ownerOf(&client.FileInfo{UID: q.key.UID})
	for _, e := range ents {
		// Buckets are the caller's own directories, as S3 lists the
		// buckets a caller owns, in name order.
		if e.Type != client.TypeDir || e.UID != q.key.UID || validBucket(e.Name) != nil || e.Name <= after || !strings.HasPrefix(e.Name, res.Prefix) {
			continue
		}
		if len(res.Buckets) == max {
			res.ContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(res.Buckets[max-1].Name))
			break
		}
		res.Buckets = append(res.Buckets, bucket{Name: e.Name, CreationDate: e.Ctime.UTC().Format(time.RFC3339)})
	}
	return q.reply(200, res)
}

// validBucket checks a bucket name against S3's rules.
func validBucket(b string) *Error {
	bad := func(why string) *Error {
		return s3err("InvalidBucketName", 400, "The specified bucket is not valid: %s", why)
	}
	if len(b) < 3 || len(b) > 63 {
		return bad("a name is 3 to 63 characters long")
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return bad("only lower-case letters, digits, dots and hyphens")
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return bad("a name begins and ends with a letter or digit")
	}
	if strings.Contains(b, "..") || strings.Contains(b, ".-") || strings.Contains(b, "-.") {
		return bad("no two adjacent periods, nor a period beside a hyphen")
	}
	if f := strings.Split(b, "."); len(f) == 4 {
		ip := true
		for _, p := range f {
			if _, err := strconv.ParseUint(p, 10, 8); err != nil {
				ip = false
			}
		}
		if ip {
			return bad("a name is not an IP address")
		}
	}
	return nil
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// unsupportedBucket are bucket subresources the gateway does not serve,
// with what it answers to a GET of each (S3's answer for a bucket
// without that configuration, where there is one).
var unsupportedBucket = map[string]*Error{
	"policy":              s3err("NoSuchBucketPolicy", 404, "The bucket policy does not exist"),
	"lifecycle":           s3err("NoSuchLifecycleConfiguration", 404, "The lifecycle configuration does not exist"),
	"cors":                s3err("NoSuchCORSConfiguration", 404, "The CORS configuration does not exist"),
	"tagging":             s3err("NoSuchTagSet", 404, "The TagSet does not exist"),
	"website":             s3err("NoSuchWebsiteConfiguration", 404, "The specified bucket does not have a website configuration"),
	"encryption":          s3err("ServerSideEncryptionConfigurationNotFoundError", 404, "The server side encryption configuration was not found"),
	"object-lock":         s3err("ObjectLockConfigurationNotFoundError", 404, "Object Lock configuration does not exist for this bucket"),
	"replication":         s3err("ReplicationConfigurationNotFoundError", 404, "The replication configuration was not found"),
	"ownershipControls":   s3err("OwnershipControlsNotFoundError", 404, "The bucket ownership controls were not found"),
	"logging":             nil,
	"notification":        nil,
	"requestPayment":      nil,
	"accelerate":          nil,
	"analytics":           nil,
	"metrics":             nil,
	"inventory":           nil,
	"intelligent-tiering": nil,
	"publicAccessBlock":   s3err("NoSuchPublicAccessBlockConfiguration", 404, "The public access block configuration was not found"),
}

// bucketOp serves requests to "/bucket".
func (q *request) bucketOp() *Error {
	if e := validBucket(q.bucket); e != nil {
		if q.r.Method == http.MethodPut {
			return e
		}
		return errNoSuchBucket(q.bucket)
	}
	qs := q.r.URL.Query()
	for sub, e := range unsupportedBucket {
		if !qs.Has(sub) {
			continue
		}
		if q.r.Method == http.MethodGet && e != nil {
			if err := q.bucketExists(); err != nil {
				return err
			}
			return e
		}
		return errNotImplemented("the bucket's " + sub + " configuration")
	}
	switch q.r.Method {
	case http.MethodPut:
		switch {
		case qs.Has("versioning"):
			return errNotImplemented("versioning")
		case qs.Has("acl"):
			return q.putACL()
		}
		return q.createBucket()
	case http.MethodDelete:
		return q.deleteBucket()
	case http.MethodHead:
		if err := q.bucketExists(); err != nil {
			return err
		}
		q.w.Header().Set("x-amz-bucket-region", q.g.cfg.Region)
		q.w.WriteHeader(200)
		return nil
	case http.MethodPost:
		if qs.Has("delete") {
			return q.deleteObjects()
		}
		return s3err("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
	case http.MethodGet:
	default:
		return s3err("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
	}
	switch {
	case qs.Has("location"):
		if err := q.bucketExists(); err != nil {
			return err
		}
		loc := q.g.cfg.Region
		if loc == "us-east-1" {
			loc = "" // as AWS answers for us-east-1
		}
		return q.reply(200, struct {
			XMLName xml.Name `xml:"LocationConstraint"`
			NS      string   `xml:"xmlns,attr"`
			Value   string   `xml:",chardata"`
		}{NS: s3NS, Value: loc})
	case qs.Has("versioning"):
		if err := q.bucketExists(); err != nil {
			return err
		}
		return q.reply(200, struct {
			XMLName xml.Name `xml:"VersioningConfiguration"`
			NS      string   `xml:"xmlns,attr"`
		}{NS: s3NS})
	case qs.Has("acl"):
		return q.getACL("")
	case qs.Has("uploads"):
		return q.listUploads()
	case qs.Has("versions"):
		return q.listVersions()
	case qs.Get("list-type") == "2":
		return q.listObjects(2)
	}
	return q.listObjects(1)
}

// bucketExists is nil if the bucket exists and the caller may look at it.
func (q *request) bucketExists() *Error {
	fi, err := q.g.c.Stat(q.ctx, q.g.path(q.bucket, ""))
	if errors.Is(err, api.ErrNotFound) || err == nil && fi.Type != client.TypeDir {
		return errNoSuchBucket(q.bucket)
	}
	if err != nil {
		return fromStrata(err, q.bucket)
	}
	return nil
}

// createBucket makes the bucket's directory, private to its owner (S3's
// default: only the owner may list or write it).
func (q *request) createBucket() *Error {
	if q.size > 0 {
		// A CreateBucketConfiguration names a location; any is taken.
		var cfg struct {
			LocationConstraint string
		}
		if err := xml.NewDecoder(io.LimitReader(q.body, 64<<10)).Decode(&cfg); err != nil {
			return errMalformedXML(err)
		}
	}
	p := q.g.path(q.bucket, "")
	_, err := q.g.c.Mkdir(q.ctx, p, false, 0o700)
	if errors.Is(err, api.ErrExist) {
		fi, serr := q.g.c.Stat(q.ctx, p)
		if serr == nil && fi.UID == q.key.UID {
			if q.g.cfg.Region == "us-east-1" {
				// us-east-1 answers a re-creation by the owner with 200
				// (and leaves the bucket as it is); other regions 409.
				q.w.Header().Set("Location", "/"+q.bucket)
				q.w.WriteHeader(200)
				return nil
			}
			return s3err("BucketAlreadyOwnedByYou", 409, "Your previous request to create the named bucket succeeded and you already own it.")
		}
		return s3err("BucketAlreadyExists", 409, "The requested bucket name is not available. Select a different name and try again.")
	}
	if err != nil {
		return fromStrata(err, q.bucket)
	}
	q.w.Header().Set("Location", "/"+q.bucket)
	q.w.WriteHeader(200)
	return nil
}

// deleteBucket removes an empty bucket (and what is left of aborted
// multipart uploads in it).
func (q *request) deleteBucket() *Error {
	if err := q.bucketExists(); err != nil {
		return err
	}
	p := q.g.path(q.bucket, "")
	ents, err := q.g.c.List(q.ctx, p)
	if err != nil {
		return fromStrata(err, q.bucket)
	}
	for _, e := range ents {
		if e.Name != uploadsDir {
			return s3err("BucketNotEmpty", 409, "The bucket you tried to delete is not empty")
		}
	}
	if len(ents) > 0 {
		if err := q.g.c.Remove(q.ctx, p+"/"+uploadsDir, true); err != nil && !errors.Is(err, api.ErrNotFound) {
			return fromStrata(err, q.bucket)
		}
	}
	if err := q.g.c.Remove(q.ctx, p, false); err != nil {
		return fromStrata(err, q.bucket)
	}
	q.w.WriteHeader(204)
	return nil
}

// getACL answers with the one ACL Strata's permissions amount to: the
// owner has full control. (Access is decided by POSIX permissions.)
func (q *request) getACL(key string) *Error {
	fi, err := q.g.c.Stat(q.ctx, q.g.path(q.bucket, key))
	if err != nil {
		if key == "" && errors.Is(err, api.ErrNotFound) {
			return errNoSuchBucket(q.bucket)
		}
		return fromStrata(err, key)
	}
	type grantee struct {
		XMLNS       string `xml:"xmlns:xsi,attr"`
		Type        string `xml:"xsi:type,attr"`
		ID          string
		DisplayName string
	}
	type grant struct {
		Grantee    grantee
		Permission string
	}
	o := ownerOf(fi)
	return q.reply(200, struct {
		XMLName xml.Name `xml:"AccessControlPolicy"`
		NS      string   `xml:"xmlns,attr"`
		Owner   owner
		Grants  []grant `xml:"AccessControlList>Grant"`
	}{NS: s3NS, Owner: o, Grants: []grant{{Grantee: grantee{XMLNS: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: o.ID, DisplayName: o.DisplayName}, Permission: "FULL_CONTROL"}}})
}

// putACL accepts the private canned ACL, which is what Strata's
// permissions already give, and refuses the others.
func (q *request) putACL() *Error {
	if acl := q.r.Header.Get("x-amz-acl"); acl != "" && acl != "private" {
		return errNotImplemented("the canned ACL " + acl + " (access follows the files' permissions)")
	}
	if q.size > 0 || q.r.Header.Get("x-amz-grant-full-control") != "" || q.r.Header.Get("x-amz-grant-read") != "" {
		return errNotImplemented("ACL grants (access follows the files' permissions)")
	}
	q.w.WriteHeader(200)
	return nil
}

// listObjects serves ListObjects (v1) and ListObjectsV2.
func (q *request) listObjects(version int) *Error {
	qs := q.r.URL.Query()
	prefix, delim := qs.Get("prefix"), qs.Get("delimiter")
	max, e := intParam(qs, "max-keys", 1000)
	if e != nil {
		return e
	}
	max = min(max, 1000)
	encode := qs.Get("encoding-type")
	if encode != "" && encode != "url" {
		return errInvalidArgument("Invalid Encoding Method specified in Request")
	}
	after := qs.Get("marker")
	token := qs.Get("continuation-token")
	if version == 2 {
		after = qs.Get("start-after")
		if token != "" {
			b, err := base64.RawURLEncoding.DecodeString(token)
			if err != nil {
				return errInvalidArgument("The continuation token provided is incorrect")
			}
			after = max2(after, string(b))
		}
	}
	var tokenEcho *string // echoed when given, even empty
	if qs.Has("continuation-token") {
		tokenEcho = &token
	}
	if err := q.bucketExists(); err != nil {
		return err
	}
	l, err := q.g.list(q.ctx, q.bucket, prefix, delim, after, max)
	if err != nil {
		return fromStrata(err, q.bucket)
	}
	enc := func(s string) string {
		if encode == "url" {
			return awsEscape(s, false)
		}
		return s
	}
	type content struct {
		Key          string
		LastModified string
		ETag         string
		Size         int64
		StorageClass string
		Owner        *owner `xml:",omitempty"`
	}
	type cp struct {
		Prefix string
	}
	etags := q.g.etags(q.ctx, l.objects)
	var contents []content
	for i, o := range l.objects {
		c := content{Key: enc(o.key), LastModified: o.fi.Mtime.UTC().Format("2006-01-02T15:04:05.000Z"), ETag: `"` + etags[i] + `"`, Size: o.fi.Size, StorageClass: q.g.classOf(o.fi.COS)}
		if o.dir {
			c.Size = 0
		}
		if version == 1 || qs.Get("fetch-owner") == "true" {
			ow := ownerOf(&o.fi)
			c.Owner = &ow
		}
		contents = append(contents, c)
	}
	var prefixes []cp
	for _, p := range l.prefixes {
		prefixes = append(prefixes, cp{enc(p)})
	}
	if version == 1 {
		var next string
		if l.truncated && delim != "" {
			next = enc(l.last) // S3 sends NextMarker only with a delimiter
		}
		return q.reply(200, struct {
			XMLName        xml.Name `xml:"ListBucketResult"`
			NS             string   `xml:"xmlns,attr"`
			Name           string
			Prefix         string
			Marker         string
			NextMarker     string `xml:",omitempty"`
			MaxKeys        int
			Delimiter      string `xml:",omitempty"`
			EncodingType   string `xml:",omitempty"`
			IsTruncated    bool
			Contents       []content
			CommonPrefixes []cp
		}{NS: s3NS, Name: q.bucket, Prefix: prefix, Marker: enc(qs.Get("marker")), NextMarker: next, MaxKeys: max, Delimiter: enc(delim), EncodingType: encode,
			IsTruncated: l.truncated, Contents: contents, CommonPrefixes: prefixes})
	}
	var next string
	if l.truncated {
		next = base64.RawURLEncoding.EncodeToString([]byte(l.last))
	}
	return q.reply(200, struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		NS                    string   `xml:"xmlns,attr"`
		Name                  string
		Prefix                string
		StartAfter            string  `xml:",omitempty"`
		ContinuationToken     *string `xml:",omitempty"`
		NextContinuationToken string  `xml:",omitempty"`
		KeyCount              int
		MaxKeys               int
		Delimiter             string `xml:",omitempty"`
		EncodingType          string `xml:",omitempty"`
		IsTruncated           bool
		Contents              []content
		CommonPrefixes        []cp
	}{NS: s3NS, Name: q.bucket, Prefix: enc(prefix), StartAfter: enc(qs.Get("start-after")), ContinuationToken: tokenEcho, NextContinuationToken: next,
		KeyCount: len(contents) + len(prefixes), MaxKeys: max, Delimiter: enc(delim), EncodingType: encode, IsTruncated: l.truncated, Contents: contents, CommonPrefixes: prefixes})
}

// intParam reads a non-negative integer query parameter, def if absent.
func intParam(qs url.Values, name string, def int) (int, *Error) {
	v := qs.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errInvalidArgument("%s %q is not a non-negative integer", name, v)
	}
	return n, nil
}

func max2(a, b string) string {
	if a > b {
		return a
	}
	return b
}

// listVersions serves ListObjectVersions for an unversioned bucket, as S3
// does: every object is its only version, "null", the latest.
func (q *request) listVersions() *Error {
	qs := q.r.URL.Query()
	prefix, delim, after := qs.Get("prefix"), qs.Get("delimiter"), qs.Get("key-marker")
	max, e := intParam(qs, "max-keys", 1000)
	if e != nil {
		return e
	}
	max = min(max, 1000)
	if e := q.bucketExists(); e != nil {
		return e
	}
	l, err := q.g.list(q.ctx, q.bucket, prefix, delim, after, max)
	if err != nil {
		return fromStrata(err, q.bucket)
	}
	type version struct {
		Key          string
		VersionID    string `xml:"VersionId"`
		IsLatest     bool
		LastModified string
		ETag         string
		Size         int64
		StorageClass string
		Owner        owner
	}
	type cp struct{ Prefix string }
	etags := q.g.etags(q.ctx, l.objects)
	var vs []version
	for i, o := range l.objects {
		vs = append(vs, version{o.key, "null", true, o.fi.Mtime.UTC().Format("2006-01-02T15:04:05.000Z"), `"` + etags[i] + `"`, o.fi.Size, q.g.classOf(o.fi.COS), ownerOf(&o.fi)})
	}
	var prefixes []cp
	for _, p := range l.prefixes {
		prefixes = append(prefixes, cp{p})
	}
	var next, nextVersion string
	if l.truncated {
		next, nextVersion = l.last, "null"
	}
	return q.reply(200, struct {
		XMLName             xml.Name `xml:"ListVersionsResult"`
		NS                  string   `xml:"xmlns,attr"`
		Name                string
		Prefix              string
		KeyMarker           string
		VersionIDMarker     string `xml:"VersionIdMarker"`
		NextKeyMarker       string `xml:",omitempty"`
		NextVersionIDMarker string `xml:"NextVersionIdMarker,omitempty"`
		MaxKeys             int
		Delimiter           string `xml:",omitempty"`
		IsTruncated         bool
		Versions            []version `xml:"Version"`
		CommonPrefixes      []cp
	}{NS: s3NS, Name: q.bucket, Prefix: prefix, KeyMarker: after, VersionIDMarker: qs.Get("version-id-marker"), NextKeyMarker: next, NextVersionIDMarker: nextVersion,
		MaxKeys: max, Delimiter: delim, IsTruncated: l.truncated, Versions: vs, CommonPrefixes: prefixes})
}
