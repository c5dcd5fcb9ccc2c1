package pio

import (
	"errors"

	"github.com/gosdma/gosdma/internal/goid"
	"runtime"
	"testing"
	"time"
)

// TestCloseCycleThroughAReleasersLock: a Releaser of manual context A, run by A's Process on a
// caller's goroutine (releaseMu held), Closes context B while a wake-up of B, run by B's Process
// on another goroutine, Closes A. B's Close waits for B's wake-up in progress (waitWakers); the
// wake-up's Close of A does A's work, whose Disable waits for A's releaseMu, held by the
// Releaser's goroutine: a wait that goes round, which Close's doc says none does (found by
// TestFaultSoakPIOCloseFromCallbacks with Sinks and Releasers closing contexts, seed 6). A
// Close's work of a context now waits, in the closers' graph, for the goroutine that runs its
// Releasers or Sink with its locks held on a caller's goroutine (relG, hwG): the Releaser's
// Close of B leaves the wake-up's goroutine out, returns, and the wake-up's Close of A goes on.
// Both return nil. The same with the callback run by A's Disable on a caller's goroutine (its
// egress's Sink, hwMu and allocMu held; its flush's Releaser, releaseMu and allocMu held), where
// the wake-up's Close of A waits for A's allocMu (found in review: no test recorded the flush's
// Releaser, or the egress's Sink, and the Close hung without those records).
func TestCloseCycleThroughAReleasersLock(t *testing.T) {
	if !goid.HaveG {
		t.Skip("no getg on this build: the lock holders are not recorded (see Close)")
	}
	for _, tc := range []struct {
		name             string
		bySink, disables bool // the Sink's hwMu or the Releaser's releaseMu; A's Disable, not its Process
	}{{"Releaser", false, false}, {"Sink", true, false}, {"DisableFlush", false, true}, {"DisableSink", true, true}} {
		bySink := tc.bySink
		t.Run(tc.name, func(t *testing.T) {
			aInCB := make(chan struct{})
			var scA *SendContext
			wakeErr := make(chan error, 1)
			var w Waiter
			w.Init(func(*Waiter) {
				<-aInCB
				wakeErr <- scA.Close()
			})
			scB := parkedManual(t, &w)
			cbErr := make(chan error, 1)
			closeB := func() {
				close(aInCB)
				for { // until the wake-up's Close of A does A's work (and waits for the lock)
					closers.mu.Lock()
					g := scA.closingG
					closers.mu.Unlock()
					if g != 0 {
						break
					}
					runtime.Gosched()
				}
				cbErr <- scB.Close()
			}
			cfg := Config{Type: Kernel, Credits: 4, Threshold: 1, Manual: true}
			var rel Releaser = ReleaseFunc(func(ReleaseCode) { closeB() })
			if bySink {
				cfg.Sink, rel = sinkFunc(func(int, [][]byte) error { closeB(); return nil }), nil
			}
			var err error
			if scA, err = New(cfg); err != nil {
				t.Fatal(err)
			}
			b, err := scA.BufferAlloc(4, rel)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
			go scB.Process() // wakes w, whose wake-up waits for A's callback
			if tc.disables {
				go scA.Disable() // the egress sends A's packet (its Sink), the flush releases it
			} else {
				go scA.Process() // sends A's packet: the Sink, then the release pass's Releaser
			}
			for i, ch := range []chan error{cbErr, wakeErr} {
				select {
				case err := <-ch:
					if err != nil {
						t.Errorf("Close %d: %v", i, err)
					}
				case <-time.After(20 * time.Second): // a hang guard, not a timing
					buf := make([]byte, 1<<16)
					t.Fatalf("Close %d did not return: a wait goes round\n%s", i, buf[:runtime.Stack(buf, true)])
				}
			}
		})
	}
}

// sinkFunc adapts a function to a Sink.
type sinkFunc func(ctxt int, segs [][]byte) error

func (f sinkFunc) Deliver(ctxt int, segs [][]byte) error { return f(ctxt, segs) }

// TestCloseOfItsOwnContextThroughAnotherClose: a Releaser of manual context A (A's Process,
// releaseMu held) Closes context B, whose Disable's flush runs a Releaser of B that Closes A: on
// the goroutine that holds A's releaseMu. That Close would do A's work and wait for A's
// releaseMu, held by its own goroutine, for ever (found by TestFaultSoakPIOCloseFromCallbacks
// with Sinks and Releasers closing contexts, seed 6). It is refused with ErrInvalid, as a Close
// on the context's own chip goroutine is; the outer Close returns nil and A closes later.
func TestCloseOfItsOwnContextThroughAnotherClose(t *testing.T) {
	if !goid.HaveG {
		t.Skip("no getg on this build: the lock holders are not recorded (see Close)")
	}
	cfg := Config{Type: Kernel, Credits: 4, Threshold: 1, Manual: true}
	scA, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scB, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	innerErr, outerErr := make(chan error, 1), make(chan error, 1)
	send := func(sc *SendContext, rel Releaser) {
		t.Helper()
		b, err := sc.BufferAlloc(4, rel)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	send(scB, ReleaseFunc(func(ReleaseCode) { innerErr <- scA.Close() }))
	send(scA, ReleaseFunc(func(ReleaseCode) { outerErr <- scB.Close() }))
	done := make(chan struct{})
	go func() { defer close(done); scA.Process() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard, not a timing
		buf := make([]byte, 1<<16)
		t.Fatalf("A's Process did not return: a Close waits for its own goroutine\n%s", buf[:runtime.Stack(buf, true)])
	}
	if err := <-innerErr; !errors.Is(err, ErrInvalid) {
		t.Errorf("Close of A from B's Releaser in A's Releaser: %v, want ErrInvalid", err)
	}
	if err := <-outerErr; err != nil {
		t.Errorf("Close of B from A's Releaser: %v", err)
	}
	if err := scA.Close(); err != nil {
		t.Errorf("Close of A: %v", err)
	}
}

// TestCloseCycleOfTwoReleasers: Releasers of manual contexts A and B, run at once by A's and B's
// Process on two goroutines (each with its context's releaseMu held), each Close the other's
// context: each Close did its context's work and waited in Disable for the lock the other's
// goroutine holds, for ever (found by TestFaultSoakPIOCloseFromCallbacks, seed 2083 one run in a
// few dozen). The Close that starts its work second is refused with ErrInvalid, as in a cycle of
// chip goroutines; the first finishes once the refused one's Releaser returned.
func TestCloseCycleOfTwoReleasers(t *testing.T) {
	if !goid.HaveG {
		t.Skip("no getg on this build: the lock holders are not recorded (see Close)")
	}
	cfg := Config{Type: Kernel, Credits: 4, Threshold: 1, Manual: true}
	var scs [2]*SendContext
	for i := range scs {
		sc, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		scs[i] = sc
	}
	var in [2]chan struct{}
	errs := make(chan error, 2)
	for i, sc := range scs {
		in[i] = make(chan struct{})
		b, err := sc.BufferAlloc(4, ReleaseFunc(func(ReleaseCode) {
			close(in[i])
			<-in[1-i] // both Releasers hold their releaseMu
			errs <- scs[1-i].Close()
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range scs {
		go sc.Process()
	}
	var refused, ok int
	for i := range 2 {
		select {
		case err := <-errs:
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrInvalid):
				refused++
			default:
				t.Errorf("Close: %v", err)
			}
		case <-time.After(20 * time.Second): // a hang guard, not a timing
			buf := make([]byte, 1<<16)
			t.Fatalf("Close %d did not return: each waits for the other's lock\n%s", i, buf[:runtime.Stack(buf, true)])
		}
	}
	if refused != 1 || ok != 1 {
		t.Errorf("%d Closes refused, %d returned nil: want one of each", refused, ok)
	}
	for _, sc := range scs {
		if err := sc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
