// Package tcppair gives tests the two ends of a real TCP connection on
// 127.0.0.1. It imports nothing of Strata's, so the packages the data
// plane is built from (wire, pki) can use it in their own tests.
package tcppair

import (
	"net"
	"testing"
	"time"
)

// New returns the two ends of a TCP connection on 127.0.0.1, closed when
// the test ends, each failing its reads and writes after timeout (none
// when 0): a reader waiting for bytes that will never come fails the test
// instead of hanging it.
func New(t testing.TB, timeout time.Duration) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	if timeout > 0 {
		deadline := time.Now().Add(timeout)
		client.SetDeadline(deadline)
		server.SetDeadline(deadline)
	}
	return client, server
}
