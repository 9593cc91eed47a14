// Command s3sink is an S3 endpoint that keeps nothing: what a client
// PUTs is read and dropped, and a GET is answered with bytes from memory.
// It does no signature check, no hashing, no disk I/O. bench/s3.sh runs
// the same aws cli (and boto3) commands against it as against Strata's
// gateway: what the client alone can move on this machine, the ceiling
// that any gateway's figure sits under.
//
//	s3sink --listen 127.0.0.1:7470
//
// It answers the calls a client makes to copy one object each way:
// CreateMultipartUpload, UploadPart, CompleteMultipartUpload, PutObject,
// HeadObject, GetObject (with Range), DeleteObject, HeadBucket and
// CreateBucket. An object's size is what was PUT under its key.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// etag is every object's: the sink hashes nothing, and the clients
// measured here do not check an ETag against the data.
const etag = `"00000000000000000000000000000000"`

type sink struct {
	mu    sync.Mutex
	sizes map[string]int64 // key -> size, as PUT
	parts map[string]int64 // upload id -> bytes so far
	next  int
}

var zeros = make([]byte, 1<<20)

func main() {
	listen := flag.String("listen", "127.0.0.1:7470", "address to serve on")
	flag.Parse()
	s := &sink{sizes: map[string]int64{}, parts: map[string]int64{}}
	srv := &http.Server{Addr: *listen, Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	q := r.URL.Query()
	w.Header().Set("x-amz-request-id", "sink")
	switch {
	case !strings.Contains(key, "/"): // the bucket itself
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && q.Has("uploads"):
		s.mu.Lock()
		s.next++
		id := strconv.Itoa(s.next)
		s.parts[id] = 0
		s.mu.Unlock()
		b, k, _ := strings.Cut(key, "/")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>`, b, k, id)
	case r.Method == http.MethodPut:
		n, err := io.CopyBuffer(io.Discard, r.Body, make([]byte, 256<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		if id := q.Get("uploadId"); id != "" {
			s.parts[id] += n
		} else {
			s.sizes[key] = n
		}
		s.mu.Unlock()
		w.Header().Set("ETag", etag)
	case r.Method == http.MethodPost && q.Has("uploadId"):
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.sizes[key] = s.parts[q.Get("uploadId")]
		delete(s.parts, q.Get("uploadId"))
		s.mu.Unlock()
		b, k, _ := strings.Cut(key, "/")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key><ETag>%s</ETag></CompleteMultipartUploadResult>`, b, k, etag)
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		delete(s.sizes, key)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		s.mu.Lock()
		size, ok := s.sizes[key]
		s.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			if r.Method == http.MethodGet {
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			}
			return
		}
		s.get(w, r, size)
	default:
		http.Error(w, "s3sink answers only the calls of a copy each way", http.StatusNotImplemented)
	}
}

// get answers a GET or HEAD of an object of size bytes, whole or the one
// range asked for, with zeros.
func (s *sink) get(w http.ResponseWriter, r *http.Request, size int64) {
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "binary/octet-stream")
	n, status := size, http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		a, b, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
		first, err := strconv.ParseInt(a, 10, 64)
		last := size - 1 // "bytes=N-": to the end
		if err == nil && b != "" {
			last, err = strconv.ParseInt(b, 10, 64)
		}
		if err != nil || first > last || first >= size {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		last = min(last, size-1)
		n, status = last-first+1, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return
		}
		n -= k
	}
}
