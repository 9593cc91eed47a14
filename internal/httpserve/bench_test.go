package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkServer: control-API-sized requests (a query, a 300-byte JSON
// reply) from 8 keep-alive clients over loopback TCP, against this server
// with its limits and against net/http.Server with the same ones: the
// measurement behind the package doc's choice.
//
//	go test -run '^$' -bench Server -count 6 ./internal/httpserve/
func BenchmarkServer(b *testing.B) {
	reply := `{"path":"/proj/cfd/run42.dat","name":"run42.dat","type":"file","id":4711,"mode":420,"uid":1001,"gid":100,"size":50000000,"mtime":"2026-11-25T05:00:00Z","ctime":"2026-11-25T05:00:00Z","atime":"2026-11-25T05:00:00Z","cos":"default","residency":"disk"}` + "\n"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	})
	for _, name := range []string{"httpserve", "net-http"} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var stop func()
			if name == "httpserve" {
				s := &Server{Handler: h, HeaderTimeout: 10 * time.Second}
				go s.Serve(ln)
				stop = func() { s.Shutdown(context.Background()) }
			} else {
				s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute, MaxHeaderBytes: 1 << 20}
				go s.Serve(ln)
				stop = func() { s.Close() }
			}
			defer stop()
			// Clients as Strata's (client/transport.go): one connection
			// each, a request written and its reply read by the caller,
			// no goroutines in between; the servers' costs are what
			// differ.
			req := []byte("GET /v1/stat?path=/proj/cfd/run42.dat HTTP/1.1\r\nHost: core\r\nUser-Agent: strata\r\n\r\n")
			b.SetParallelism(4) // 8 clients on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for pb.Next() {
					if _, err := c.Write(req); err != nil {
						b.Error(err)
						return
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if !strings.HasPrefix(resp.Status, "200") {
						b.Error(resp.Status)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
