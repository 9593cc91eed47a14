// Command s3bench measures small-object rates through Strata's S3 gateway
// next to the same operations through the client API directly, for
// docs/PERFORMANCE.md ("S3 gateway"). It is driven by bench/s3.sh.
//
//	s3bench --endpoint URL --key ID --secret S --bucket B --clients 16 --objects 2000 --size 4096
//	s3bench --server ADDR --under /dir --clients 16 --objects 2000 --size 4096
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
	flag.Parse()
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
