package s3

import (
	"encoding/xml"
	"net/http"
	"sync"
	"time"
)

// defaultKeepAlive is how long a slow answer waits before its status is
// sent: well inside the 60 s the aws cli and boto3 wait for a first byte.
const defaultKeepAlive = 10 * time.Second

// keepAlive keeps a slow request's connection alive as S3 does.
// CompleteMultipartUpload, CopyObject and UploadPartCopy copy data before
// they can answer, which for a large object takes longer than clients
// wait for a first byte. Once such a request has run for
// Config.KeepAlive, the status (200) and the XML declaration go out,
// then a space every KeepAlive until the answer. An error found after
// that is an <Error> document in the 200's body: AWS documents this for
// these three operations, and the SDKs look for it there.
type keepAlive struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	sent bool // the status and the XML declaration are out
	stop chan struct{}
	done chan struct{}
}

// slow starts keeping q alive; reply and fail end it. Calling it again
// is harmless.
func (q *request) slow() {
	if q.ka != nil || q.g.cfg.KeepAlive < 0 {
		return
	}
	ka := &keepAlive{w: q.w, stop: make(chan struct{}), done: make(chan struct{})}
	q.ka = ka
	go ka.run(q.g.cfg.KeepAlive)
}

func (ka *keepAlive) run(every time.Duration) {
	defer close(ka.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ka.stop:
			return
		case <-t.C:
		}
		ka.mu.Lock()
		if !ka.sent {
			ka.w.Header().Set("Content-Type", "application/xml")
			ka.w.WriteHeader(200)
			ka.w.Write([]byte(xml.Header))
			ka.sent = true
		}
		_, err := ka.w.Write([]byte(" "))
		if f, ok := ka.w.(http.Flusher); ok && err == nil {
			f.Flush()
		}
		ka.mu.Unlock()
		if err != nil {
			return // the client is gone; the request's context ends the work
		}
	}
}

// end stops the keep-alive and reports whether the status has been sent
// (the answer is then the body alone).
func (ka *keepAlive) end() bool {
	if ka == nil {
		return false
	}
	select {
	case <-ka.stop:
	default:
		close(ka.stop)
	}
	<-ka.done
	return ka.sent
}
