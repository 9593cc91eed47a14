package s3

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/strata-storage/strata/internal/api"
)

// Error is an S3 error response: the code clients match on, its HTTP
// status and a message for people.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// s3err makes an Error.
func s3err(code string, status int, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

// The errors S3 defines that the gateway returns (codes and statuses as
// in AWS's error reference).
var (
	errAccessDenied = func(m string) *Error { return s3err("AccessDenied", 403, "%s", m) }
	errNoSuchBucket = func(b string) *Error { return s3err("NoSuchBucket", 404, "The specified bucket does not exist: %s", b) }
	errNoSuchKey    = func(k string) *Error { return s3err("NoSuchKey", 404, "The specified key does not exist: %s", k) }
	errNoSuchUpload = func(id string) *Error {
		return s3err("NoSuchUpload", 404, "The specified multipart upload does not exist: %s", id)
	}
	errInvalidArgument = func(format string, args ...any) *Error { return s3err("InvalidArgument", 400, format, args...) }
	errMalformedXML    = func(err error) *Error {
		return s3err("MalformedXML", 400, "The XML you provided was not well-formed: %v", err)
	}
	errNotImplemented     = func(what string) *Error { return s3err("NotImplemented", 501, "%s is not implemented by Strata", what) }
	errInvalidObjectState = func(k string) *Error {
		return s3err("InvalidObjectState", 403, "The operation is not valid for the object's storage class: %s is archived (restore it first)", k)
	}
	errPreconditionFailed = s3err("PreconditionFailed", 412, "At least one of the pre-conditions you specified did not hold")
)

// xmlError is the body of an error response.
type xmlError struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string `xml:",omitempty"`
	RequestID string `xml:"RequestId"`
}

// fromStrata maps an error of the client or core to S3's.
func fromStrata(err error, what string) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, api.ErrNotFound):
		return errNoSuchKey(what)
	case errors.Is(err, api.ErrDenied), errors.Is(err, api.ErrUnauthenticated):
		return errAccessDenied(err.Error())
	case errors.Is(err, api.ErrOffline):
		return errInvalidObjectState(what)
	case errors.Is(err, api.ErrNoSpace):
		return s3err("QuotaExceeded", 403, "%v", err) // as Ceph RGW, for quota and space
	case errors.Is(err, api.ErrNameTooLong):
		return s3err("KeyTooLongError", 400, "Your key is too long: %v", err)
	case errors.Is(err, api.ErrIsDir), errors.Is(err, api.ErrNotDir), errors.Is(err, api.ErrExist):
		// S3 keys "a" and "a/b" may both exist; a file system holds one.
		return s3err("ObjectNameConflict", 409, "%s: a key is both an object and a prefix of other objects (%v)", what, err)
	case errors.Is(err, api.ErrNotEmpty):
		return s3err("BucketNotEmpty", 409, "The bucket you tried to delete is not empty")
	case errors.Is(err, api.ErrInvalid):
		return errInvalidArgument("%v", err)
	case errors.Is(err, api.ErrCorrupt):
		return s3err("InternalError", 500, "stored data failed its checksum: %v", err)
	case errors.Is(err, api.ErrUnavailable):
		return s3err("ServiceUnavailable", 503, "%v", err)
	}
	return s3err("InternalError", 500, "%v", err)
}

// writeError sends e as S3 XML. A HEAD response has no body, so clients
// see only the status there.
func writeError(w http.ResponseWriter, r *http.Request, e *Error, reqID string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", reqID)
	w.WriteHeader(e.Status)
	if r.Method == http.MethodHead {
		return
	}
	body, _ := xml.Marshal(xmlError{Code: e.Code, Message: e.Message, Resource: r.URL.Path, RequestID: reqID})
	w.Write([]byte(xml.Header))
	w.Write(body)
}
