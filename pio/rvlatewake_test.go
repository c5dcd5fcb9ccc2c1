package pio

import (
	"runtime"
	"sync"
	"testing"
)

// parkedManual returns a manual context with no credits left and w parked on its wait list: the
// next Process (a forced credit return) wakes w on the caller's goroutine.
func parkedManual(t *testing.T, w *Waiter) *SendContext {
	t.Helper()
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
	if !sc.QueueWait(w, seq) {
		t.Fatal("QueueWait did not park")
	}
	return sc
}

// TestCloseWaitsForWakeupsInProgress: Close's doc says every waiter is woken, and done, before
// it returns; but a release pass on another goroutine (a manual chip's Process, ReleaseUpdate, a
// BufferAllocWait driving the chip) takes its batch of waiters off the list and wakes them with
// no lock held, so Close's own wake-up of the list found it empty and returned while those
// wake-ups still ran: user code of the context ran after Close returned (found by
// TestRVSoakPIOFaultSchedules, a manual chip, one seed in a few hundred). Close now waits for the
// wake-ups in progress on other goroutines. The wake-up here blocks until Close has returned or
// the test has seen Close wait for it (Close's waiter count, closers.waiting): the first is the
// bug.
func TestCloseWaitsForWakeupsInProgress(t *testing.T) {
	inWakeup, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	closeReturned, sawReturned := false, false
	var w Waiter
	w.Init(func(*Waiter) {
		close(inWakeup)
		<-release
		mu.Lock()
		sawReturned = closeReturned
		mu.Unlock()
	})
	sc := parkedManual(t, &w)
	passDone := make(chan struct{})
	go func() { defer close(passDone); sc.Process() }() // the pass that wakes w
	<-inWakeup
	closeDone := make(chan error, 1)
	go func() {
		err := sc.Close()
		mu.Lock()
		closeReturned = true
		mu.Unlock()
		closeDone <- err
	}()
	// Let the wake-up go on once Close waits for it, or once Close has returned (the bug).
	select {
	case err := <-closeDone:
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		<-passDone
		t.Fatal("Close returned while a wake-up of the context was still running")
	case <-closeWaitsFor(t):
	}
	close(release)
	<-passDone
	if err := <-closeDone; err != nil {
		t.Fatal(err)
	}
	if sawReturned {
		t.Error("the wake-up saw Close returned")
	}
}

// closeWaitsFor returns a channel closed once some Close is waiting for a wake-up in progress
// (it polls closers.waiting with runtime.Gosched: a condition, no timing).
func closeWaitsFor(t *testing.T) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for closers.waiting.Load() == 0 {
			runtime.Gosched()
		}
	}()
	return ch
}

// TestCloseInsideWakeupDoesNotWaitForItself: a wake-up on a caller's goroutine may Close the
// context (only the chip goroutine's is refused): that Close does not wait for the wake-up that
// called it (it would wait for itself), nor for a second Close from a wake-up that Close's own
// flush runs on the same goroutine (which returns nil at once: the outer Close does the work).
// It returns nil, the context closed, the second waiter woken once, and Process returns.
func TestCloseInsideWakeupDoesNotWaitForItself(t *testing.T) {
	var inner Waiter
	var innerErr error
	innerWoken := 0
	var sc *SendContext
	inner.Init(func(*Waiter) { innerWoken++; innerErr = sc.Close() })
	var w Waiter
	var closeErr error
	w.Init(func(*Waiter) {
		if !sc.QueueWait(&inner, sc.ReleaseSeq()) { // Close's flush wakes it
			t.Error("inner waiter not parked")
		}
		closeErr = sc.Close()
	})
	sc = parkedManual(t, &w)
	bounded(t, "Process whose wake-up Closes", func() { sc.Process() })
	if closeErr != nil || innerErr != nil {
		t.Fatalf("Close from a wake-up: %v; from the wake-up its flush ran: %v", closeErr, innerErr)
	}
	if innerWoken != 1 {
		t.Fatalf("inner waiter woken %d times, want 1", innerWoken)
	}
	if _, err := sc.BufferAlloc(4, nil); err == nil || sc.Enabled() {
		t.Fatalf("context not closed: BufferAlloc %v, enabled %v", err, sc.Enabled())
	}
}

// TestTwoClosesInsideWakeups: two wake-ups, on two goroutines' passes (of two contexts, each
// parked on both in turn), each Close both contexts. No Close waits for a goroutine whose
// Close waits for its own (each would wait for the other: a deadlock; the one that waits first
// waits, TestCloseCycleInWakeups). Both passes end, every Close returns nil, both contexts are
// closed.
func TestTwoClosesInsideWakeups(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := "one context"
		if !shared {
			name = "two contexts"
		}
		t.Run(name, func(t *testing.T) {
			var a, b *SendContext
			var wa, wb Waiter
			entered := make(chan struct{}, 2)
			var both sync.WaitGroup
			both.Add(2)
			errs := make(chan error, 4)
			wake := func(*Waiter) {
				entered <- struct{}{}
				both.Done()
				both.Wait() // both wake-ups run at once: each Close finds the other's in progress
				errs <- a.Close()
				errs <- b.Close()
			}
			wa.Init(wake)
			wb.Init(wake)
			a = parkedManual(t, &wa)
			if shared {
				b = a
			} else {
				b = parkedManual(t, &wb)
			}
			done := make(chan struct{}, 2)
			go func() { a.Process(); done <- struct{}{} }()
			if shared {
				<-entered // a's pass took wa: park wb, for a pass of its own on another goroutine
				if !a.QueueWait(&wb, a.ReleaseSeq()) {
					t.Fatal("second waiter not parked")
				}
				go func() { a.ReleaseUpdate(); done <- struct{}{} }()
			} else {
				go func() { b.Process(); done <- struct{}{} }()
			}
			bounded(t, "two passes whose wake-ups Close", func() { <-done; <-done })
			for range 4 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
