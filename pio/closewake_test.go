package pio

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/internal/goid"
)

// waitUntil polls cond with runtime.Gosched until it holds (a condition, no timing).
func waitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// closeWaitOf reports what goroutine g's Close waits for, if it waits (closers.waits).
func closeWaitOf(g uint64) (closeWaitKind, bool) {
	closers.mu.Lock()
	defer closers.mu.Unlock()
	if w := closers.waits[g]; w != nil {
		return w.kind, true
	}
	return 0, false
}

// parkAnother parks w on sc, behind the waiters already there (same batch).
func parkAnother(t *testing.T, sc *SendContext, w *Waiter) {
	t.Helper()
	if !sc.QueueWait(w, sc.ReleaseSeq()) {
		t.Fatal("QueueWait did not park")
	}
}

// closeBeside Closes sc on a new goroutine, B (goid.Self in g; returned set once Close returned),
// then waits, bounded, for passDone and for that Close, which must return nil.
func closeBeside(t *testing.T, sc *SendContext, passDone <-chan struct{}, returned *atomic.Bool, g *atomic.Uint64) {
	t.Helper()
	closeDone := make(chan error, 1)
	go func() {
		g.Store(goid.Self())
		err := sc.Close()
		returned.Store(true)
		closeDone <- err
	}()
	bounded(t, "the pass whose wake-up Closes", func() { <-passDone })
	bounded(t, "the concurrent Close", func() {
		if err := <-closeDone; err != nil {
			t.Error(err)
		}
	})
}

// TestCloseWaitsForAWakeupInAClose: a release pass on goroutine A takes two waiters of context
// sc off its list; the first's wake-up Closes another context, sc2, whose flush runs a wake-up
// of sc2 on A that the test holds. Meanwhile goroutine B Closes sc. B's Close must not return
// before A has woken its whole batch of sc: the wake-up in sc2's Close, and the second waiter
// after it. c9facb1's Close left out every waker that was itself in a Close (so that two Closes
// in wake-ups would not wait for each other), so B's Close returned at once, while A's wake-ups
// of sc still ran ("B's Close returned while ...": the first check below). Now a Close leaves out
// only a goroutine that waits for its own, which A, doing sc2's work, does not.
func TestCloseWaitsForAWakeupInAClose(t *testing.T) {
	var bReturned atomic.Bool
	var gB atomic.Uint64
	returned := bReturned.Load
	var sc, sc2 *SendContext
	var inner, w1, w2 Waiter
	inInner := make(chan struct{})
	var innerSaw, w2Saw bool
	var sc2Err error
	inner.Init(func(*Waiter) { // on A, in sc2's Close (its flush)
		close(inInner)
		// B's Close either returned (the bug) or waits for the wake-ups of sc: A's.
		waitUntil(func() bool { return returned() || closers.waiting.Load() >= 1 })
		innerSaw = returned()
	})
	w1.Init(func(*Waiter) { sc2Err = sc2.Close() })
	w2.Init(func(*Waiter) { w2Saw = returned() })
	sc = parkedManual(t, &w1)
	parkAnother(t, sc, &w2)
	sc2 = parkedManual(t, &inner)
	passDone := make(chan struct{})
	go func() { defer close(passDone); sc.Process() }() // A: wakes w1, then w2
	<-inInner
	closeBeside(t, sc, passDone, &bReturned, &gB)
	if sc2Err != nil {
		t.Fatalf("sc2.Close in a wake-up: %v", sc2Err)
	}
	if innerSaw {
		t.Fatal("B's Close returned while a wake-up of its context, in a Close on another goroutine, still ran")
	}
	if w2Saw {
		t.Fatal("B's Close returned before the rest of the batch of a wake-up in a Close was woken")
	}
}

// TestCloseWaitsForTheBatchOfAWakeupsClose: as above, one context: the first waiter's wake-up
// on A Closes sc itself (A does the work; its flush runs a third waiter on A, held until B's
// Close waits for that work), while B Closes sc. B waits for A's work, then for A's batch: the
// second waiter runs before B's Close returns. A's Close waits for nothing of B (B runs no
// wake-up).
func TestCloseWaitsForTheBatchOfAWakeupsClose(t *testing.T) {
	var bReturned atomic.Bool
	var gB atomic.Uint64
	var sc *SendContext
	var w1, w2, w3 Waiter
	inW3 := make(chan struct{})
	var w2Saw, w3Saw bool
	var aErr error
	w3.Init(func(*Waiter) { // on A, in A's Close's flush
		close(inW3)
		waitUntil(func() bool {
			if bReturned.Load() {
				return true
			}
			k, ok := closeWaitOf(gB.Load())
			return ok && k == waitWork
		})
		w3Saw = bReturned.Load()
	})
	w1.Init(func(*Waiter) {
		parkAnother(t, sc, &w3) // after w1 and w2 were taken: Close's flush wakes it
		aErr = sc.Close()
	})
	w2.Init(func(*Waiter) { w2Saw = bReturned.Load() })
	sc = parkedManual(t, &w1)
	parkAnother(t, sc, &w2)
	passDone := make(chan struct{})
	go func() { defer close(passDone); sc.Process() }()
	<-inW3 // A is doing sc's Close work
	closeBeside(t, sc, passDone, &bReturned, &gB)
	if aErr != nil {
		t.Fatalf("Close in a wake-up: %v", aErr)
	}
	if w3Saw || w2Saw {
		t.Fatalf("B's Close returned while A's wake-ups ran (seen by the flushed waiter %v, by the batch's second %v)", w3Saw, w2Saw)
	}
}

// TestCloseCycleInWakeups: two contexts, a release pass of each on its own goroutine (A wakes
// a's waiters, B b's); A's first wake-up Closes b, B's first Closes a. Each Close waits for the
// other goroutine's wake-ups: a cycle. As Close's doc says, the Close that waits first (A's,
// held until it waits) waits for B's whole batch, B's Close in it included; B's Close leaves A
// out (A waits for B) and returns while A's wake-up still runs. Nothing hangs, both Closes
// return nil, both contexts are closed.
func TestCloseCycleInWakeups(t *testing.T) {
	var a, b *SendContext
	var wa1, wa2, wb1, wb2 Waiter
	var aReturned, bReturned, wb2Ran atomic.Bool
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var aErr, bErr error
	inB := make(chan struct{})
	wa1.Init(func(*Waiter) {
		<-inB // B is in its wake-up: a waker of b
		aErr = b.Close()
		aReturned.Store(true)
		note("A's Close returned, B's batch done " + map[bool]string{true: "yes", false: "no"}[wb2Ran.Load()])
	})
	wa2.Init(func(*Waiter) {})
	wb1.Init(func(*Waiter) {
		close(inB)
		waitUntil(func() bool { return closers.waiting.Load() >= 1 }) // A's Close waits for B
		bErr = a.Close()
		bReturned.Store(true)
		note("B's Close returned, A's returned " + map[bool]string{true: "yes", false: "no"}[aReturned.Load()])
	})
	wb2.Init(func(*Waiter) { wb2Ran.Store(true) })
	a = parkedManual(t, &wa1)
	parkAnother(t, a, &wa2)
	b = parkedManual(t, &wb1)
	parkAnother(t, b, &wb2)
	done := make(chan struct{}, 2)
	go func() { a.Process(); done <- struct{}{} }()
	go func() { b.Process(); done <- struct{}{} }()
	bounded(t, "two passes whose wake-ups Close each other's context", func() { <-done; <-done })
	if aErr != nil || bErr != nil {
		t.Fatalf("Closes: A's %v, B's %v", aErr, bErr)
	}
	want := []string{"B's Close returned, A's returned no", "A's Close returned, B's batch done yes"}
	if len(order) != 2 || order[0] != want[0] || order[1] != want[1] {
		t.Fatalf("order %q, want %q", order, want)
	}
	for _, sc := range []*SendContext{a, b} {
		if _, err := sc.BufferAlloc(4, nil); err == nil || sc.Enabled() {
			t.Fatalf("context not closed: BufferAlloc %v, enabled %v", err, sc.Enabled())
		}
	}
}

// TestCloseOnChipGoroutineOfAnotherContext: goroutine G, in a wake-up of a manual context sc2,
// Closes sc1, whose chip goroutine C runs a wake-up of sc1 that Closes sc2. G's Close waits for
// C's end; C's Close of sc2 would wait for G, a waker of sc2. Close records its wait for the chip
// goroutine's end from the start of its work, so C's Close leaves G out, in either order: C's
// Close after G does sc1's work ("chip second"), or before, C already waiting for G ("chip
// first": G's start makes C look again). Both return nil; nothing hangs.
func TestCloseOnChipGoroutineOfAnotherContext(t *testing.T) {
	for _, chipFirst := range []bool{false, true} {
		name := "chip second"
		if chipFirst {
			name = "chip first"
		}
		t.Run(name, func(t *testing.T) {
			var gG atomic.Uint64
			var sc1, sc2 *SendContext
			var w, wc Waiter
			inW := make(chan struct{})
			var gErr, cErr error
			w.Init(func(*Waiter) { // on G
				gG.Store(goid.Self())
				close(inW)
				if chipFirst {
					waitUntil(func() bool { return closers.waiting.Load() >= 1 }) // C waits for G
				}
				gErr = sc1.Close()
			})
			inWc, cDone := make(chan struct{}), make(chan struct{})
			wc.Init(func(*Waiter) { // on C
				defer close(cDone)
				close(inWc)
				<-inW
				if !chipFirst {
					waitUntil(func() bool { return closingOn(sc1, gG.Load()) }) // G does sc1's work: it waits for C's end
				}
				cErr = sc2.Close()
			})
			sc2 = parkedManual(t, &w)
			var err error
			sc1, err = New(Config{Type: Kernel, Credits: 1, Threshold: 1})
			if err != nil {
				t.Fatal(err)
			}
			buf, err := sc1.BufferAlloc(4, nil) // the only credit, written after the park
			if err != nil {
				t.Fatal(err)
			}
			if !sc1.QueueWait(&wc, sc1.ReleaseSeq()) { // its forced return wakes wc on C
				t.Fatal("QueueWait did not park")
			}
			if err := buf.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
			<-inWc // on C, not on G in sc1.Close's flush
			passDone := make(chan struct{})
			go func() { defer close(passDone); sc2.Process() }() // G
			bounded(t, "Closes of each other's context on a chip goroutine and a caller's", func() { <-passDone; <-cDone })
			if gErr != nil || cErr != nil {
				t.Fatalf("Closes: G's %v, C's %v", gErr, cErr)
			}
		})
	}
}

// parkedChip returns a context with a chip goroutine, its only credit taken and w parked on its
// wait list, and the buffer holding that credit: its Copy makes the chip send the packet and
// return the credit (forced: w asked for it), whose pass wakes w on the chip goroutine.
func parkedChip(t *testing.T, w *Waiter) (*SendContext, *Buf) {
	t.Helper()
	sc, err := New(Config{Type: Kernel, Credits: 1, Threshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := sc.BufferAlloc(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.QueueWait(w, sc.ReleaseSeq()) {
		t.Fatal("QueueWait did not park")
	}
	return sc, buf
}

// closingOn reports whether goroutine g is doing sc's Close work (closingG).
func closingOn(sc *SendContext, g uint64) bool {
	closers.mu.Lock()
	defer closers.mu.Unlock()
	return g != 0 && sc.closingG == g
}

// TestCloseCycleOnChipGoroutines: a wake-up on sc1's chip goroutine C1 Closes sc2, while a
// wake-up on sc2's chip goroutine C2 Closes sc1. Each Close's work waits for the other chip
// goroutine's end, which comes only once its wake-up, in the other Close, returns: before, both
// waited for ever. The second Close (C2's: it starts once C1 does sc2's work) is refused with
// ErrInvalid and changes nothing, as a Close on the context's own chip goroutine is; C1's Close
// returns nil once C2, its wake-up back, has ended. sc1 is then open, and a Close from the test
// closes it.
func TestCloseCycleOnChipGoroutines(t *testing.T) {
	var sc1, sc2 *SendContext
	var w1, w2 Waiter
	var g1 atomic.Uint64
	in1, in2, done1, done2 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	ready := make(chan struct{}) // sc1 and sc2 set: the parking's forced return may wake before
	var err1, err2 error
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
		err2 = sc1.Close()
	})
	sc1, b1 := parkedChip(t, &w1)
	sc2, b2 := parkedChip(t, &w2)
	close(ready)
	for _, b := range []*Buf{b1, b2} {
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	bounded(t, "two chip goroutines' wake-ups Closing each other's context", func() { <-done1; <-done2 })
	if err1 != nil {
		t.Fatalf("C1's Close of sc2: %v, want nil", err1)
	}
	if !errors.Is(err2, ErrInvalid) {
		t.Fatalf("C2's Close of sc1: %v, want ErrInvalid", err2)
	}
	if !sc1.Enabled() || sc2.Enabled() {
		t.Fatalf("enabled after the Closes: sc1 %v (want true: the refused Close changed nothing), sc2 %v", sc1.Enabled(), sc2.Enabled())
	}
	bounded(t, "Close of sc1", func() {
		if err := sc1.Close(); err != nil {
			t.Error(err)
		}
	})
	if _, err := sc1.BufferAlloc(4, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("BufferAlloc after Close: %v, want ErrClosed", err)
	}
}
