package sqlstore

import (
	"context"
	"runtime"
	"time"
)

// Hold keeps the writer busy in a group of its own until release is
// called, and waits until queued operations are waiting behind it: what
// the test queues meanwhile then runs in one group.
func (s *Store) Hold() (waiting func(n int), release func()) {
	held, rel := make(chan struct{}), make(chan struct{})
	go s.write(context.Background(), func(*Tx) error { close(held); <-rel; return nil })
	<-held
	return func(n int) {
			for len(s.ops) < n {
				runtime.Gosched()
			}
		}, func() {
			close(rel)
		}
}

// SetLinger sets how long the writer waits for announced writes.
func SetLinger(d time.Duration) (restore func()) {
	old := lingerFor
	lingerFor = d
	return func() { lingerFor = old }
}
