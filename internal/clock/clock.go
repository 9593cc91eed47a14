// Package clock is the time source of everything in Strata that models or
// schedules: the tape library's timing model, the recall and migration
// scheduler, the purge policy. They take a Clock instead of calling the time
// package, so the same code runs in real time (production), faster than
// real time (demonstrations, benchmarks of an emulated library), instantly
// (tests: the modelled durations are counted, never waited for), and later
// in the simulator's virtual time.
package clock

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Clock tells the time and waits for modelled durations.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// Sleep waits for the modelled duration d on this clock, or until ctx
	// ends.
	Sleep(ctx context.Context, d time.Duration) error
}

// Wall is real time.
type Wall struct{}

func (Wall) Now() time.Time { return time.Now() }

func (Wall) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Scaled runs k times faster than real time: a modelled minute passes in
// 60/k real seconds, and Now advances k seconds per real second from the
// moment the clock was made.
type Scaled struct {
	k     float64
	start time.Time
}

// NewScaled returns a clock running k times faster than real time (k ≥ 1).
func NewScaled(k float64) *Scaled {
	if k < 1 {
		k = 1
	}
	return &Scaled{k: k, start: time.Now()}
}

// Factor is the speed-up over real time.
func (s *Scaled) Factor() float64 { return s.k }

func (s *Scaled) Now() time.Time {
	return s.start.Add(time.Duration(float64(time.Since(s.start)) * s.k))
}

func (s *Scaled) Sleep(ctx context.Context, d time.Duration) error {
	return sleep(ctx, time.Duration(float64(d)/s.k))
}

// Instant never waits: Sleep adds the duration to the clock and returns at
// once, so modelled waits cost no real time, while time still passes as it
// does on the wall (a queue's age grows in a test as it would in life).
// Concurrent sleepers all add to the one clock; per-device modelled time is
// counted by the devices themselves.
type Instant struct {
	mu    sync.Mutex
	start time.Time // wall time when made
	base  time.Time // the clock's time then
	slept time.Duration
}

// NewInstant returns an instant clock starting at start (the zero time
// means the current wall time).
func NewInstant(start time.Time) *Instant {
	now := time.Now()
	if start.IsZero() {
		start = now
	}
	return &Instant{start: now, base: start}
}

func (c *Instant) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.start) + c.slept)
}

func (c *Instant) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// Advance moves the clock forward by d.
func (c *Instant) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.slept += d
	c.mu.Unlock()
}

// Parse reads a time scale as written in configuration: "real" (or "1"),
// "instant", or a speed-up like "100" or "x100".
func Parse(s string) (Clock, error) {
	switch s {
	case "", "real", "1", "x1":
		return Wall{}, nil
	case "instant":
		return NewInstant(time.Time{}), nil
	}
	k, err := parseFactor(s)
	if err != nil {
		return nil, err
	}
	return NewScaled(k), nil
}

func parseFactor(s string) (float64, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "x"), "×")
	k, err := strconv.ParseFloat(t, 64)
	if err != nil || k < 1 || math.IsInf(k, 0) || math.IsNaN(k) {
		return 0, fmt.Errorf("time scale %q: want real, instant, or a speed-up ≥ 1 like x100", s)
	}
	return k, nil
}
