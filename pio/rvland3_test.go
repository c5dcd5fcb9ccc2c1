package pio

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/internal/goid"
)

// waiterGatedSink holds each packet until a producer is queued on the wait list (or every
// producer is done), so that nearly every release pass of the chip goroutine has a waiter to wake.
type waiterGatedSink struct {
	sc   atomic.Pointer[SendContext]
	done *atomic.Int32
	want int32
}

func (s *waiterGatedSink) Deliver(int, [][]byte) error {
	sc := s.sc.Load()
	for sc != nil && sc.Waiting() == 0 && s.done.Load() < s.want {
		runtime.Gosched()
	}
	return nil
}

// TestChipWakeupsTakeNoStack: the chip goroutine's release passes that wake waiters do not ask
// goid for their identity: Close waits for that goroutine's end (done) before it looks at the
// wake-ups in progress, so they need no record. Without getg (purego, 386, ...) goid.Self is a
// runtime.Stack and an allocation (goid.ID's doc: never per packet), and the chip model returns
// credits and runs a pass after every packet while producers wait: c9facb1 made every such pass
// pay one. The test counts goid.IDCalls over SendWaits that keep the wait list busy; it can only
// fail on such builds (with getg Self never calls ID): run it with -tags purego.
func TestChipWakeupsTakeNoStack(t *testing.T) {
	const producers, packets = 2, 200
	var done atomic.Int32
	sink := &waiterGatedSink{done: &done, want: producers}
	sc, err := New(Config{Type: Kernel, Credits: 2, Threshold: 1, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sink.sc.Store(sc)
	for sc.chipG.Load() == 0 { // the chip goroutine's own goid.Self (once) is not the pass's
		runtime.Gosched()
	}
	before := goid.IDCalls()
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			for range packets {
				if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 16)}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	calls := goid.IDCalls() - before
	st := sc.Stats()
	if st.Wakeups == 0 {
		t.Fatalf("no wake-up ran (%d waits): the test did not reach the path", st.Waits)
	}
	if calls != 0 {
		t.Fatalf("%d runtime.Stack calls (goid.ID) for %d wake-ups on the chip goroutine, want 0", calls, st.Wakeups)
	}
}

// TestZeroSendContextQueueWaitParksNothing: QueueWait on a SendContext not made by New returns
// false and parks nothing, as on a closed context: nothing would ever wake the waiter (the zero
// context has no chip and no credits), and the retried allocation gets ErrInvalid saying the
// context was not made by New. It parked the waiter and returned true: a caller that then waited
// for its wake-up waited for ever.
func TestZeroSendContextQueueWaitParksNothing(t *testing.T) {
	var sc SendContext
	var w Waiter
	w.Init(func(*Waiter) {})
	if sc.QueueWait(&w, sc.ReleaseSeq()) {
		t.Errorf("QueueWait on a zero SendContext: true (parked, nothing will wake it)")
	}
	if n := sc.Waiting(); n != 0 {
		t.Errorf("Waiting %d after QueueWait on a zero SendContext, want 0", n)
	}
	if w.on.Load() != nil {
		t.Errorf("the waiter is on the zero SendContext's list")
	}
	if _, err := sc.BufferAlloc(16, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("the retried BufferAlloc: %v, want ErrInvalid", err)
	}
}
