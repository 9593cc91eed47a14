package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// coreAddr is one configured address of the core, with its connections.
//
// A site that runs standby cores (docs/DEPLOYMENT.md) gives clients all
// their addresses. Only the active core listens: a standby waits for the
// catalog's lock before it opens any port, so a client that cannot
// connect to one address knows at once to try the next, and a request
// that was never sent may go to the next core whatever it is. A request
// sent to a core that then died without answering is sent again only if
// it is idempotent (a read): a create or rename may have run before the
// core went away, and running it twice is not the same as once.
type coreAddr struct {
	base string // http(s)://host:port, or http://localhost for unix:PATH
	name string // as messages name it: base, or unix:PATH
	// prefix: the path base names below its host ("" for most), which
	// every route follows
	prefix string
	tr     *transport
}

// core is the core the client talks to now.
func (c *Client) core() *coreAddr { return c.cores[c.cur.Load()] }

// dialError is a failure to connect: the request was never sent.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// unreachable is a request no core answered: it could not connect
// (unsent), or the connection broke before the reply.
type unreachable struct {
	base   string
	err    error
	unsent bool
}

func (e *unreachable) Error() string {
	if e.unsent {
		return fmt.Sprintf("cannot reach strata server at %s (is `strata serve` running?): %v", e.base, ErrUnreachable)
	}
	return fmt.Sprintf("strata server %s: %v", e.base, e.err)
}

func (e *unreachable) Is(target error) bool { return target == ErrUnreachable }
func (e *unreachable) Unwrap() error        { return e.err }

// standbyDialTimeout bounds connecting to one of several cores.
const standbyDialTimeout = 1500 * time.Millisecond

// failoverPause is how long a request waits once every configured core
// has failed it before it tries them all again (a variable for tests).
var failoverPause = 200 * time.Millisecond

// failover runs one request (try) against the current core and, when
// standbys are configured and the core could not take it, against the
// next, round the list until one answers or FailoverWait has passed.
// The core that answers stays current for later requests.
func (c *Client) failover(ctx context.Context, method string, try func(*coreAddr) (http.Header, error)) (http.Header, error) {
	n := int32(len(c.cores))
	var deadline time.Time
	for tried := int32(1); ; tried++ {
		i := c.cur.Load()
		h, err := try(c.cores[i])
		var u *unreachable
		if n == 1 || !errors.As(err, &u) || !(u.unsent || idempotent(method)) {
			return h, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.FailoverWait)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		c.cur.CompareAndSwap(i, (i+1)%n)
		if tried%n == 0 {
			// Every core refused: a standby may be taking over.
			select {
			case <-time.After(failoverPause):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}
