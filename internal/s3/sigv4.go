package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, as S3 checks it: in the Authorization header,
// in a presigned URL's query, and chunk by chunk in an aws-chunked body.
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	amzDateForm  = "20060102T150405Z"
	// maxSkew is how far a request's time may be from the server's.
	maxSkew = 15 * time.Minute
	// maxPresign is the longest a presigned URL may live (seven days).
	maxPresign = 7 * 24 * time.Hour

	unsignedPayload        = "UNSIGNED-PAYLOAD"
	streamingSigned        = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingSignedTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	emptySHA256            = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// sigRequest is what a request says about its signature.
type sigRequest struct {
	accessKey     string
	date          string // yyyymmdd of the scope
	region        string
	amzDate       string // the request's time, amzDateForm
	signedHeaders []string
	signature     string
	presigned     bool
	expires       time.Duration // presigned only
	payload       string        // x-amz-content-sha256, or UNSIGNED-PAYLOAD
}

// scope is the credential scope the signature was made for.
func (s *sigRequest) scope() string { return s.date + "/" + s.region + "/s3/aws4_request" }

// parseSig reads the signature of r, from its Authorization header or its
// query. ok is false for a request with neither (anonymous).
func parseSig(r *http.Request) (s *sigRequest, ok bool, e *Error) {
	if h := r.Header.Get("Authorization"); h != "" {
		s, e = parseAuthHeader(h)
		if e != nil {
			return nil, true, e
		}
		s.amzDate = r.Header.Get("X-Amz-Date")
		if s.amzDate == "" {
			if d, err := http.ParseTime(r.Header.Get("Date")); err == nil {
				s.amzDate = d.UTC().Format(amzDateForm)
			}
		}
		s.payload = r.Header.Get("X-Amz-Content-Sha256")
		if s.payload == "" {
			return nil, true, s3err("InvalidRequest", 400, "Missing required header for this request: x-amz-content-sha256")
		}
		return s, true, nil
	}
	q := r.URL.Query()
	if q.Get("X-Amz-Algorithm") == "" && q.Get("X-Amz-Signature") == "" {
		if q.Get("AWSAccessKeyId") != "" {
			return nil, true, s3err("InvalidRequest", 400, "Signature Version 2 is not supported; use Signature Version 4")
		}
		return nil, false, nil
	}
	if q.Get("X-Amz-Algorithm") != sigAlgorithm {
		return nil, true, s3err("AuthorizationQueryParametersError", 400, "X-Amz-Algorithm must be %s", sigAlgorithm)
	}
	s = &sigRequest{presigned: true, amzDate: q.Get("X-Amz-Date"), signature: q.Get("X-Amz-Signature"), payload: unsignedPayload}
	if e := s.setCredential(q.Get("X-Amz-Credential")); e != nil {
		return nil, true, e
	}
	s.signedHeaders = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 0 {
		return nil, true, s3err("AuthorizationQueryParametersError", 400, "X-Amz-Expires must be a non-negative integer")
	}
	if s.expires = time.Duration(secs) * time.Second; s.expires > maxPresign {
		return nil, true, s3err("AuthorizationQueryParametersError", 400, "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than 604800 seconds")
	}
	if p := r.Header.Get("X-Amz-Content-Sha256"); p != "" {
		s.payload = p
	}
	return s, true, nil
}

// parseAuthHeader reads "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…".
func parseAuthHeader(h string) (*sigRequest, *Error) {
	alg, rest, _ := strings.Cut(h, " ")
	if alg != sigAlgorithm {
		if alg == "AWS" {
			return nil, s3err("InvalidRequest", 400, "Signature Version 2 is not supported; use Signature Version 4")
		}
		return nil, s3err("InvalidArgument", 400, "Unsupported Authorization Type %q", alg)
	}
	s := &sigRequest{}
	var cred string
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			s.signedHeaders = strings.Split(v, ";")
		case "Signature":
			s.signature = v
		}
	}
	if cred == "" || len(s.signedHeaders) == 0 || s.signature == "" {
		return nil, s3err("AuthorizationHeaderMalformed", 400, "The authorization header is malformed; it needs Credential, SignedHeaders and Signature")
	}
	if e := s.setCredential(cred); e != nil {
		return nil, e
	}
	return s, nil
}

// setCredential reads "AKID/20130524/us-east-1/s3/aws4_request".
func (s *sigRequest) setCredential(cred string) *Error {
	f := strings.Split(cred, "/")
	if len(f) != 5 || f[0] == "" || len(f[1]) != 8 || f[3] != "s3" || f[4] != "aws4_request" {
		return s3err("AuthorizationHeaderMalformed", 400, "The credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/s3/aws4_request\"", cred)
	}
	s.accessKey, s.date, s.region = f[0], f[1], f[2]
	return nil
}

// checkTime refuses a request whose time is malformed, too far from now,
// or (presigned) past its expiry.
func (s *sigRequest) checkTime(now time.Time) *Error {
	t, err := time.Parse(amzDateForm, s.amzDate)
	if err != nil {
		return s3err("AccessDenied", 403, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if !strings.HasPrefix(s.amzDate, s.date) {
		return s3err("SignatureDoesNotMatch", 403, "The credential's date %s is not the request's %s", s.date, s.amzDate)
	}
	if s.presigned {
		if now.After(t.Add(s.expires)) {
			return s3err("AccessDenied", 403, "Request has expired")
		}
		if t.After(now.Add(maxSkew)) {
			return s3err("AccessDenied", 403, "Request is not valid yet")
		}
		return nil
	}
	if d := now.Sub(t); d > maxSkew || d < -maxSkew {
		return s3err("RequestTimeTooSkewed", 403, "The difference between the request time (%s) and the server's time (%s) is too large", t.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// signingKey derives the day's key for the scope from the secret.
func signingKey(secret, date, region string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, "s3")
	return hmacSHA256(k, "aws4_request")
}

// stringToSign is what a request's signature signs.
func (s *sigRequest) stringToSign(canonical string) string {
	return sigAlgorithm + "\n" + s.amzDate + "\n" + s.scope() + "\n" + sha256Hex([]byte(canonical))
}

// verify checks s's signature of r with the key derived from secret.
// The path is tried as the client sent it and, failing that, encoded
// the way AWS's SDKs encode it (clients differ in what they escape).
func (s *sigRequest) verify(r *http.Request, key []byte) *Error {
	for _, p := range []string{rawPath(r), awsEscape(r.URL.Path, false)} {
		sig := hex.EncodeToString(hmacSHA256(key, s.stringToSign(s.canonicalRequest(r, p))))
		if hmac.Equal([]byte(sig), []byte(s.signature)) {
			return nil
		}
	}
	return s3err("SignatureDoesNotMatch", 403, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}

// rawPath is the request's path as it came on the wire.
func rawPath(r *http.Request) string {
	p := r.RequestURI
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if p == "" || p[0] != '/' { // absolute-form request
		return r.URL.EscapedPath()
	}
	return p
}

// canonicalRequest is SigV4's canonical form of r with path as given.
func (s *sigRequest) canonicalRequest(r *http.Request, path string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, s.presigned))
	b.WriteByte('\n')
	for _, h := range s.signedHeaders {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(headerValue(r, h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(s.signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(s.payload)
	return b.String()
}

// headerValue is a signed header's canonical value: its values joined by
// commas, each trimmed with inner runs of spaces made one.
func headerValue(r *http.Request, name string) string {
	var vals []string
	switch name {
	case "host":
		vals = []string{r.Host}
	case "content-length":
		if v := r.Header.Get("Content-Length"); v != "" {
			vals = []string{v}
		} else {
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	case "transfer-encoding":
		vals = r.TransferEncoding
	default:
		vals = r.Header.Values(name)
	}
	for i, v := range vals {
		vals[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(vals, ",")
}

// canonicalQuery sorts the query's parameters by name then value, each
// encoded as AWS does; a presigned URL's own signature is left out.
func canonicalQuery(raw string, presigned bool) string {
	if raw == "" {
		return ""
	}
	var pairs []string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			k, v = kv, "" // unsignable: the signature will not match
		}
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, awsEscape(k, true)+"="+awsEscape(v, true))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// awsEscape percent-encodes s as SigV4 asks: every byte but A–Z, a–z,
// 0–9, '-', '_', '.', '~' (and '/' in a path) as %XX in upper case.
func awsEscape(s string, slash bool) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}

// Sign signs r as an S3 client does, in its Authorization header, with
// the payload hash r's X-Amz-Content-Sha256 names (UNSIGNED-PAYLOAD if
// none): what Strata's own tools (bench/s3bench) and tests need to speak
// to a gateway without an AWS SDK.
func Sign(r *http.Request, accessKey, secret, region string, now time.Time) {
	now = now.UTC()
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = unsignedPayload
	}
	s := &sigRequest{accessKey: accessKey, date: now.Format("20060102"), region: region, amzDate: now.Format(amzDateForm), payload: payload,
		signedHeaders: []string{"host", "x-amz-content-sha256", "x-amz-date"}}
	r.Header.Set("X-Amz-Date", s.amzDate)
	r.Header.Set("X-Amz-Content-Sha256", s.payload)
	key := signingKey(secret, s.date, s.region)
	sig := hex.EncodeToString(hmacSHA256(key, s.stringToSign(s.canonicalRequest(r, awsEscape(r.URL.Path, false)))))
	r.Header.Set("Authorization", sigAlgorithm+" Credential="+accessKey+"/"+s.scope()+", SignedHeaders="+strings.Join(s.signedHeaders, ";")+", Signature="+sig)
}
