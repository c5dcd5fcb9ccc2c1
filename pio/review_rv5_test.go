package pio

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestWaiterOnOneContext: a Waiter queued on context A, then cancelled (or queued) through
// context B, is A's: B's CancelWait reports false and B's QueueWait leaves it on A's list
// (true: A wakes it), both leaving the two lists and counts alone. CancelWait on B used to see
// the waiter's queued flag, "remove" it from B's list (where it was not), clear its link and
// count B's waiters down to -1: A's list was cut after it, so the waiter behind it was never
// woken, A's count stayed 1 with its list empty, and A's Close (wakeAll: pop until the count
// is down) spun for ever.
func TestWaiterOnOneContext(t *testing.T) {
	// No Cleanup Close: before the fix A's Close spun for ever; the check below bounds it.
	a, err := New(Config{Credits: 4, Threshold: 1, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Credits: 4, Threshold: 1, Manual: true, Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	woke := make([]int, 3)
	ws := make([]*Waiter, 3)
	seq := a.ReleaseSeq()
	for i := range ws {
		ws[i] = &Waiter{}
		ws[i].Init(func(*Waiter) { woke[i]++ })
		if !a.QueueWait(ws[i], seq) {
			t.Fatal("QueueWait refused with no release since")
		}
	}
	if b.CancelWait(ws[1]) {
		t.Error("CancelWait on B of a waiter queued on A reported it queued")
	}
	if !b.QueueWait(ws[2], b.ReleaseSeq()) {
		t.Error("QueueWait on B of a waiter queued on A: false, want true (it stays on A)")
	}
	if a.Waiting() != 3 || b.Waiting() != 0 {
		t.Fatalf("waiting: A %d (want 3), B %d (want 0)", a.Waiting(), b.Waiting())
	}
	a.Process() // the first waiter's forced return: one pass wakes all three
	for i, n := range woke {
		if n != 1 {
			t.Errorf("waiter %d woken %d times, want 1 (woke %v)", i, n, woke)
		}
	}
	if a.Waiting() != 0 || b.Waiting() != 0 {
		t.Errorf("after the pass, waiting: A %d, B %d", a.Waiting(), b.Waiting())
	}
	if !b.QueueWait(ws[1], b.ReleaseSeq()) || b.Waiting() != 1 || !b.CancelWait(ws[1]) || b.Waiting() != 0 {
		t.Error("a waiter woken by A does not queue and cancel on B")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Close()
		b.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang, not a timing assertion
		t.Fatal("Close hangs")
	}
}

// TestInjectHaltNotEnabled: InjectHalt of a context that is not enabled gives ErrNotRunning, as
// documented, and leaves it so; of a closed one ErrClosed (Close: later calls get ErrClosed).
// A stopped context (Stop: the chip still sends, allocations refused) used to be halted and
// restarted, which re-enabled allocations that Stop had stopped (Stop's doc: neither Enable
// alone nor Restart undoes it), and InjectHalt returned nil; after Close it said ErrNotRunning.
func TestInjectHaltNotEnabled(t *testing.T) {
	sc := newManual(t, 8, nil)
	sc.Stop()
	if err := sc.InjectHalt(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("InjectHalt of a stopped context: %v, want ErrNotRunning", err)
	}
	if sc.Enabled() || sc.Stats().Halts != 0 || sc.Stats().Restarts != 0 {
		t.Errorf("InjectHalt of a stopped context changed it: enabled %v, %+v", sc.Enabled(), sc.Stats())
	}
	if b, err := sc.BufferAlloc(2, nil); !errors.Is(err, ErrNotRunning) {
		t.Errorf("BufferAlloc after Stop and InjectHalt: %v, want ErrNotRunning", err)
		if err == nil {
			_ = b.Copy(CreatePBC(0, 0, 0, 2), nil) // Disable below waits for it
		}
	}
	sc.Disable()
	if err := sc.InjectHalt(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("InjectHalt of a disabled context: %v, want ErrNotRunning", err)
	}
	if err := sc.Enable(); err != nil {
		t.Fatal(err)
	}
	if err := sc.InjectHalt(); err != nil || sc.Stats().Halts != 1 || !sc.Enabled() {
		t.Errorf("InjectHalt of an enabled context: %v, enabled %v, %+v", err, sc.Enabled(), sc.Stats())
	}
	sc.Close()
	if err := sc.InjectHalt(); !errors.Is(err, ErrClosed) {
		t.Errorf("InjectHalt after Close: %v, want ErrClosed", err)
	}
}

// TestWakeupPanicRecovered: a Waiter's wake-up that panics is recovered and counted
// (Stats.WakeupPanics), and the other waiters taken off the list in the same pass are woken all
// the same, as a panicking Releaser is recovered and counted. It used to run unrecovered: the
// panic left the pass (on the chip goroutine: the program died; on a producer's BufferAlloc or
// a Close: they panicked with another's wake-up), and the waiters behind it, already off the
// list, were never woken.
func TestWakeupPanicRecovered(t *testing.T) {
	sc := newManual(t, 4, &captureSink{})
	for range 4 {
		b, err := sc.BufferAlloc(16, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 16), nil); err != nil {
			t.Fatal(err)
		}
	}
	seq := sc.ReleaseSeq()
	woke := make([]int, 3)
	for i := range woke {
		w := &Waiter{}
		w.Init(func(*Waiter) {
			woke[i]++
			if i == 0 {
				panic("wake-up panics")
			}
		})
		if !sc.QueueWait(w, seq) {
			t.Fatal("QueueWait refused with no release since")
		}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("a wake-up's panic came out of Process: %v", p)
			}
		}()
		sc.Process()
	}()
	for i, n := range woke {
		if n != 1 {
			t.Errorf("waiter %d woken %d times, want 1 (woke %v)", i, n, woke)
		}
	}
	if st := sc.Stats(); st.WakeupPanics != 1 || st.Wakeups != 3 {
		t.Errorf("stats %+v: want WakeupPanics 1, Wakeups 3", st)
	}
}

// TestDefaultCreditsAsDocumented: Config.Credits 0 gives each type the size ContextSizes gives
// for the configuration Config's doc names. The doc named SizeConfig{SDMA: true}, whose user
// contexts number RcvContexts − KrcvQueues = 0 and so have 0 blocks, where New gives a user
// context 1024 (it asks for RcvContexts 2).
func TestDefaultCreditsAsDocumented(t *testing.T) {
	sz, err := ContextSizes(SizeConfig{SDMA: true, RcvContexts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for ty := range Type(NumTypes) {
		sc, err := New(Config{Type: ty, Manual: true})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Credits() != sz[ty].Blocks {
			t.Errorf("%v: New's default %d credits, ContextSizes %d", ty, sc.Credits(), sz[ty].Blocks)
		}
		sc.Close()
	}
}

// TestProcessHaltWaitsForHeldBuffer: a Process that meets a halt restarts the context before it
// returns, and the restart waits for every allocated buffer's copy to end, so a caller holding
// an unfinished buffer must not call Process (nor, with a manual chip, BufferAllocWait or
// SendWait, which drive it). Process's doc called calling it "harmless" and none of the three
// said so; a manual chip's only driver deadlocked itself. The test pins the wait: Process does
// not return while the buffer is held, and does once its copy ends.
func TestProcessHaltWaitsForHeldBuffer(t *testing.T) {
	sc := newManual(t, 8, nil)
	if err := sc.SetFaults(FaultPlan{HaltAt: 1}); err != nil {
		t.Fatal(err)
	}
	c := newCounter()
	b1, err := sc.BufferAlloc(2, &relOf{c, 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := b1.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
		t.Fatal(err)
	}
	b2, err := sc.BufferAlloc(2, &relOf{c, 1}) // held, unfinished, behind the halting packet
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Process()
	}()
	for sc.Stats().Halts == 0 { // the halt is met; its restart now waits for b2
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("Process returned with a buffer unfinished: the restart did not wait for it")
	default:
	}
	if err := b2.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
		t.Fatal(err)
	}
	<-done
	if st := sc.Stats(); st.Restarts != 1 || st.Flushed != 2 || !sc.Enabled() {
		t.Errorf("after the restart: enabled %v, %+v", sc.Enabled(), st)
	}
	c.check(t, 2)
}

// TestNoCreditsRetryNeedsReturn: ErrNoCredits said "wait for a credit return or retry", but a
// bare retry never succeeds when the chip has consumed everything below its credit-return
// threshold with nobody waiting: it writes nothing back by itself, and BufferAlloc's own release
// pass reads only what it last wrote (100000 retries failed, no credit return). The doc now says
// to ask for one (ReturnCredits) and retry; this pins both halves: the bare retry still fails,
// the asked-for return lets the retry through.
func TestNoCreditsRetryNeedsReturn(t *testing.T) {
	sc, err := New(Config{Credits: 10, Threshold: 10, Sink: &captureSink{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for range 3 { // 9 of 10 blocks, consumed below the threshold: nothing written back
		if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 152)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for sc.Stats().Packets < 3 {
		runtime.Gosched()
	}
	for range 100 {
		if _, err := sc.BufferAlloc(40, nil); err != ErrNoCredits {
			t.Fatalf("a bare retry: %v, want ErrNoCredits (the chip returned credits by itself?)", err)
		}
	}
	sc.ReturnCredits()
	for i := 0; ; i++ {
		b, err := sc.BufferAlloc(40, nil)
		if err == nil {
			if err := b.Copy(CreatePBC(0, 0, 0, 40), make([]byte, 152)); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err != ErrNoCredits || i == 1e7 {
			t.Fatalf("retry %d after ReturnCredits: %v (stats %+v)", i, err, sc.Stats())
		}
		runtime.Gosched()
	}
}

// TestNilContextRefused: SendWait and BufferAllocWait refuse a nil ctx with ErrInvalid before
// anything changes, idle or full (sdma and usdma do the same since fab8750). They used to use
// the nil ctx only when they had to wait: on a full context, ctx.Err() panicked (a nil
// interface's method), which every quiet test missed.
func TestNilContextRefused(t *testing.T) {
	sc := newManual(t, 4, &captureSink{})
	var nilCtx context.Context
	check := func(state string) {
		t.Helper()
		before := sc.Avail()
		for name, call := range map[string]func() error{
			"SendWait": func() error { return sc.SendWait(nilCtx, 0, 0, [][]byte{make([]byte, 8)}, nil) },
			"BufferAllocWait": func() error {
				b, err := sc.BufferAllocWait(nilCtx, 4, nil)
				if b != nil {
					_ = b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8))
				}
				return err
			},
		} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s, %s context, nil ctx: panic %v", name, state, p)
					}
				}()
				if err := call(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil context") {
					t.Errorf("%s, %s context, nil ctx: %v, want ErrInvalid naming the nil context", name, state, err)
				}
			}()
			if sc.Avail() != before {
				t.Errorf("%s, %s context, nil ctx: avail %d -> %d", name, state, before, sc.Avail())
			}
		}
	}
	check("an idle")
	for range 4 {
		b, err := sc.BufferAlloc(16, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 16), nil); err != nil {
			t.Fatal(err)
		}
	}
	check("a full")
}
