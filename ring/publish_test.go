package ring

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/require"
)

// TestPublishReleaseDoorbell is the store-buffering litmus test of the recipe that
// PublishRelease documents (package doc, O6): a producer publishes with PublishRelease, then
// makes a sequentially consistent operation of its own (an atomic Add), then loads the
// consumer's "asleep" flag; the consumer stores the flag and then loads the tail. In every round
// at least one side must see the other: the producer sees the flag (and rings the bell) or the
// consumer sees the new tail (and does not sleep). Both missing would be a lost wakeup. Each
// round starts both sides together; on amd64 outside -race the tail store is a plain MOV. The
// window in which a missing seq-cst operation would show is a few nanoseconds wide, so this test
// holds the recipe to its promise; it is not a proof that the operation is needed.
func TestPublishReleaseDoorbell(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 2000
	}
	r, err := New(64)
	require.NoError(t, err)
	var (
		asleep atomic.Bool   // the consumer's flag: stored by the consumer, loaded by the producer
		fence  atomic.Uint64 // the producer's seq-cst operation between the publish and the load
		start  atomic.Int64  // the round both sides may run (written by the consumer)
		done   atomic.Int64  // the round the producer finished
		rang   atomic.Bool   // the producer saw the flag in its round (written before done)
	)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		ds := []desc.Desc{{Qw0: 1}}
		for i := int64(1); i <= int64(rounds); i++ {
			res, err := r.Reserve(1)
			if err != nil {
				panic(err) // the consumer drains every round: never full
			}
			res.Write(0, ds, 0)
			spinUntil(func() bool { return start.Load() >= i })
			res.PublishRelease()
			fence.Add(1)
			rang.Store(asleep.Load())
			done.Store(i)
		}
	}()
	dst := make([]desc.Desc, 4)
	lost := 0
	for i := int64(1); i <= int64(rounds); i++ {
		before := r.Tail()
		start.Store(i)
		asleep.Store(true) // seq-cst store (XCHG on amd64), then the load: the consumer's half
		sawTail := r.Tail() != before
		spinUntil(func() bool { return done.Load() >= i })
		if !sawTail && !rang.Load() {
			lost++
		}
		asleep.Store(false)
		require.Equal(t, 1, r.Dequeue(dst), "round %d", i)
	}
	wg.Wait()
	require.Zero(t, lost, "rounds in which neither side saw the other (lost wakeups), of %d", rounds)
	require.Equal(t, uint64(rounds), fence.Load())
}

// spinUntil re-checks cond, yielding now and then so that the other side runs on any number of
// CPUs.
func spinUntil(cond func() bool) {
	for i := 0; !cond(); i++ {
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
}
