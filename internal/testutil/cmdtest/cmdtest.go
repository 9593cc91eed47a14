// Package cmdtest runs commands for tests (the strata binary, processes in
// a test bed) and collects the output of ones that keep running.
package cmdtest

import (
	"bytes"
	"os/exec"
	"sync"
	"testing"
)

// Run runs cmd and returns its stdout, stderr and exit code; a command
// that cannot run at all fails the test.
func Run(t testing.TB, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// Buffer collects a running process's output while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Tail is the last n bytes of the output (a failing command's context).
func (b *Buffer) Tail(n int) string {
	s := b.String()
	return s[max(0, len(s)-n):]
}
