package pio

import (
	"testing"
	"time"
)

// TestCloseWaitsForWakeupsInProgress (skipped: bug, not fixed, a design call): Close's doc says
// every waiter is woken, and its Releasers and the chip goroutine are done, before it returns;
// but a release pass on another goroutine (a manual chip's Process, ReleaseUpdate, a
// BufferAllocWait driving the chip) takes its batch of waiters off the list and wakes them with
// no lock held, so Close's own wake-up of the list finds it empty and returns while those
// wake-ups still run (or have not started): user code of the context runs after Close returned.
// Releasers cannot (they run under the release lock, which Close's flush takes), nor can the
// chip goroutine's wake-ups (Close waits for it to end). Found by TestRVSoakPIOFaultSchedules
// with a check that no wake-up starts after Close returned (a manual chip, one seed in a few
// hundred; the check is not in the soak). A fix must let Close wait for wake-ups in progress on
// other goroutines without waiting for a wake-up that itself calls Close (allowed on a caller's
// goroutine), e.g. by counting them with their goroutine's identity (goid, as onChip does).
func TestCloseWaitsForWakeupsInProgress(t *testing.T) {
	t.Skip("bug, not fixed (a design call): see the doc comment")
	sc, err := New(Config{Type: Kernel, Credits: 1, Threshold: 1, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sc.BufferAlloc(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	seq := sc.ReleaseSeq()
	if _, err := sc.BufferAlloc(4, nil); err != ErrNoCredits {
		t.Fatalf("BufferAlloc: %v, want ErrNoCredits", err)
	}
	inWakeup, closed := make(chan struct{}), make(chan struct{})
	var closedDuring bool
	var w Waiter
	w.Init(func(*Waiter) {
		close(inWakeup)
		select {
		case <-closed: // Close returned while this wake-up runs
			closedDuring = true
		case <-time.After(2 * time.Second): // Close waits for this wake-up (fixed)
		}
	})
	if !sc.QueueWait(&w, seq) {
		t.Fatal("QueueWait did not park")
	}
	passDone := make(chan struct{})
	go func() { defer close(passDone); sc.Process() }() // the pass that wakes w
	<-inWakeup
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	close(closed)
	<-passDone
	if closedDuring {
		t.Error("Close returned while a wake-up of the context was still running")
	}
}
