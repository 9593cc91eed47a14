package client

import "time"

// SetReprobeAfter changes how long a "no socket" answer holds, for tests.
func SetReprobeAfter(d time.Duration) (restore func()) {
	old := reprobeAfter
	reprobeAfter = d
	return func() { reprobeAfter = old }
}

// RingSize is ringSize, for tests.
var RingSize = ringSize
