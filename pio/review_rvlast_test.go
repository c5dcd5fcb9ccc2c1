package pio

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestQueueWaitRacingCloseNeverStrands races QueueWait (with a seq taken just before, as a
// caller that found no credits does) against Close, many times: a QueueWait that returned true
// must have been woken by the time Close returned and the waiter is off the list (Close's
// Disable flushes it), and one that returned false parked nothing. A waiter parked after Close's
// flush would be stranded: nothing wakes a closed context's list.
func TestQueueWaitRacingCloseNeverStrands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a bound, not a timing assertion
	defer cancel()
	iters := 3000
	if testing.Short() {
		iters = 600
	}
	for _, manual := range []bool{true, false} {
		for i := 0; i < iters && ctx.Err() == nil; i++ {
			sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Manual: manual})
			if err != nil {
				t.Fatal(err)
			}
			const nw = 3
			var ws [nw]*Waiter
			var parked [nw]bool
			var wg sync.WaitGroup
			start := make(chan struct{})
			for k := range ws {
				ws[k] = newChanWaiter()
				wg.Add(1)
				go func(k int) {
					defer wg.Done()
					<-start
					for ctx.Err() == nil {
						seq := sc.ReleaseSeq()
						if sc.QueueWait(ws[k], seq) {
							parked[k] = true
							return
						}
						if _, err := sc.BufferAlloc(64, nil); err != nil {
							return // ErrClosed: the caller stops
						}
						runtime.Gosched()
					}
				}(k)
			}
			close(start)
			if i%2 == 0 {
				runtime.Gosched()
			}
			if err := sc.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for k, w := range ws {
				if !parked[k] {
					continue
				}
				select {
				case <-w.ch:
				default:
					t.Fatalf("manual=%v iteration %d: waiter %d parked (QueueWait true) and never woken after Close; Waiting()=%d", manual, i, k, sc.Waiting())
				}
			}
			if n := sc.Waiting(); n != 0 {
				t.Fatalf("manual=%v iteration %d: %d waiters left on a closed context's list", manual, i, n)
			}
		}
	}
	if ctx.Err() != nil {
		t.Log("bounded by the context; fewer iterations ran")
	}
}
