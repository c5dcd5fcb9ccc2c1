package usdma

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/sdma"
)

// boundedAllocs returns a waiting (alloc.List) and a non-waiting (capped Slab) allocator of
// about n txreqs each.
func boundedAllocs(t *testing.T, n int) map[string]interface {
	alloc.Allocator[TxReq]
	Stats() alloc.Stats
} {
	l, err := alloc.NewList[TxReq](n, nil)
	require.NoError(t, err)
	s, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: n, MaxSlabs: 1})
	require.NoError(t, err)
	return map[string]interface {
		alloc.Allocator[TxReq]
		Stats() alloc.Stats
	}{"list": l, "slab": s}
}

// TestBoundedAllocatorWaitEndsOnEngineStop: a Submit waiting for txreqs whose packets in flight
// are flushed (the engine stopped, or the device closed, on a Manual engine nobody drives) is
// woken by their aborted completions and stops: it returns an error, the slot ends ERROR exactly
// once, and every txreq is back.
func TestBoundedAllocatorWaitEndsOnEngineStop(t *testing.T) {
	for _, how := range []string{"stop", "devclose"} {
		for name, a := range boundedAllocs(t, 4) {
			t.Run(how+"/"+name, func(t *testing.T) {
				dev := testDevice(t, sdma.Config{Manual: true})
				pq := testQueue(t, Config{Device: dev, Alloc: a})
				ends := newEndCounter(pq)
				data := pattern(10*256, 1)
				info, hdr := Message(0, 256, testTemplate, data)
				done := make(chan error, 1)
				go func() { done <- pq.Submit(context.Background(), info, &hdr, data) }()
				for pq.txWait.Load() == nil {
					runtime.Gosched()
				}
				if how == "stop" {
					require.NoError(t, dev.Engine(0).Stop())
				} else {
					require.NoError(t, dev.Close())
				}
				select {
				case err := <-done:
					require.Error(t, err)
				case <-time.After(20 * time.Second):
					t.Fatal("Submit still waits for txreqs after its packets were flushed")
				}
				var ce *CompError
				require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
				assert.Equal(t, 1, ends.total())
				assert.Zero(t, a.Stats().InUse)
			})
		}
	}
}

// TestBoundedAllocatorWaitUnderStops: back-to-back requests over a bounded allocator while
// another goroutine stops and restarts the engine: every Submit returns, every accepted request
// ends exactly once, and every txreq is back.
func TestBoundedAllocatorWaitUnderStops(t *testing.T) {
	for name, a := range boundedAllocs(t, 5) {
		t.Run(name, func(t *testing.T) {
			dev := testDevice(t, sdma.Config{RingSize: 64})
			pq := testQueue(t, Config{Device: dev, Alloc: a, Slots: 4})
			ends := newEndCounter(pq)
			e := dev.Engine(0)
			stop := make(chan struct{})
			chaos := make(chan struct{})
			go func() {
				defer close(chaos)
				for i := 0; ; i++ {
					select {
					case <-stop:
						_ = e.Start()
						return
					default:
					}
					_ = e.Stop()
					runtime.Gosched()
					_ = e.Start()
					time.Sleep(time.Duration(i%7) * 50 * time.Microsecond)
				}
			}()
			accepted := 0
			for i := range 200 {
				slot := i % 4
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_ = pq.Wait(ctx, slot)
				cancel()
				data := pattern((12+i%9)*128, byte(i))
				info, hdr := Message(slot, 128, testTemplate, data)
				ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
				err := pq.Submit(ctx, info, &hdr, data)
				cancel()
				require.NotErrorIs(t, err, context.DeadlineExceeded, "request %d waited 20s", i)
				if err == nil || pq.Comp(slot).Status != Free {
					accepted++
				}
			}
			close(stop)
			<-chaos
			for slot := range 4 {
				_ = waitSlot(t, pq, slot)
			}
			assert.Equal(t, int(pq.Stats().Requests), ends.total())
			assert.Zero(t, a.Stats().InUse)
		})
	}
}

// TestBoundedAllocatorCloseAndCtxRace: Submits that wait for txreqs (a small allocator, a driven
// engine) while their ctx ends at varying moments and the queue closes at a varying moment:
// every Submit returns (nil, ctx's error, ErrClosed), every request accepted ends exactly once,
// every txreq is back, and no goroutine of the waits is left.
func TestBoundedAllocatorCloseAndCtxRace(t *testing.T) {
	for round := range 12 {
		for name, a := range boundedAllocs(t, 3) {
			t.Run(name, func(t *testing.T) {
				defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
				dev, err := sdma.NewDevice(sdma.Config{RingSize: 64})
				require.NoError(t, err)
				defer dev.Close()
				pq, err := New(Config{Device: dev, Alloc: a, Slots: 4})
				require.NoError(t, err)
				ends := newEndCounter(pq)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := 0; ; i++ {
						slot := i % 4
						_ = waitSlot(t, pq, slot)
						data := pattern((10+i%5)*64, byte(i))
						info, hdr := Message(slot, 64, testTemplate, data)
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%4)*30*time.Microsecond)
						err := pq.Submit(ctx, info, &hdr, data)
						cancel()
						if errors.Is(err, ErrClosed) && pq.closed.Load() {
							return
						}
					}
				}()
				time.Sleep(time.Duration(round) * 300 * time.Microsecond)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				require.NoError(t, pq.Close(ctx))
				<-done
				assert.Equal(t, int(pq.Stats().Requests), ends.total())
				for slot := range 4 {
					assert.NotEqual(t, Queued, pq.Comp(slot).Status, "slot %d", slot)
				}
				assert.Zero(t, a.Stats().InUse)
			})
		}
	}
}
