package sdma

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waiterState returns the scheduler state ("sleep", "runnable", ...) of the goroutine whose stack
// holds frame, or "" if none does.
func waiterState(frame string) string {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.Contains(g, frame) {
			continue
		}
		// "goroutine 42 [sleep]:" (states may carry ", N minutes")
		h := g[:strings.IndexByte(g, '\n')]
		if i, j := strings.IndexByte(h, '['), strings.IndexAny(h, ",]"); i >= 0 && j > i {
			return h[i+1 : j]
		}
	}
	return ""
}

// waitParked polls the waiter's state until it is a parked one (a sleep, not runnable or running)
// and reports the last state seen. A bound of polls (a hang guard), not a timing assumption: a
// waiter that spin-yields is never parked.
func waitParked(frame string) (string, bool) {
	st := ""
	for i := 0; i < 400; i++ {
		if st = waiterState(frame); st == "sleep" {
			return st, true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return st, false
}

// TestLockWaiterParks: a goroutine waiting for hwMu while another holds it for long (a slow Sink,
// a test's hold) parks after a short spin instead of spinning and yielding for as long as the hold
// lasts; it takes the lock once it is released. Also for a ticket holder waiting for a biased
// owner to let go (revoke), where the lock is biasable.
func TestLockWaiterParks(t *testing.T) {
	t.Run("ticket", func(t *testing.T) {
		dev, err := NewDevice(Config{Manual: true})
		require.NoError(t, err)
		defer closeGuarded(t, dev)
		e := dev.Engine(0)
		e.hwMu.biasable = false // a ticket hold (nothing else uses the lock yet: Manual)
		e.hwMu.Lock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = e.Process()
		}()
		st, ok := waitParked("(*ticketLock).wait")
		e.hwMu.Unlock()
		dumpGuard(t, done, "Process did not take the lock after its release")
		require.True(t, ok, "the waiter never parked (last state %q)", st)
	})
	t.Run("revoke", func(t *testing.T) {
		dev, err := NewDevice(Config{Manual: true})
		require.NoError(t, err)
		defer closeGuarded(t, dev)
		e := dev.Engine(0)
		if !e.hwMu.biasable {
			t.Skip("no bias on this build")
		}
		biased := make(chan bool, 1)
		release := make(chan struct{})
		owner := make(chan struct{})
		go func() {
			defer close(owner)
			for i := 0; i < 64; i++ { // until a hold comes through the bias (earned by the streak)
				e.hwMu.Lock()
				if e.hwMu.held != nil {
					biased <- true
					<-release
					e.hwMu.Unlock()
					return
				}
				e.hwMu.Unlock()
			}
			biased <- false
		}()
		if !<-biased {
			close(release)
			t.Fatal("the owner never held the lock through its bias")
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = e.Process()
		}()
		st, ok := waitParked("(*ticketLock).revoke")
		close(release)
		dumpGuard(t, owner, "the owner did not end")
		dumpGuard(t, done, "Process did not take the lock after the owner's release")
		require.True(t, ok, "the revoker never parked (last state %q)", st)
	})
}
