package verbs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// slowDone is a Completion that takes its time before it counts (it still does not block on
// anything): the window between the engine's completion and the count.
type slowDone struct{ n atomic.Int64 }

func (d *slowDone) Done(Path, error) {
	time.Sleep(2 * time.Millisecond)
	d.n.Add(1)
}

// Drain returns only after every SDMA packet's Completion was told (the kernel's complete_tx
// calls the callback, then iowait_sdma_dec and the drain wakeup): Flow.Drain is iowait_drain,
// and a caller that drains and then counts its completions must see them all. The flow's busy
// count dropped to zero before Done ran, so Drain returned with the last Done still to come.
func TestDrainAfterSDMACompletions(t *testing.T) {
	d := newDevice(t, newOrderSink(), nil, Config{DisablePIO: true})
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	for round := range 5 {
		var c slowDone
		for i := range 3 {
			if _, err := f.Send(ctx, [][]byte{packet(1, uint64(round*3+i), 512)}, &c); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.n.Load(); n != 3 {
			t.Fatalf("round %d: Drain returned with %d of 3 completions told", round, n)
		}
	}
}
