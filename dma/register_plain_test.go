package dma

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// TestDeregisterTightStress: workers Acquire, check and Release a registration in a tight loop,
// with no Gosched to widen the window between Acquire's add and its load of state (where a plain
// add may still sit in the store buffer), while the registration is replaced and deregistered
// over and over. Deregister must never return while a use it should have counted is held (the
// tracked model's Dekker pair catches one on either side), nor miss one: the count settles at 0
// and every kept use was released. Plain counts (membarrier) in normal builds on linux/amd64,
// atomic ones under -race and purego: both must pass.
func TestDeregisterTightStress(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		dur := time.Second
		if testing.Short() {
			dur = 150 * time.Millisecond
		}
		bufs := [2][]byte{make([]byte, 256), make([]byte, 256)}
		first, err := rg.Register(bufs[0], ToDevice)
		require.NoError(t, err)
		var cur atomic.Pointer[tracked]
		cur.Store(&tracked{r: first})
		var stop atomic.Bool
		defer stop.Store(true) // also on a failed require: the workers stop
		var uses, bad atomic.Int64
		var wg sync.WaitGroup
		for range 2 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				n := int64(0)
				for !stop.Load() {
					tr := cur.Load()
					if !tr.r.Acquire() {
						continue
					}
					tr.held.Add(1)
					if tr.gone.Load() {
						bad.Add(1) // a use held after Deregister returned
					}
					n++
					tr.held.Add(-1)
					tr.r.Release()
				}
				uses.Add(n)
			})
		}
		rounds := 0
		for end := time.Now().Add(dur); time.Now().Before(end) && !t.Failed(); rounds++ {
			old := cur.Load()
			nr, err := rg.Register(bufs[(rounds+1)%2], ToDevice)
			require.NoError(t, err)
			cur.Store(&tracked{r: nr})
			require.NoError(t, deregisterGuarded(rg, old.r))
			require.True(t, old.deregistered(), "round %d: Deregister returned with a use held", rounds)
			require.False(t, old.r.Acquire(), "Acquire after Deregister")
			require.True(t, settlesAtZero(old.r), "round %d: uses counted after Deregister", rounds)
		}
		stop.Store(true)
		wg.Wait()
		last := cur.Load()
		require.NoError(t, deregisterGuarded(rg, last.r))
		assert.True(t, last.deregistered())
		assert.Zero(t, last.r.inFlight())
		assert.Zero(t, bad.Load(), "uses held after their Deregister returned")
		assert.Zero(t, m.LiveCount())
		t.Logf("%d rounds, %d uses, plain counts %v", rounds, uses.Load(), first.plain)
	})
}

// TestRegistrationPlainCounts: where membarrier is available (linux/amd64 outside -race and
// purego), registrations count with plain adds; and a P beyond the shards (GOMAXPROCS raised after
// Register) counts on the spill counter, so the sum stays exact and Deregister still waits for
// its uses.
func TestRegistrationPlainCounts(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	m := NewDirect()
	r, err := m.Register(make([]byte, 64), ToDevice)
	require.NoError(t, err)
	assert.Equal(t, plainCounts(), r.plain)
	if pcpu.Enabled {
		require.Len(t, r.shards, 1, "one P at Register")
	}
	runtime.GOMAXPROCS(4)
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	held := make(chan struct{}, workers*each)
	for range workers {
		wg.Go(func() {
			for i := range each {
				require.True(t, r.Acquire())
				if i%2 == 0 {
					runtime.Gosched()
					r.Release()
				} else {
					held <- struct{}{}
				}
			}
		})
	}
	wg.Wait()
	close(held)
	assert.EqualValues(t, workers*each/2, r.inFlight())
	deregisterReleasing(t, m, r, held)
}

// litmusDeregister is Deregister's first step: the CAS to regDying, the barrier that pairs with
// plain adds (left out if !barrier: the test's own check that it can see the reordering), and
// one load of the sum.
func litmusDeregister(r *Registration, barrier bool) int64 {
	r.state.CompareAndSwap(regLive, regDying)
	if barrier && r.plain {
		processBarrier()
	}
	return r.inFlight()
}

// acquireDeregisterLitmus runs trials of the store-buffering litmus test behind Registration's
// argument: one goroutine Acquires while another starts a Deregister (litmusDeregister), both
// released at the same instant; an Acquire that kept its use while the sum read 0 is the bug
// (Deregister would unmap memory in use). It returns the trials that showed it.
func acquireDeregisterLitmus(t *testing.T, trials int, barrier bool) int {
	r, err := NewDirect().Register(make([]byte, 64), ToDevice)
	require.NoError(t, err)
	var go1, done atomic.Int64 // trial i starts when go1 is i, and the acquirer's part ends when done is i
	var kept atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(1); i <= int64(trials); i++ {
			for go1.Load() != i {
			}
			spin(int(i % 17)) // sweep the two sides' offset over the trials
			kept.Store(r.Acquire())
			done.Store(i)
		}
	})
	bad := 0
	for i := int64(1); i <= int64(trials); i++ {
		go1.Store(i)
		spin(int(i / 17 % 13))
		sum := litmusDeregister(r, barrier)
		for done.Load() != i {
		}
		if kept.Load() {
			if sum == 0 {
				bad++
			}
			r.Release()
		}
		r.state.Store(regLive)
	}
	wg.Wait()
	require.Zero(t, r.inFlight())
	return bad
}

// TestAcquireDeregisterLitmusStress: Deregister's first sum never misses a use an Acquire racing
// with it kept (see Registration: the barrier after the CAS to regDying).
func TestAcquireDeregisterLitmusStress(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two Ps running at once")
	}
	trials := 5000 // a barrier takes up to a millisecond while the other goroutine spins
	if testing.Short() {
		trials = 500
	}
	bad := acquireDeregisterLitmus(t, trials, true)
	assert.Zero(t, bad, "trials in which Deregister's sum missed a kept use")
}

// litmusSink keeps spin's loop from being optimised away.
var litmusSink atomic.Int64

// spin runs n short iterations (a delay of a few nanoseconds each).
func spin(n int) {
	x := 0
	for i := range n {
		x += i
	}
	if x < 0 {
		litmusSink.Store(int64(x)) // never: the compiler cannot tell
	}
}
