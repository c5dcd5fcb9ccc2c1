package ring

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReserveInRefusesAfterReset: ReserveIn reserves in its epoch until a Reset, then refuses with
// a bare ErrReset and changes nothing; a new Epoch reserves again. The epoch moves on every Reset,
// also one whose start makes the reservation word's base come out as before.
func TestReserveInRefusesAfterReset(t *testing.T) {
	r, err := New(64)
	require.NoError(t, err)
	ep := r.Epoch()
	v, err := r.ReserveIn(3, ep)
	require.NoError(t, err)
	v.Write(0, []desc.Desc{mk(1), mk(2), mk(3)}, 0)
	v.Publish()
	_, err = r.ReserveIn(0, ep)
	require.ErrorIs(t, err, ErrSize)
	_, err = r.ReserveIn(64, ep)
	require.ErrorIs(t, err, ErrTooBig)

	resetClosed := func(start uint64) {
		r.Close()
		r.SetHWHead(r.Tail())
		r.BeginWrite()
		r.SetSwHead(r.Tail())
		r.EndWrite()
		r.Reset(start)
		r.Open()
	}
	resetClosed(0)
	_, err = r.ReserveIn(1, ep)
	require.Same(t, ErrReset, err, "bare ErrReset after a Reset")
	assert.Zero(t, r.Reserved(), "refused: nothing reserved")
	require.NotEqual(t, ep, r.Epoch())

	ep = r.Epoch()
	v, err = r.ReserveIn(2, ep)
	require.NoError(t, err)
	assert.Zero(t, v.Start())
	v.Write(0, []desc.Desc{mk(4), mk(5)}, 0)
	v.Publish()
	// Reset(index + 1) gives the new epoch the old base: the epoch moves regardless.
	base := r.base.Load()
	resetClosed(r.Reserved() + 1)
	require.Equal(t, base, r.base.Load())
	_, err = r.ReserveIn(1, ep)
	require.Same(t, ErrReset, err)
	_, err = r.Reserve(1)
	assert.NoError(t, err, "Reserve reserves in any epoch")
}

// TestStressReserveInEpoch: producers send "lists" of several reservations, each list with the
// epoch read before its first (re-read while nothing of the list is in), against a consumer that
// does sdma's sw clean every few rounds (Close, drain, Reset, Open). Once a list has a
// reservation, a refusal (ErrReset) ends it. Every list must lie in one epoch: all its
// descriptors the consumer sees fall between the same two Resets, and in order. Run under -race
// and at -cpu 1,2,4.
func TestStressReserveInEpoch(t *testing.T) {
	producers, lists := 4, 3000
	if testing.Short() {
		lists = 500
	}
	r, err := New(64)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var done sync.WaitGroup
	done.Add(producers)
	stop := make(chan struct{})
	quit := make(chan struct{}) // closed when the test returns, a failure included: producers stop
	defer func() { close(quit); wg.Wait() }()
	for p := range producers {
		wg.Add(1)
		go func(pid uint64) {
			defer wg.Done()
			defer done.Done()
			rng := rand.New(rand.NewPCG(pid, 11))
			ds := make([]desc.Desc, 0, 8)
			seq := uint64(0)
			for range lists {
				ep, pinned := r.Epoch(), false
				for range 1 + rng.IntN(6) { // batches of the list
					n := 1 + rng.IntN(8)
					ds = ds[:0]
					for k := range n {
						ds = append(ds, stressDesc(pid, seq+uint64(k), k, 0))
					}
					var v Reservation
					var err error
					for {
						v, err = r.ReserveIn(n, ep)
						if err == ErrReset && !pinned {
							ep = r.Epoch()
							continue
						}
						if err != ErrFull && err != ErrClosed {
							break
						}
						select {
						case <-quit:
							return
						default:
						}
						runtime.Gosched()
					}
					if err == ErrReset {
						break // the list was cut by a Reset: the rest is not sent
					}
					if err != nil {
						t.Errorf("producer %d: %v", pid, err)
						return
					}
					pinned = true
					v.Write(0, ds, 0)
					v.Publish()
					seq += uint64(n)
				}
				seq = (seq>>20 + 1) << 20 // the next list: a new high part
			}
		}(uint64(p))
	}
	go func() { done.Wait(); close(stop) }()

	epochOf := map[uint64]int{} // pid<<28 | list number -> the reset round it was seen in
	next := make([]uint64, producers)
	round := 0
	consume := func() {
		h, tl := r.HWHead(), r.Tail()
		for i := h; i != tl; i++ {
			d := r.Slot(i)
			pid, seq := d.Qw0>>48, d.Qw0&(1<<48-1)
			require.Less(t, pid, uint64(producers))
			require.Equal(t, check32(d.Qw0), uint32(d.Qw1>>32), "torn or stale slot at %#x", i)
			require.GreaterOrEqual(t, seq, next[pid], "producer %d out of order", pid)
			next[pid] = seq + 1
			key := pid<<28 | seq>>20
			if e, ok := epochOf[key]; ok {
				require.Equal(t, e, round, "producer %d list %d: descriptors in two epochs", pid, seq>>20)
			}
			epochOf[key] = round
		}
		if h != tl {
			r.SetHWHead(tl)
			r.BeginWrite()
			r.SetSwHead(tl)
			r.EndWrite()
		}
	}
	for i := 1; ; i++ {
		select {
		case <-stop:
			consume()
			wg.Wait()
			consume()
			assert.Positive(t, round)
			t.Logf("%d resets, %d lists seen", round, len(epochOf))
			return
		default:
		}
		consume()
		if i%5 != 0 {
			runtime.Gosched()
			continue
		}
		r.Close()
		for r.Tail() != r.Reserved() {
			consume()
			runtime.Gosched()
		}
		consume()
		r.Reset(0)
		round++
		r.Open()
	}
}

// TestReserveInRefusesFutureEpoch: an epoch ahead of the ring's (Epoch()+1, or Epoch()-1 on a new
// ring, which wraps to reserve's internal "any epoch") is refused with ErrReset and reserves
// nothing; it used to reserve for the wrapped value.
func TestReserveInRefusesFutureEpoch(t *testing.T) {
	r, err := New(64)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []uint64{r.Epoch() + 1, r.Epoch() - 1, ^uint64(0)} {
		if _, err := r.ReserveIn(1, ep); !errors.Is(err, ErrReset) {
			t.Fatalf("ReserveIn(1, %d) on a ring of epoch %d: %v, want ErrReset", ep, r.Epoch(), err)
		}
	}
	if got := r.Reserved(); got != 0 {
		t.Fatalf("%d slots reserved by refused calls", got)
	}
	if _, err := r.ReserveIn(1, r.Epoch()); err != nil {
		t.Fatalf("the current epoch: %v", err)
	}
}
