package s3

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// AWS's published examples of Signature Version 4 for S3 (Authenticating
// Requests: Using the Authorization Header, Using Query Parameters,
// Transferring Payload in Multiple Chunks), with AWS's example key.
const (
	exampleKey    = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func exampleRequest(method, target string, body string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Host = "examplebucket.s3.amazonaws.com"
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func auth(signed, sig string) string {
	return "AWS4-HMAC-SHA256 Credential=" + exampleKey + "/20130524/us-east-1/s3/aws4_request,SignedHeaders=" + signed + ",Signature=" + sig
}

func TestSigV4Examples(t *testing.T) {
	now, _ := time.Parse(amzDateForm, "20130524T000000Z")
	for _, c := range []struct {
		name string
		r    *http.Request
	}{
		{"GET object", exampleRequest("GET", "/test.txt", "", map[string]string{"Range": "bytes=0-9", "x-amz-content-sha256": emptySHA256, "x-amz-date": "20130524T000000Z",
			"Authorization": auth("host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")})},
		{"PUT object", exampleRequest("PUT", "/test%24file.text", "Welcome to Amazon S3.", map[string]string{"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-date": "20130524T000000Z",
			"x-amz-storage-class": "REDUCED_REDUNDANCY", "x-amz-content-sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			"Authorization": auth("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")})},
		{"GET lifecycle", exampleRequest("GET", "/?lifecycle", "", map[string]string{"x-amz-date": "20130524T000000Z", "x-amz-content-sha256": emptySHA256,
			"Authorization": auth("host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")})},
		{"list objects", exampleRequest("GET", "/?max-keys=2&prefix=J", "", map[string]string{"x-amz-date": "20130524T000000Z", "x-amz-content-sha256": emptySHA256,
			"Authorization": auth("host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")})},
		{"presigned GET", exampleRequest("GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404", "", nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ok, e := parseSig(c.r)
			if e != nil || !ok {
				t.Fatalf("parse: %v %v", ok, e)
			}
			if e := s.checkTime(now.Add(time.Minute)); e != nil {
				t.Fatalf("time: %v", e)
			}
			key := signingKey(exampleSecret, s.date, s.region)
			if e := s.verify(c.r, key); e != nil {
				t.Fatalf("the example's signature does not verify: %v", e)
			}
			// One byte of the signature changed fails.
			b := []byte(s.signature)
			b[0] ^= 1 // '0'↔'1', 'a'↔'`', …: another signature
			s.signature = string(b)
			if e := s.verify(c.r, key); e == nil || e.Code != "SignatureDoesNotMatch" {
				t.Fatalf("a wrong signature verifies: %v", e)
			}
		})
	}
}

func TestSigTimes(t *testing.T) {
	now, _ := time.Parse(amzDateForm, "20130524T000000Z")
	r := exampleRequest("GET", "/test.txt", "", map[string]string{"x-amz-content-sha256": emptySHA256, "x-amz-date": "20130524T000000Z",
		"Authorization": auth("host;x-amz-content-sha256;x-amz-date", "00")})
	s, _, _ := parseSig(r)
	if e := s.checkTime(now.Add(16 * time.Minute)); e == nil || e.Code != "RequestTimeTooSkewed" {
		t.Fatalf("16 min late: %v", e)
	}
	if e := s.checkTime(now.Add(-16 * time.Minute)); e == nil || e.Code != "RequestTimeTooSkewed" {
		t.Fatalf("16 min early: %v", e)
	}
	p := exampleRequest("GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=00", "", nil)
	s, _, _ = parseSig(p)
	if e := s.checkTime(now.Add(61 * time.Second)); e == nil || e.Code != "AccessDenied" || !strings.Contains(e.Message, "expired") {
		t.Fatalf("expired presigned URL: %v", e)
	}
	for _, bad := range []string{"X-Amz-Expires=604801", "X-Amz-Expires=-1", "X-Amz-Expires=x"} {
		p := exampleRequest("GET", "/t?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"+bad+"&X-Amz-SignedHeaders=host&X-Amz-Signature=00", "", nil)
		if _, _, e := parseSig(p); e == nil || e.Code != "AuthorizationQueryParametersError" {
			t.Errorf("%s: %v", bad, e)
		}
	}
}

// TestChunkedExample decodes AWS's example of a body in signed chunks:
// 65,536 bytes of 'a' and 1,024 more, each chunk signed in a chain from
// the request's signature.
func TestChunkedExample(t *testing.T) {
	s := &sigRequest{date: "20130524", region: "us-east-1", amzDate: "20130524T000000Z", payload: streamingSigned,
		signature: "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"}
	body := func(sig2 string) string {
		return "10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n" + strings.Repeat("a", 65536) + "\r\n" +
			"400;chunk-signature=" + sig2 + "\r\n" + strings.Repeat("a", 1024) + "\r\n" +
			"0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"
	}
	key := signingKey(exampleSecret, s.date, s.region)
	got, err := io.ReadAll(newChunkedReader(strings.NewReader(body("0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497")), key, s))
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte("a"), 66560)) {
		t.Fatalf("decoded %d bytes, %v", len(got), err)
	}
	_, err = io.ReadAll(newChunkedReader(strings.NewReader(body("1055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497")), key, s))
	var e *Error
	if !errors.As(err, &e) || e.Code != "SignatureDoesNotMatch" {
		t.Fatalf("a chunk with a wrong signature: %v", err)
	}
}

// TestChunkedMalformed: bodies cut short or malformed end in an error,
// never in data passed as whole.
func TestChunkedMalformed(t *testing.T) {
	for _, body := range []string{
		"", "5\r\nhello", "5\r\nhello\r\n", "5\r\nhelloX\r\n0\r\n\r\n", "zz\r\nhello\r\n0\r\n\r\n", "-1\r\n",
		"5\r\nhello\r\n0\r\nx-amz-checksum-crc32\r\n\r\n", "5\nhello\n0\n\n", strings.Repeat("1", 5000) + "\r\n",
	} {
		_, err := io.ReadAll(newChunkedReader(strings.NewReader(body), nil, &sigRequest{payload: streamingUnsignedTrail}))
		if err == nil {
			t.Errorf("%q: decoded without error", body)
		}
	}
	cr := newChunkedReader(strings.NewReader("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), nil, &sigRequest{payload: streamingUnsignedTrail})
	if got, err := io.ReadAll(cr); err != nil || string(got) != "hello" || cr.trailers["x-amz-checksum-crc32"] != "NhCmhg==" {
		t.Fatalf("unsigned with trailer: %q %v %v", got, err, cr.trailers)
	}
}

func FuzzChunked(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), false)
	f.Add([]byte("10000;chunk-signature=ad80\r\naaaa\r\n0;chunk-signature=b6\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, body []byte, signed bool) {
		s := &sigRequest{date: "20130524", region: "us-east-1", amzDate: "20130524T000000Z", payload: streamingUnsignedTrail, signature: "00"}
		var key []byte
		if signed {
			s.payload, key = streamingSignedTrailer, signingKey(exampleSecret, s.date, s.region)
		}
		got, err := io.ReadAll(newChunkedReader(bytes.NewReader(body), key, s))
		if err == nil && signed {
			t.Fatalf("a body with made-up signatures decoded: %q", got)
		}
		if len(got) > len(body) {
			t.Fatalf("decoded %d bytes from %d", len(got), len(body))
		}
	})
}

func FuzzAuthHeader(f *testing.F) {
	f.Add(auth("host;x-amz-date", "abc"), "20130524T000000Z", "/a/b?c=d&e")
	f.Add("AWS AKID:sig", "", "/")
	f.Fuzz(func(t *testing.T, h, date, target string) {
		r, err := http.NewRequest("GET", "http://h"+target, nil)
		if err != nil {
			return
		}
		r.Header.Set("Authorization", h)
		r.Header.Set("x-amz-date", date)
		r.Header.Set("x-amz-content-sha256", emptySHA256)
		s, ok, e := parseSig(r)
		if e != nil || !ok {
			return
		}
		s.checkTime(time.Now())
		if s.verify(r, signingKey("secret", s.date, s.region)) == nil {
			t.Fatalf("a made-up signature verified: %q", h)
		}
	})
}

// TestSignVerifies: what Sign makes, the gateway's check accepts, and
// with another secret it does not.
func TestSignVerifies(t *testing.T) {
	now := time.Now()
	for _, target := range []string{"/b/k", "/b/a%20b/ü?list-type=2&prefix=a%2Fb", "/"} {
		r := httptest.NewRequest("PUT", target, nil)
		Sign(r, "AKID", "secret", "eu-west-1", now)
		s, ok, e := parseSig(r)
		if e != nil || !ok || s.checkTime(now) != nil {
			t.Fatalf("%s: %v %v", target, ok, e)
		}
		if e := s.verify(r, signingKey("secret", s.date, s.region)); e != nil {
			t.Errorf("%s: %v", target, e)
		}
		if e := s.verify(r, signingKey("other", s.date, s.region)); e == nil {
			t.Errorf("%s: verified with another secret", target)
		}
	}
}
