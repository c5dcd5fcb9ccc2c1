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

// chipGoexitCase makes sc's chip goroutine call runtime.Goexit in user code (where). start
// returns what finishes, after the Goexit's halt, the buffer it left being written (or nil),
// and what checks, after Close, that every packet it sent was released exactly once.
type chipGoexitCase struct {
	where string
	cfg   Config
	start func(t *testing.T, sc *SendContext) (finish, released func(t *testing.T))
}

func chipGoexitCases() []chipGoexitCase {
	sendOneRel := func(first Releaser) func(t *testing.T, sc *SendContext) (func(t *testing.T), func(t *testing.T)) {
		return func(t *testing.T, sc *SendContext) (func(t *testing.T), func(t *testing.T)) {
			sendOne(t, sc, first)
			return nil, func(t *testing.T) {
				switch r := first.(type) {
				case *countRel:
					r.want(t, "the packet whose Deliver exited", 1, PRCSCDisable)
				case *exitRel:
					if n := r.n.Load(); n != 1 {
						t.Fatalf("the exited Releaser ran %d times, want 1", n)
					}
				}
			}
		}
	}
	return []chipGoexitCase{
		{"sink", Config{Credits: 64, Threshold: 1, Sink: &goexitSink{}}, sendOneRel(new(countRel))},
		{"releaser", Config{Credits: 64, Threshold: 1}, sendOneRel(new(exitRel))},
		{"wakeup", Config{Credits: 1, Threshold: 1}, func(t *testing.T, sc *SendContext) (func(t *testing.T), func(t *testing.T)) {
			// As TestWakeupGoexitChip: the only credit allocated, not written; a waiter whose
			// wake-up exits, woken by QueueWait's forced return on the chip goroutine.
			rel := new(countRel)
			b, err := sc.BufferAlloc(4, rel)
			if err != nil {
				t.Fatal(err)
			}
			w := &Waiter{}
			w.Init(func(*Waiter) { runtime.Goexit() })
			if !sc.QueueWait(w, sc.ReleaseSeq()) {
				t.Fatal("QueueWait did not park")
			}
			finish := func(t *testing.T) {
				if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
					t.Fatal(err)
				}
			}
			return finish, func(t *testing.T) { rel.want(t, "the pending packet", 1, PRCSCDisable) }
		}},
	}
}

// TestRestartInChipGoexitWindow: a Sink's, Releaser's or wake-up's runtime.Goexit on the chip
// goroutine halts the context (CauseGoexit) in the goroutine's deferred calls, and the goroutine
// ends later (runDone). A Restart from another goroutine in between re-enabled the context after
// a Sink's or Releaser's Goexit, with nothing left to consume its packets, until runDone halted
// it again (two halts counted); after a wake-up's the context stayed enabled until runDone
// (Restart: "not halted"). Now the halt marks the goroutine gone at once: Restart and Enable in
// that window refuse with the recorded *HaltError, the context stays halted (one halt, no
// restart), and Close releases every packet exactly once.
func TestRestartInChipGoexitWindow(t *testing.T) {
	for _, c := range chipGoexitCases() {
		t.Run(c.where, func(t *testing.T) {
			target, answers := inChipGoexitWindow(t)
			sc, err := New(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			target(sc)
			finish, released := c.start(t, sc)
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
			if _, err := sc.BufferAlloc(4, nil); err != ErrNotRunning {
				t.Fatalf("BufferAlloc after the Goexit: %v, want ErrNotRunning", err)
			}
			if finish != nil {
				finish(t) // Close waits for every copy to end
			}
			bounded(t, "Close", func() { sc.Close() })
			released(t)
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
