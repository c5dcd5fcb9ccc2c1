package pio

import (
	"errors"
	"runtime"
	"testing"
)

// windowAnswer is what another goroutine's Restart and Enable answered in the window between a
// Goexit's halt on the chip goroutine and that goroutine's end, and whether the context was
// enabled after them.
type windowAnswer struct {
	restart, enable error
	enabled         bool
}

// inChipGoexitWindow installs testRunDone for sc's chip goroutine: in its deferred handler
// (runDone), after the Goexit's halt and before the goroutine ends, it runs Restart and Enable on
// another goroutine, waits for them, and sends their answers on the returned channel.
func inChipGoexitWindow(t *testing.T) (target func(*SendContext), answers <-chan windowAnswer) {
	t.Helper()
	ch := make(chan windowAnswer, 1)
	var sc0 *SendContext
	set := make(chan struct{})
	hook := func(sc *SendContext) {
		<-set
		if sc != sc0 {
			return // another test's context
		}
		done := make(chan windowAnswer)
		go func() {
			a := windowAnswer{restart: sc.Restart()}
			a.enable = sc.Enable()
			a.enabled = sc.Enabled()
			done <- a
		}()
		ch <- <-done
	}
	testRunDone.Store(&hook)
	t.Cleanup(func() { testRunDone.Store(nil) })
	return func(sc *SendContext) { sc0 = sc; close(set) }, ch
}

// TestRestartInChipGoexitWindow: a Sink's or Releaser's runtime.Goexit on the chip goroutine
// halts the context (CauseGoexit) in the goroutine's deferred calls, and the goroutine ends
// later (runDone). A Restart from another goroutine in between re-enabled the context, with
// nothing left to consume its packets, until runDone halted it again (two halts counted). Now
// the halt marks the goroutine gone at once: Restart and Enable in that window refuse with the
// recorded *HaltError, the context stays halted (one halt, no restart), and Close releases every
// packet exactly once.
func TestRestartInChipGoexitWindow(t *testing.T) {
	for _, where := range []string{"sink", "releaser"} {
		t.Run(where, func(t *testing.T) {
			target, answers := inChipGoexitWindow(t)
			cfg := Config{Credits: 64, Threshold: 1}
			var first Releaser = new(countRel)
			if where == "sink" {
				cfg.Sink = &goexitSink{}
			} else {
				first = new(exitRel)
			}
			sc, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			target(sc)
			sendOne(t, sc, first)
			var a windowAnswer
			bounded(t, "the chip goroutine's Goexit", func() { a = <-answers })
			var h *HaltError
			if !errors.As(a.restart, &h) || h.Cause != CauseGoexit {
				t.Fatalf("Restart in the window: %v, want the Goexit's *HaltError", a.restart)
			}
			if !errors.Is(a.enable, ErrHalted) {
				t.Fatalf("Enable in the window: %v, want the Goexit's *HaltError", a.enable)
			}
			if a.enabled {
				t.Fatal("the context was enabled in the window")
			}
			bounded(t, "the chip goroutine's end", func() { <-sc.done })
			if !sc.Halted() || sc.Enabled() {
				t.Fatalf("after the goroutine's end: halted %v, enabled %v; want halted, not enabled", sc.Halted(), sc.Enabled())
			}
			if st := sc.Stats(); st.Halts != 1 || st.Restarts != 0 {
				t.Fatalf("%d halts, %d restarts; want 1, 0", st.Halts, st.Restarts)
			}
			if err := sc.Restart(); !errors.Is(err, ErrHalted) {
				t.Fatalf("Restart after the goroutine's end: %v, want the Goexit's halt", err)
			}
			bounded(t, "Close", func() { sc.Close() })
			switch r := first.(type) {
			case *countRel:
				r.want(t, "the packet whose Deliver exited", 1, PRCSCDisable)
			case *exitRel:
				if n := r.n.Load(); n != 1 {
					t.Fatalf("the exited Releaser ran %d times, want 1", n)
				}
			}
		})
	}
}

// TestCallerGoexitKeepsChip: a Goexit's halt on a goroutine other than the chip's (a caller's
// Process or BufferAlloc on a context with a chip goroutine) does not mark the chip goroutine
// gone: Restart recovers the context, and its chip goroutine sends again.
func TestCallerGoexitKeepsChip(t *testing.T) {
	sc, err := New(Config{Credits: 16, Threshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { boundedErr(t, "Close (cleanup)", func() { sc.Close() }) })
	if goexitOn(t, "a caller's Goexit", func() {
		sc.goexitHalt("a test's caller", false, false)
		runtime.Goexit()
	}) {
		t.Fatal("the goroutine did not exit")
	}
	if !sc.Halted() || sc.gone.Load() {
		t.Fatalf("halted %v, gone %v: want halted, not gone", sc.Halted(), sc.gone.Load())
	}
	restartBounded(t, sc)
	var rel countRel
	sendOne(t, sc, &rel)
	bounded(t, "the chip goroutine's release", func() {
		for rel.n.Load() == 0 {
			runtime.Gosched()
		}
	})
	rel.want(t, "the packet after Restart", 1, PRCThreshold)
}
