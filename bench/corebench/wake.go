package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// wakeGaps are the idle times, µs, before each round trip of wakeCost.
var wakeGaps = []int{0, 10, 20, 40, 80, 160, 320, 640}

// wakeCost measures what an idle core costs a hand-off made while the
// sender's core stays busy (docs/SIMULATION.md, the catalog: why strata
// sim's wake_us does not come from it): a child process echoes
// a byte on a Unix socket pair, and this one sends it after keeping its
// own core busy for a gap (a spin on the clock, so only the echo's side
// falls idle) and times the round trip. With no gap the echo's thread is still
// looking for work when the byte comes; after a long one it is parked and
// its CPU halted, and the round trip grows by the wake-up. Output: the
// median round trip, µs, for each gap (JSON).
func wakeCost(rounds int) (map[string]float64, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	conn := func(fd int) (net.Conn, error) {
		f := os.NewFile(uintptr(fd), "wake")
		defer f.Close()
		return net.FileConn(f)
	}
	a, err := conn(fds[0])
	if err != nil {
		return nil, err
	}
	// The echo is another process, as a server is to its clients: within
	// one, Go's scheduler runs the echo on the sender's own thread.
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	echo := exec.Command(self, "wake-echo")
	echo.Stdin, echo.Stderr = os.NewFile(uintptr(fds[1]), "wake-echo"), os.Stderr
	if err := echo.Start(); err != nil {
		return nil, fmt.Errorf("start the echo: %w", err)
	}
	echo.Stdin.(*os.File).Close()
	defer echo.Wait() // after a closes (deferred below): the echo ends at its EOF
	defer a.Close()
	p := make([]byte, 1)
	out := map[string]float64{}
	for _, gap := range wakeGaps {
		rtt := make([]float64, 0, rounds)
		for i := 0; i < rounds; i++ {
			for end := time.Now().Add(time.Duration(gap) * time.Microsecond); time.Now().Before(end); {
			}
			t0 := time.Now()
			if _, err := a.Write(p); err != nil {
				return nil, err
			}
			if _, err := a.Read(p); err != nil {
				return nil, err
			}
			rtt = append(rtt, float64(time.Since(t0).Nanoseconds())/1e3)
		}
		slices.Sort(rtt)
		out[fmt.Sprint(gap)] = rtt[len(rtt)/2]
	}
	return out, nil
}

// wakeEcho echoes every byte on its standard input, a socket.
func wakeEcho() {
	c, err := net.FileConn(os.Stdin)
	if err != nil {
		fail(err)
	}
	p := make([]byte, 1)
	for {
		if _, err := c.Read(p); err != nil {
			return
		}
		if _, err := c.Write(p); err != nil {
			return
		}
	}
}

func wakeMain() {
	r, err := wakeCost(2000)
	if err != nil {
		fail(err)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"gap_us_to_round_trip_us": r})
}
