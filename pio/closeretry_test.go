package pio

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/internal/goid"
)

// closeRetries is how many times the retrying callbacks below call Close: a loop that retries a
// refused Close from inside its callback, cut short.
const closeRetries = 100

// retryClose calls sc.Close up to closeRetries times, until one returns nil, and returns every
// error it got.
func retryClose(sc *SendContext) []error {
	var errs []error
	for range closeRetries {
		err := sc.Close()
		errs = append(errs, err)
		if err == nil {
			break
		}
	}
	return errs
}

// checkRefusedRetries checks that every Close of errs was refused with ErrInvalid, each with the
// same message, which says that the refusal holds while the callback runs and what to do.
func checkRefusedRetries(t *testing.T, errs []error) {
	t.Helper()
	if len(errs) != closeRetries {
		t.Fatalf("%d Closes, the last %v: want %d refusals", len(errs), errs[len(errs)-1], closeRetries)
	}
	for i, err := range errs {
		if !errors.Is(err, ErrInvalid) || err.Error() != errs[0].Error() {
			t.Fatalf("Close %d: %v, want ErrInvalid as the first: %v", i, err, errs[0])
		}
	}
	for _, want := range []string{"refused for as long as that callback runs", "a retry from it loops for ever", "return, and Close from another goroutine"} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Fatalf("refusal %q does not say %q", errs[0], want)
		}
	}
}

// TestCloseRetriedOnOwnChipGoroutine: a wake-up on a context's chip goroutine that retries its
// refused Close of that context gets the same ErrInvalid at once each time, changing nothing, and
// the error says that no retry from there can succeed (the refusal holds while the callback runs:
// a retry loop spins for ever, the loop being the caller's bug) and that the callback must return
// and Close be called from another goroutine. Before, the error said only that Close would wait
// for itself, and Close's and Waiter's docs only that a wake-up must not block. Once the wake-up
// returned, a Close from the test closes the context.
func TestCloseRetriedOnOwnChipGoroutine(t *testing.T) {
	var sc *SendContext
	var w Waiter
	ready, done := make(chan struct{}), make(chan struct{})
	var errs []error
	w.Init(func(*Waiter) {
		defer close(done)
		<-ready
		errs = retryClose(sc)
	})
	sc, b := parkedChip(t, &w)
	close(ready)
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	bounded(t, "a wake-up retrying its refused Close", func() { <-done })
	checkRefusedRetries(t, errs)
	if !sc.Enabled() {
		t.Fatal("the refused Closes disabled the context")
	}
	bounded(t, "Close from the test", func() {
		if err := sc.Close(); err != nil {
			t.Error(err)
		}
	})
}

// TestCloseRetriedInACycleOfChipGoroutines: as TestCloseCycleOnChipGoroutines, a wake-up on
// sc2's chip goroutine C2 Closes sc1 while C1's Close of sc2 waits for C2's end; C2's wake-up
// retries its refused Close: each retry is the same ErrInvalid at once (C1's Close waits for C2's
// end until that wake-up returns), saying so, and C1's Close returns nil once it returned.
func TestCloseRetriedInACycleOfChipGoroutines(t *testing.T) {
	var sc1, sc2 *SendContext
	var w1, w2 Waiter
	var g1 atomic.Uint64
	in1, in2, done1, done2 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	ready := make(chan struct{})
	var err1 error
	var errs2 []error
	w1.Init(func(*Waiter) { // on C1
		defer close(done1)
		<-ready
		g1.Store(goid.Self())
		close(in1)
		<-in2
		err1 = sc2.Close()
	})
	w2.Init(func(*Waiter) { // on C2
		defer close(done2)
		<-ready
		close(in2)
		<-in1
		waitUntil(func() bool { return closingOn(sc2, g1.Load()) }) // C1 does sc2's work
		errs2 = retryClose(sc1)
	})
	sc1, b1 := parkedChip(t, &w1)
	sc2, b2 := parkedChip(t, &w2)
	close(ready)
	for _, b := range []*Buf{b1, b2} {
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	bounded(t, "a chip goroutine's wake-up retrying its refused Close in a cycle", func() { <-done1; <-done2 })
	checkRefusedRetries(t, errs2)
	if err1 != nil {
		t.Fatalf("C1's Close of sc2: %v, want nil", err1)
	}
	if !sc1.Enabled() || sc2.Enabled() {
		t.Fatalf("enabled after the Closes: sc1 %v (want true), sc2 %v", sc1.Enabled(), sc2.Enabled())
	}
	bounded(t, "Close of sc1", func() {
		if err := sc1.Close(); err != nil {
			t.Error(err)
		}
	})
}
