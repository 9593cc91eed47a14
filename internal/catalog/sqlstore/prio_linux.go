package sqlstore

import (
	"fmt"
	"runtime"
	"syscall"
)

// writerNice is the niceness the writer's thread asks for. Every change to
// the namespace passes through the one writer, and most of its time is a
// group commit's fsync; when that returns, the writer should run at once,
// not queue behind request handlers whose only next step is to queue more
// work for it. -10 gives it ten times a default thread's CPU weight; it
// never spins, so it cannot starve anyone.
const writerNice = -10

// prioritize pins the calling goroutine (the writer) to its OS thread and
// raises that thread's priority. Lowering a niceness needs root or
// CAP_SYS_NICE; without either the writer runs at the default priority and
// the error says why. The thread ends with the writer goroutine (which never
// unlocks it), so no other goroutine inherits the priority.
func prioritize() error {
	runtime.LockOSThread()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), writerNice); err != nil {
		return fmt.Errorf("catalog: writer priority (nice %d): %w", writerNice, err)
	}
	return nil
}
