//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecondInterruptKills: the first Ctrl-C stops the run, which then drains the packets in
// flight before it prints and exits; with a stalling sink that takes up to -depth stalls
// (measured: 80 s after SIGTERM with -faults sinkstall=1,stall=1s). interruptContext kept
// catching the signals until the process exited, so a second Ctrl-C did nothing either. The
// first signal now restores their default action: the second kills. The test runs itself as a
// child that catches one SIGINT the tool's way, then sends itself more until one kills it; the
// watchdog only bounds a failure.
func TestSecondInterruptKills(t *testing.T) {
	if os.Getenv("SDMAPERF_SIGNAL_CHILD") == "1" {
		ctx, stop := interruptContext()
		defer stop()
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		<-ctx.Done()
		for { // a run still draining: only a further signal ends it (the restore is asynchronous)
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			time.Sleep(10 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSecondInterruptKills$")
	cmd.Env = append(os.Environ(), "SDMAPERF_SIGNAL_CHILD=1")
	err := cmd.Run()
	if errors.Is(err, syscall.ENOEXEC) {
		// The test binary runs under an emulator (go test -exec qemu-aarch64): it cannot start
		// itself as a child.
		t.Skipf("cannot re-execute the test binary: %v", err)
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "child: %v", err)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.NoError(t, ctx.Err(), "the second SIGINT did not kill the child")
	assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT, "child ended by %v", ws)
}
