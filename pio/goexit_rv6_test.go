package pio

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// countRel counts its calls and keeps the last code.
type countRel struct {
	n    atomic.Int32
	code atomic.Uint32
}

func (r *countRel) Released(c ReleaseCode) {
	r.code.Store(uint32(c))
	r.n.Add(1)
}

// want checks that r was called n times, the last with code (when n > 0).
func (r *countRel) want(t *testing.T, what string, n int32, code ReleaseCode) {
	t.Helper()
	if got := r.n.Load(); got != n {
		t.Fatalf("%s: released %d times, want %d", what, got, n)
	}
	if n > 0 && ReleaseCode(r.code.Load()) != code {
		t.Fatalf("%s: released with %v, want %v", what, ReleaseCode(r.code.Load()), code)
	}
}

// exitRel calls runtime.Goexit in its first call (as t.FailNow would) and counts its calls.
type exitRel struct{ n atomic.Int32 }

func (r *exitRel) Released(ReleaseCode) {
	if r.n.Add(1) == 1 {
		runtime.Goexit()
	}
}

// bounded runs f on a goroutine of its own and fails the test with every goroutine's stack if
// it has not returned after a few seconds: a hang, not a timing assertion.
func bounded(t *testing.T, what string, f func()) {
	t.Helper()
	if !boundedErr(t, what, f) {
		t.FailNow()
	}
}

// boundedErr is bounded reporting a hang with t.Errorf (for a Cleanup: f is left running); it
// reports whether f returned.
func boundedErr(t *testing.T, what string, f func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Errorf("%s hangs:\n%s", what, buf[:runtime.Stack(buf, true)])
		return false
	}
}

// newManualBounded is newManual whose cleanup's Close fails the test instead of hanging.
func newManualBounded(t *testing.T, credits int, sink Sink) *SendContext {
	t.Helper()
	sc, err := New(Config{Type: Kernel, Credits: credits, Threshold: 1, Sink: sink, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { boundedErr(t, "Close (cleanup)", func() { sc.Close() }) })
	return sc
}

// waitGoexitHalt waits (bounded) until the context records the halt of a Goexit.
func waitGoexitHalt(t *testing.T, sc *SendContext) {
	t.Helper()
	bounded(t, "the Goexit's halt", func() {
		for h := sc.LastHalt(); h == nil || h.Cause != CauseGoexit; h = sc.LastHalt() {
			runtime.Gosched()
		}
	})
	if !sc.Halted() {
		t.Fatal("the context is not halted after a Goexit")
	}
}

// goexitOn runs f on a goroutine of its own, bounded, and reports whether f returned (false: it
// ended in a runtime.Goexit).
func goexitOn(t *testing.T, what string, f func()) bool {
	t.Helper()
	returned := false
	bounded(t, what, func() {
		f()
		returned = true
	})
	return returned
}

// sendAfterExit sends a packet released to an exitRel, then n released to countRels.
func sendAfterExit(t *testing.T, sc *SendContext, n int) (*exitRel, []countRel) {
	t.Helper()
	first, rels := new(exitRel), make([]countRel, n)
	sendOne(t, sc, first)
	for i := range rels {
		sendOne(t, sc, &rels[i])
	}
	return first, rels
}

// restartBounded restarts sc, which must succeed, and fails the test if it hangs.
func restartBounded(t *testing.T, sc *SendContext) {
	t.Helper()
	bounded(t, "Restart", func() {
		if err := sc.Restart(); err != nil {
			t.Error(err)
		}
	})
}

// sendOne allocates and copies a one-block packet released to rel.
func sendOne(t *testing.T, sc *SendContext, rel Releaser) {
	t.Helper()
	b, err := sc.BufferAlloc(4, rel)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
}

// TestReleaserGoexitChip: a Releaser that calls runtime.Goexit in the chip goroutine's release
// pass ends that goroutine holding releaseMu; the lock is released, the context left halted with
// CauseGoexit (not restarted: Restart refuses, nothing would consume), and Close returns having
// released every other packet exactly once (the exited callback counts as called, once).
func TestReleaserGoexitChip(t *testing.T) {
	sc, err := New(Config{Credits: 64, Threshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	var first exitRel
	rels := make([]countRel, 8)
	// Every buffer is allocated before the first is written (the chip consumes in order), so
	// that the chip's pass exits with all of them behind it.
	bufs := make([]*Buf, 1+len(rels))
	for i := range bufs {
		var rel Releaser = &first
		if i > 0 {
			rel = &rels[i-1]
		}
		if bufs[i], err = sc.BufferAlloc(4, rel); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(bufs) - 1; i >= 0; i-- {
		if err := bufs[i].Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	waitGoexitHalt(t, sc)
	if _, err := sc.BufferAlloc(4, nil); err != ErrNotRunning {
		t.Fatalf("BufferAlloc after the Goexit: %v, want ErrNotRunning", err)
	}
	bounded(t, "Close after a Releaser's Goexit on the chip goroutine", func() { sc.Close() })
	if err := sc.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
	if n := first.n.Load(); n != 1 {
		t.Fatalf("the exited Releaser ran %d times, want 1", n)
	}
	for i := range rels {
		if n := rels[i].n.Load(); n != 1 {
			t.Fatalf("packet %d released %d times, want 1", i, n)
		}
	}
	if h := sc.LastHalt(); h.Cause != CauseGoexit || !errors.Is(h, ErrHalted) {
		t.Fatalf("LastHalt %v, want the Goexit's", h)
	}
}

// TestGoexitDirectProcess: a caller's own Process (a manual chip) whose Sink or Releaser calls
// runtime.Goexit ends that caller's goroutine: the locks are released, the context is left halted
// with CauseGoexit, and, the context's own goroutine being alive (there is none: the chip is the
// callers'), Restart recovers it: every pending packet is released once with PRCSCDisable, and
// the context sends again. Also a Goexit in a BufferAlloc's release pass (allocMu held too) and
// in Close's flush (Close then finishes on the next call).
func TestGoexitDirectProcess(t *testing.T) {
	t.Run("sink", func(t *testing.T) {
		sink := &goexitSink{}
		sc := newManualBounded(t, 16, sink)
		rels := make([]countRel, 3)
		for i := range rels {
			sendOne(t, sc, &rels[i])
		}
		if goexitOn(t, "Process with a sink that exits", func() { sc.Process() }) {
			t.Fatal("Process returned: the sink's Goexit did not end it")
		}
		h := sc.LastHalt()
		if h == nil || h.Cause != CauseGoexit || h.Packet != 0 || !sc.Halted() {
			t.Fatalf("after the Goexit: halted %v, LastHalt %v; want halted at packet 1 by the Goexit", sc.Halted(), h)
		}
		if _, err := sc.BufferAlloc(4, nil); err != ErrNotRunning {
			t.Fatalf("BufferAlloc: %v, want ErrNotRunning", err)
		}
		if n := goexitOn(t, "Process of the halted context", func() { sc.Process() }); !n {
			t.Fatal("Process of the halted context did not return")
		}
		for i := range rels {
			rels[i].want(t, "before the restart", 0, 0)
		}
		restartBounded(t, sc)
		for i := range rels {
			rels[i].want(t, "after the restart", 1, PRCSCDisable)
		}
		var after countRel
		sendOne(t, sc, &after)
		sc.Process()
		sc.ReturnCredits()
		sc.Process()
		if n := after.n.Load(); n != 1 {
			t.Fatalf("a packet after the restart released %d times, want 1", n)
		}
		if got := sink.n.Load(); got != 2 {
			t.Fatalf("Deliver called %d times, want 2 (the exited one and the one after)", got)
		}
		bounded(t, "Close", func() { sc.Close() })
		for i := range rels {
			rels[i].want(t, "after Close", 1, PRCSCDisable)
		}
	})
	t.Run("releaser", func(t *testing.T) {
		sc := newManualBounded(t, 16, nil)
		first, rels := sendAfterExit(t, sc, 3)
		if goexitOn(t, "Process with a Releaser that exits", func() { sc.Process() }) {
			t.Fatal("Process returned: the Releaser's Goexit did not end it")
		}
		if h := sc.LastHalt(); h == nil || h.Cause != CauseGoexit || !sc.Halted() {
			t.Fatalf("after the Goexit: halted %v, LastHalt %v", sc.Halted(), h)
		}
		restartBounded(t, sc)
		if n := first.n.Load(); n != 1 {
			t.Fatalf("the exited Releaser ran %d times, want 1", n)
		}
		for i := range rels {
			if n := rels[i].n.Load(); n != 1 {
				t.Fatalf("packet %d released %d times, want 1", i, n)
			}
		}
		sendOne(t, sc, nil)
		sc.Process()
		if got := sc.Stats().Packets; got != 5 {
			t.Fatalf("packets sent %d, want 5", got)
		}
	})
	t.Run("bufferalloc", func(t *testing.T) {
		sc := newManualBounded(t, 2, nil) // two blocks: the third allocation runs the release pass
		var first exitRel
		var second countRel
		sendOne(t, sc, &first)
		sendOne(t, sc, &second)
		// The chip consumes both and writes the credits back, without the release pass Process
		// would run next: the allocation below runs it.
		sc.hwMu.Lock()
		sc.force.Store(true)
		sc.consume()
		sc.hwMu.Unlock()
		if goexitOn(t, "BufferAlloc whose release pass exits", func() { sc.BufferAlloc(4, nil) }) {
			t.Fatal("BufferAlloc returned: the Releaser's Goexit did not end it")
		}
		if !sc.Halted() {
			t.Fatal("not halted after the Goexit")
		}
		restartBounded(t, sc)
		second.want(t, "the packet after the exited one", 1, PRCSCDisable)
		if n := first.n.Load(); n != 1 {
			t.Fatalf("the exited Releaser ran %d times, want 1", n)
		}
		sendOne(t, sc, nil) // allocMu was released: allocation works again
	})
	t.Run("close", func(t *testing.T) {
		sc, err := New(Config{Credits: 16, Threshold: 16})
		if err != nil {
			t.Fatal(err)
		}
		first, rels := sendAfterExit(t, sc, 3)
		if goexitOn(t, "Close whose flush exits", func() { sc.Close() }) {
			t.Fatal("Close returned: the Releaser's Goexit did not end it")
		}
		bounded(t, "the second Close", func() { sc.Close() })
		for i := range rels {
			rels[i].want(t, "after the second Close", 1, PRCSCDisable)
		}
		if n := first.n.Load(); n != 1 {
			t.Fatalf("the exited Releaser ran %d times, want 1", n)
		}
		select {
		case <-sc.done:
		default:
			t.Fatal("the chip goroutine still runs after the second Close")
		}
	})
}

// TestWakeupGoexitWakesBatch: a Waiter's wake-up that calls runtime.Goexit ends the pass's
// goroutine, which first wakes the rest of the batch it took off the list (they were queued no
// longer: nobody else would wake them).
func TestWakeupGoexitWakesBatch(t *testing.T) {
	sc := newManualBounded(t, 1, nil)
	sendOne(t, sc, nil) // no credits left
	var woken [3]atomic.Int32
	ws := make([]*Waiter, 3)
	for i := range ws {
		ws[i] = &Waiter{}
		ws[i].Init(func(*Waiter) {
			woken[i].Add(1)
			if i == 0 {
				runtime.Goexit()
			}
		})
		if !sc.QueueWait(ws[i], sc.ReleaseSeq()) {
			t.Fatal("QueueWait did not park")
		}
	}
	if goexitOn(t, "Process whose wake-up exits", func() { sc.Process() }) {
		t.Fatal("Process returned: the wake-up's Goexit did not end it")
	}
	for i := range woken {
		if n := woken[i].Load(); n != 1 {
			t.Fatalf("waiter %d woken %d times, want 1", i, n)
		}
	}
	if sc.Waiting() != 0 {
		t.Fatalf("%d waiters still queued", sc.Waiting())
	}
	sendOne(t, sc, nil) // nothing held: the context goes on
}

var _ = context.Background

// TestWakeupGoexitChip: a Waiter's wake-up that calls runtime.Goexit on the chip goroutine holds
// no lock, but ends the goroutine: run's handler halts the context (CauseGoexit, Restart refuses)
// and Close returns, releasing the pending packet once.
func TestWakeupGoexitChip(t *testing.T) {
	sc, err := New(Config{Credits: 1, Threshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	var rel countRel
	b, err := sc.BufferAlloc(4, &rel) // the only credit, not written yet: the chip waits for it
	if err != nil {
		t.Fatal(err)
	}
	w := &Waiter{}
	w.Init(func(*Waiter) { runtime.Goexit() })
	if !sc.QueueWait(w, sc.ReleaseSeq()) { // its forced return wakes w on the chip goroutine
		t.Fatal("QueueWait did not park")
	}
	waitGoexitHalt(t, sc)
	if err := sc.Restart(); !errors.Is(err, ErrHalted) {
		t.Fatalf("Restart with the chip goroutine gone: %v, want the Goexit's halt", err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	bounded(t, "Close after a wake-up's Goexit on the chip goroutine", func() { sc.Close() })
	rel.want(t, "the pending packet", 1, PRCSCDisable)
}
