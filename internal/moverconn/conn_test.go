package moverconn

import (
	"context"
	"net"
	"testing"
)

// A transfer whose context ends just as it finishes leaves the connection's
// deadline set; such a connection must not go back to the pool, or its next
// user fails with a timeout.
func TestContextEndingAtTheFinishBreaksTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p := NewPool()
	defer p.Close()
	ep := Endpoint{Addr: ln.Addr().String()}
	c, err := p.Get(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	p.Put(c)
	c, _ = p.Get(context.Background(), ep)
	if stop := c.watch(context.Background()); true {
		stop()
	}
	if c.Broken() {
		t.Fatal("a transfer whose context did not end broke the connection")
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := c.watch(ctx)
	cancel() // after the transfer's last read, before its deferred stop
	stop()
	if !c.Broken() {
		t.Fatal("connection with its deadline set is still reusable")
	}
	p.Put(c)
	c2, err := p.Get(context.Background(), ep)
	if err != nil || c2 == c {
		t.Fatalf("the pool gave back the broken connection (%v)", err)
	}
	p.Put(c2)
}
