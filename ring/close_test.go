package ring

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseRefusesAndReopens: a closed ring refuses every way of reserving with a bare ErrClosed
// and changes nothing; a reservation made before Close is still published; the readers of the
// reservation index do not see the closed mark; Reset keeps the ring closed; Open reopens it.
func TestCloseRefusesAndReopens(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, ^uint64(0)-10) // across the uint64 wrap
		require.NoError(t, err)
		start := r.Tail()
		before, err := r.Reserve(3)
		require.NoError(t, err)
		require.False(t, r.Closed())

		r.Close()
		require.True(t, r.Closed())
		r.Close() // idempotent
		assert.Equal(t, start+3, r.Reserved(), "the earlier reservation is counted, without the mark")
		assert.Equal(t, 64-1-3, r.FreeCnt())
		assert.False(t, r.Empty())
		_, err = r.Reserve(1)
		assert.Same(t, ErrClosed, err, "Reserve: bare ErrClosed")
		_, err = r.Enqueue([]desc.Desc{mk(1)}, 0)
		assert.Same(t, ErrClosed, err, "Enqueue")
		_, err = r.EnqueueSP([]desc.Desc{mk(1)}, 0)
		assert.Same(t, ErrClosed, err, "EnqueueSP")
		assert.Equal(t, start+3, r.Reserved(), "refusals change nothing")
		assert.Equal(t, start, r.Tail())

		before.Write(0, []desc.Desc{mk(1), mk(2), mk(3)}, 0)
		before.Publish()
		assert.Equal(t, r.Reserved(), r.Tail(), "every reservation published: what a closer waits for")
		r.SetHWHead(r.Tail())
		r.BeginWrite()
		r.SetSwHead(r.Tail())
		r.EndWrite()
		assert.True(t, r.Empty())
		assert.Equal(t, 64-1, r.FreeCnt())

		r.Reset(0)
		assert.True(t, r.Closed(), "Reset keeps the ring closed")
		assert.Zero(t, r.Reserved())
		assert.Zero(t, r.Tail())
		assert.True(t, r.Empty())
		assert.Equal(t, 64-1, r.FreeCnt())
		_, err = r.Reserve(1)
		assert.Same(t, ErrClosed, err, "still closed after Reset")

		r.Open()
		r.Open() // idempotent
		require.False(t, r.Closed())
		v, err := r.Reserve(2)
		require.NoError(t, err)
		assert.Zero(t, v.Start(), "the ring restarts at the Reset's index")
		v.Write(0, []desc.Desc{mk(4), mk(5)}, 0)
		v.Publish()
		at, err := r.EnqueueSP([]desc.Desc{mk(6)}, 0)
		require.NoError(t, err)
		assert.EqualValues(t, 2, at)
		assert.EqualValues(t, 3, r.Reserved())
		assert.EqualValues(t, 3, r.Tail())
		assert.Equal(t, mk(6).WithGeneration(0), r.Slot(2))
	})
}

// TestCloseWordNeverRepeats: a producer that loaded the reservation word before a Close cannot
// succeed with its compare-and-swap after the Reset and Open that follow, even once the new epoch
// is back at the same index (the ABA that would let it reserve with a head of the old epoch).
func TestCloseWordNeverRepeats(t *testing.T) {
	r, err := New(64)
	require.NoError(t, err)
	seen := map[uint64]bool{}
	for cycle := range 5 {
		for range 5 {
			_, err := r.Enqueue([]desc.Desc{mk(1)}, 0)
			require.NoError(t, err)
		}
		w := r.reserved.Load() // a stale producer's view, at index 5
		require.EqualValues(t, 5, r.Reserved())
		require.False(t, seen[w], "cycle %d: word %#x seen in an earlier epoch", cycle, w)
		seen[w] = true
		r.Close()
		require.False(t, r.reserved.CompareAndSwap(w, w+1), "cycle %d: a CAS against the open word succeeded on the closed ring", cycle)
		r.SetHWHead(r.Tail())
		r.BeginWrite()
		r.SetSwHead(r.Tail())
		r.EndWrite()
		r.Reset(0)
		r.Open()
		require.False(t, r.reserved.CompareAndSwap(w, w+1), "cycle %d: the new epoch's word equals the old one", cycle)
	}
}

// TestStressCloseResetRace: producers (Reserve+Write+Publish, Enqueue) run against one goroutine
// that plays the hardware model and the completion pass and, every few rounds, does what sdma's
// sw clean does: Close, wait for the tail to reach Reserved (consuming meanwhile), consume the
// rest, Reset(0), Open. Producers that are refused (ErrClosed, ErrFull) retry. Every descriptor
// must be seen exactly once, in each producer's order, with content and generation intact: a
// reservation made across a Reset (on a word or a head of the old epoch) would overwrite slots in
// use or publish out of order, and a reservation missed by the closer would be lost to the
// Reset. Run under -race and at -cpu 1,2,4.
func TestStressCloseResetRace(t *testing.T) {
	producers, perProducer := 4, 20000
	if testing.Short() {
		perProducer = 3000
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		require.NoError(t, err)
		total := producers * perProducer
		// crew.quit ends the producers: set when the test returns (a failed check of the
		// consumer's included: producers would retry a full or closed ring for ever, and the
		// deferred stop wait for them) or a producer fails (the consumer would wait for ever for
		// its descriptors).
		var crew stressCrew
		defer crew.stop(t)
		for p := range producers {
			crew.Add(1)
			go func(pid uint64) {
				defer crew.Done()
				rng := rand.New(rand.NewPCG(pid, 7))
				ds := make([]desc.Desc, 0, 8)
				for seq := 0; seq < perProducer; {
					n := min(1+rng.IntN(8), perProducer-seq)
					ds = ds[:0]
					for k := range n {
						ds = append(ds, stressDesc(pid, uint64(seq+k), k, 0))
					}
					for i := 0; ; i++ {
						var err error
						if pid%2 == 0 {
							_, err = r.Enqueue(ds, 0)
						} else {
							var s Reservation
							if s, err = r.Reserve(n); err == nil {
								if i%3 == 0 {
									runtime.Gosched() // a reservation held across the closer's wait
								}
								s.Write(0, ds, 0)
								s.Publish()
							}
						}
						if err == nil {
							break
						}
						if err != ErrFull && err != ErrClosed {
							t.Errorf("producer %d: %v", pid, err)
							crew.quit.Store(true)
							return
						}
						if crew.quit.Load() {
							return
						}
						runtime.Gosched()
					}
					seq += n
				}
			}(uint64(p))
		}

		next := make([]uint64, producers)
		seen := 0
		consume := func() {
			h, tl := r.HWHead(), r.Tail()
			for i := h; i != tl; i++ {
				d := r.Slot(i)
				pid, seq := d.Qw0>>48, d.Qw0&(1<<48-1)
				require.Less(t, pid, uint64(producers), "index %#x: %#x", i, d)
				require.Equal(t, next[pid], seq, "producer %d out of order at index %#x", pid, i)
				require.Equal(t, check32(d.Qw0), uint32(d.Qw1>>32), "torn or stale slot at %#x", i)
				require.Equal(t, r.Generation(i), d.Generation(), "generation at %#x", i)
				next[pid]++
				seen++
			}
			if h != tl {
				r.SetHWHead(tl)
				r.BeginWrite()
				r.SetSwHead(tl)
				r.EndWrite()
			}
		}
		resets := 0
		var prog progress
		for round := 1; seen < total && !crew.quit.Load(); round++ {
			consume()
			if prog.stalled(seen) {
				t.Fatalf("no descriptor published for %v: %d of %d seen (tail %#x, reserved %#x)", hangGuard, seen, total, r.Tail(), r.Reserved())
			}
			if round%7 != 0 {
				runtime.Gosched()
				continue
			}
			r.Close()
			for end := time.Now().Add(hangGuard); r.Tail() != r.Reserved(); {
				if time.Now().After(end) {
					t.Fatalf("round %d: the tail did not reach the reservations within %v of Close (tail %#x, reserved %#x): Close let reservations in, or one was never published", round, hangGuard, r.Tail(), r.Reserved())
				}
				consume() // a producer's Publish may wait for an earlier one
				runtime.Gosched()
			}
			consume()
			require.True(t, r.Empty(), "closed and drained")
			r.Reset(0)
			resets++
			require.Zero(t, r.Reserved())
			r.Open()
		}
		if !crew.stop(t) || t.Failed() {
			return // a producer's failure, or one stuck
		}
		for p := range producers {
			assert.Equal(t, uint64(perProducer), next[p], "producer %d", p)
		}
		assert.Greater(t, resets, 0)
		t.Logf("%d resets", resets)
	})
}
