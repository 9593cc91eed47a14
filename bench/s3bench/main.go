// Command s3bench measures small-object rates through Strata's S3 gateway
// next to the same operations through the client API directly, for
// docs/PERFORMANCE.md ("S3 gateway"). It is driven by bench/s3.sh.
//
//	s3bench --endpoint URL --key ID --secret S --bucket B --clients 16 --objects 2000 --size 4096
//	s3bench --server ADDR --under /dir --clients 16 --objects 2000 --size 4096
//	s3bench --endpoint URL --key ID --secret S --big FILE --part 64MiB --clients 8
//
// --big puts FILE as one object by a multipart upload of --clients parts
// at a time, then gets it back with as many ranged GETs at a time (the
// way aws cli and boto3 move large objects), reporting MB/s each way:
// the gateway's pace without a Python client's cost.
//
// Each client PUTs its share of objects, then GETs them, then HEADs them;
// each phase is timed from its first request to its last reply, after a
// barrier. Requests are signed with Signature V4 (UNSIGNED-PAYLOAD, as
// clients send over TLS) on keep-alive connections. Output is one JSON
// object of operations per second.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/client"
	"github.com/strata-storage/strata/internal/s3"
)

func main() {
	endpoint := flag.String("endpoint", "", "S3 endpoint (http://host:port)")
	key := flag.String("key", "", "access key id")
	secret := flag.String("secret", "", "secret access key")
	bucket := flag.String("bucket", "bench", "bucket (created if missing)")
	server := flag.String("server", "", "Strata server: measure the client API instead")
	under := flag.String("under", "/s3bench", "with --server: the directory to work in")
	clients := flag.Int("clients", 16, "concurrent clients")
	objects := flag.Int("objects", 2000, "objects in all")
	size := flag.Int("size", 4096, "bytes per object")
	big := flag.String("big", "", "put and get this file as one multipart object")
	partMiB := flag.Int("part", 64, "with --big: part size in MiB")
	flag.Parse()
	if *big != "" {
		bigObject(*endpoint, *key, *secret, *bucket, *big, int64(*partMiB)<<20, *clients)
		return
	}
	body := make([]byte, *size)
	rand.Read(body)
	var do func(op string, i int) error
	switch {
	case *endpoint != "":
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}}
		req := func(method, path string, b []byte) error {
			r, err := http.NewRequest(method, *endpoint+path, bytes.NewReader(b))
			if err != nil {
				return err
			}
			s3.Sign(r, *key, *secret, "us-east-1", time.Now())
			resp, err := hc.Do(r)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode >= 300 {
				return fmt.Errorf("%s %s: %s", method, path, resp.Status)
			}
			return nil
		}
		if err := req("PUT", "/"+*bucket, nil); err != nil && !strings.Contains(err.Error(), "409") {
			fail(err)
		}
		do = func(op string, i int) error {
			p := fmt.Sprintf("/%s/o%06d", *bucket, i)
			switch op {
			case "put":
				return req("PUT", p, body)
			case "get":
				return req("GET", p, nil)
			}
			return req("HEAD", p, nil)
		}
	case *server != "":
		c, err := client.New(*server)
		if err != nil {
			fail(err)
		}
		ctx := context.Background()
		if _, err := c.Mkdir(ctx, *under, true, 0); err != nil {
			fail(err)
		}
		do = func(op string, i int) error {
			p := fmt.Sprintf("%s/o%06d", *under, i)
			switch op {
			case "put":
				_, err := c.Put(ctx, p, bytes.NewReader(body), int64(len(body)), client.PutOptions{Overwrite: true})
				return err
			case "get":
				_, err := c.Get(ctx, p, io.Discard, client.GetOptions{})
				return err
			}
			_, err := c.Stat(ctx, p)
			return err
		}
	default:
		fail(fmt.Errorf("give --endpoint or --server"))
	}
	out := map[string]float64{}
	for _, op := range []string{"put", "get", "head"} {
		var wg sync.WaitGroup
		errs := make(chan error, *clients)
		t0 := time.Now()
		for c := 0; c < *clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := c; i < *objects; i += *clients {
					if err := do(op, i); err != nil {
						errs <- err
						return
					}
				}
			}(c)
		}
		wg.Wait()
		d := time.Since(t0)
		close(errs)
		if err := <-errs; err != nil {
			fail(err)
		}
		out[op+"_per_s"] = float64(*objects) / d.Seconds()
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "s3bench:", err)
	os.Exit(1)
}

// signed sends one SigV4-signed request and returns its reply, read.
func signed(hc *http.Client, method, url, key, secret string, body io.Reader, n int64, hdr map[string]string) (*http.Response, []byte, error) {
	r, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, nil, err
	}
	r.ContentLength = n
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	s3.Sign(r, key, secret, "us-east-1", time.Now())
	resp, err := hc.Do(r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var b []byte
	if method == "GET" && resp.StatusCode < 300 {
		_, err = io.Copy(io.Discard, resp.Body) // data: counted, not kept
	} else {
		b, err = io.ReadAll(resp.Body)
	}
	if err == nil && resp.StatusCode >= 300 {
		err = fmt.Errorf("%s %s: %s %s", method, url, resp.Status, b)
	}
	return resp, b, err
}

func bigObject(endpoint, key, secret, bucket, file string, part int64, clients int) {
	f, err := os.Open(file)
	if err != nil {
		fail(err)
	}
	st, _ := f.Stat()
	size := st.Size()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	obj := endpoint + "/" + bucket + "/big"
	signed(hc, "PUT", endpoint+"/"+bucket, key, secret, nil, 0, nil)
	t0 := time.Now()
	_, b, err := signed(hc, "POST", obj+"?uploads", key, secret, nil, 0, nil)
	if err != nil {
		fail(err)
	}
	id := between(string(b), "<UploadId>", "</UploadId>")
	nparts := int((size + part - 1) / part)
	etags := make([]string, nparts)
	run(nparts, clients, func(i int) error {
		off := int64(i) * part
		n := min(part, size-off)
		resp, _, err := signed(hc, "PUT", fmt.Sprintf("%s?partNumber=%d&uploadId=%s", obj, i+1, id), key, secret, io.NewSectionReader(f, off, n), n, nil)
		if err == nil {
			etags[i] = resp.Header.Get("ETag")
		}
		return err
	})
	parts := time.Since(t0)
	var xml strings.Builder
	xml.WriteString("<CompleteMultipartUpload>")
	for i, e := range etags {
		fmt.Fprintf(&xml, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i+1, e)
	}
	xml.WriteString("</CompleteMultipartUpload>")
	if _, _, err := signed(hc, "POST", obj+"?uploadId="+id, key, secret, strings.NewReader(xml.String()), int64(xml.Len()), nil); err != nil {
		fail(err)
	}
	put := time.Since(t0)
	t0 = time.Now()
	run(nparts, clients, func(i int) error {
		off := int64(i) * part
		_, _, err := signed(hc, "GET", obj, key, secret, nil, 0, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", off, min(off+part, size)-1)})
		return err
	})
	get := time.Since(t0)
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"put_mb_s": float64(size) / 1e6 / put.Seconds(), "get_mb_s": float64(size) / 1e6 / get.Seconds(),
		"parts_s": parts.Seconds(), "complete_s": (put - parts).Seconds()})
}

// run calls fn(0..n-1), at most k at a time, and fails on the first error.
func run(n, k int, fn func(i int) error) {
	sem := make(chan struct{}, k)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fail(err)
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}
