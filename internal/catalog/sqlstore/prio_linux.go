package sqlstore

import (
	"fmt"
	"runtime"
	"syscall"
)

// writerBoost is how much the writer's thread lowers its niceness while
// operations queue up for it. Every change to the namespace passes through
// the one writer, and most of a group's time is its commit's fsync; when
// that returns, or when work arrives, the writer should run at once, not
// queue behind request handlers whose only next step is to queue more work
// for it. Ten steps give it about ten times a default thread's CPU weight;
// it never spins, so it cannot starve anyone.
const writerBoost = 10

// booster owns the writer's thread priority. Boosted, the writer keeps a
// thread of its own (LockOSThread): raising the priority only while a group
// ran gained nothing, keeping the thread did (8-client creates +15–20 %).
// But a thread of its own makes every wakeup of an idle writer a
// cross-thread handoff, which cost a lone client ~9 % of its creates; so the
// writer is boosted only while groups have more than one operation in them
// (see writer). A writer that ends boosted ends with its thread locked,
// and Go then ends the thread too: no other goroutine inherits the priority.
type booster struct {
	base, boosted int // nice values
	ok, on        bool
}

// newBooster checks once whether the process may lower a niceness (root or
// CAP_SYS_NICE). Without it the writer runs at the default priority and the
// error says why.
func newBooster() (*booster, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	// The raw syscall returns 20 - nice, so that it is never negative.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return &booster{}, fmt.Errorf("catalog: writer priority: %w", err)
	}
	b := &booster{base: 20 - p}
	b.boosted = b.base - writerBoost
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, b.boosted); err != nil {
		return &booster{}, fmt.Errorf("catalog: writer priority (nice %d): %w", b.boosted, err)
	}
	syscall.Setpriority(syscall.PRIO_PROCESS, tid, b.base)
	b.ok = true
	return b, nil
}

// set boosts or unboosts the calling goroutine, which must be the writer.
func (b *booster) set(on bool) {
	if !b.ok || on == b.on {
		return
	}
	b.on = on
	if on {
		runtime.LockOSThread()
		syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), b.boosted)
		return
	}
	// Raising a niceness needs no privilege: the thread always gets its
	// base back before other goroutines may run on it.
	syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), b.base)
	runtime.UnlockOSThread()
}
