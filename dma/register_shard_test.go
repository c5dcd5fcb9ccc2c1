package dma

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// tracked is a registration with a model of its uses: held counts the uses a worker holds, raised
// only after an Acquire succeeded and lowered only just before the matching Release, so a
// positive held means a use really is held; gone is set once Deregister returned. A worker that
// raises held and then sees gone, or a Deregister that set gone and then sees held, caught a use
// held after Deregister returned (the two are a Dekker pair: one of the two sides sees the other).
type tracked struct {
	r    *Registration
	held atomic.Int64
	gone atomic.Bool
}

// deregistered records that Deregister of tr returned and reports whether a use was held then.
func (tr *tracked) deregistered() bool {
	tr.gone.Store(true)
	return tr.held.Load() == 0
}

// settlesAtZero reports whether r's use count reaches 0: once Deregister returned and Acquire
// fails, only refused Acquires about to back out can still be counted. Such an Acquire may be
// descheduled between its add and its back-out (on a loaded machine, pinned to its P by a thread
// the system does not run) for as long as the system likes: the wait is bounded by a minute, a
// hang guard (a count that never settles), not a timing.
func settlesAtZero(r *Registration) bool {
	for end := time.Now().Add(time.Minute); r.inFlight() != 0; runtime.Gosched() {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// TestDeregisterShardedCountRace: many goroutines acquire a registration, hold it across
// Gosched (so they may resume on another P) and release it, on their own P or handed to a
// releaser goroutine (as sdma's engine releases what a producer acquired), while the registration
// is deregistered (sometimes first with a context that ends at once, which must change nothing)
// and replaced. Deregister must never return while the model says a use is held, and an Acquire
// after it returned must fail: the per-P sum argument of Registration.
func TestDeregisterShardedCountRace(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		rounds := 300
		if testing.Short() {
			rounds = 60
		}
		const workers = 8
		bufs := make([][]byte, 2)
		for i := range bufs {
			bufs[i] = make([]byte, 512)
		}
		var cur atomic.Pointer[tracked]
		first, err := rg.Register(bufs[0], ToDevice)
		require.NoError(t, err)
		cur.Store(&tracked{r: first})

		handoff := make(chan *tracked, 64)
		var stop atomic.Bool
		defer stop.Store(true) // also on a failed require: the workers stop
		var uses, refused, bad atomic.Int64
		var wg, rel sync.WaitGroup
		rel.Go(func() { // the "engine": releases uses other goroutines acquired
			for tr := range handoff {
				if rand.IntN(2) == 0 {
					runtime.Gosched()
				}
				tr.held.Add(-1)
				tr.r.Release()
			}
		})
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 11))
				for !stop.Load() {
					tr := cur.Load()
					if !tr.r.Acquire() {
						refused.Add(1)
						runtime.Gosched()
						continue
					}
					tr.held.Add(1)
					if tr.gone.Load() {
						bad.Add(1) // a use held after Deregister returned
					}
					uses.Add(1)
					for range rng.IntN(3) {
						runtime.Gosched() // may resume on another P
					}
					if rng.IntN(2) == 0 {
						handoff <- tr
						continue
					}
					tr.held.Add(-1)
					tr.r.Release()
				}
			})
		}
		for i := 1; i <= rounds; i++ {
			for uses.Load() < int64(i) && !t.Failed() {
				runtime.Gosched()
			}
			old := cur.Load()
			nr, err := rg.Register(bufs[i%2], ToDevice)
			require.NoError(t, err)
			if i%3 == 0 { // a Deregister that gives up must leave the registration usable
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := rg.Deregister(ctx, old.r); err != nil {
					require.ErrorIs(t, err, context.Canceled)
					require.True(t, old.r.Live(), "a cancelled Deregister changes nothing")
				} else { // nothing was in flight
					require.True(t, old.deregistered(), "round %d: Deregister returned with a use held", i)
				}
			}
			cur.Store(&tracked{r: nr})
			if old.r.Live() {
				require.NoError(t, deregisterGuarded(rg, old.r))
				require.True(t, old.deregistered(), "round %d: Deregister returned with a use held", i)
			}
			require.False(t, old.r.Acquire(), "Acquire after Deregister")
			// A worker that loaded old before the Store above may still be in a refused Acquire,
			// counted for the instant before it backs out on the same shard: the sum must settle
			// at 0 (no use left counted), not be 0 at every instant.
			require.True(t, settlesAtZero(old.r), "round %d: uses counted after Deregister", i)
		}
		stop.Store(true)
		wg.Wait()
		close(handoff)
		rel.Wait()
		last := cur.Load()
		require.NoError(t, deregisterGuarded(rg, last.r))
		assert.True(t, last.deregistered())
		assert.Zero(t, bad.Load(), "uses held after their Deregister returned")
		assert.Zero(t, m.LiveCount())
		t.Logf("%d uses, %d refused Acquires", uses.Load(), refused.Load())
	})
}

// TestRegistrationShardsCrossP: a use acquired on one P and released on another leaves the shards
// unequal but the sum exact, and Deregister (waiting for a sum of 0) returns only after the last
// Release, wherever it ran.
func TestRegistrationShardsCrossP(t *testing.T) {
	m := NewDirect()
	buf := make([]byte, 64)
	r, err := m.Register(buf, ToDevice)
	require.NoError(t, err)
	const n = 1000
	acq := make(chan struct{}, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n {
			assert.True(t, r.Acquire())
			acq <- struct{}{}
		}
	})
	wg.Wait()
	close(acq)
	assert.EqualValues(t, n, r.inFlight())
	deregisterReleasing(t, m, r, acq)
}

// awaitNotLive waits until a Deregister of r begun on another goroutine (its result to come on
// done) has made r no longer live. That goroutine may wait for a CPU for a while on a loaded
// machine: the minute bounds a Deregister that never begins (a hang guard), not how soon it
// runs. A Deregister that returned with r still live fails the test at once, with its result.
func awaitNotLive(t *testing.T, r *Registration, done chan error) {
	t.Helper()
	for end := time.Now().Add(time.Minute); r.Live(); time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			if !r.Live() { // it returned just now, having deregistered r: leave its result
				done <- err
				return
			}
			t.Fatalf("Deregister returned %v with the registration still live", err)
		default:
		}
		if time.Now().After(end) {
			t.Fatal("Deregister did not begin within a minute: the registration is still live")
		}
	}
}

// deregisterGuarded is rg.Deregister of r under a context of a minute: a hang guard, not a
// timing (Deregister waits for the uses in flight, which the tests end at once). A use count that
// never comes back to 0 (a Release lost) then fails the test with Deregister's error ("N uses in
// flight: context deadline exceeded") instead of hanging it until the binary's timeout.
func deregisterGuarded(rg Registrar, r *Registration) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return rg.Deregister(ctx, r)
}

// deregisterReleasing deregisters r while four goroutines release the uses held (one per value
// of held, which is closed), once Deregister has begun; Deregister must return only after the
// last Release, and leave no use counted.
func deregisterReleasing(t *testing.T, m Registrar, r *Registration, held <-chan struct{}) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- deregisterGuarded(m, r) }()
	awaitNotLive(t, r, done)
	var rel sync.WaitGroup
	for range 4 {
		rel.Go(func() {
			for range held {
				select {
				case err := <-done:
					t.Errorf("Deregister returned %v with uses held", err)
				default:
				}
				r.Release()
			}
		})
	}
	rel.Wait()
	require.NoError(t, <-done)
	assert.Zero(t, r.inFlight())
}

// TestRegistrationShardLayout: one use counter per P (at least), each alone on its cache lines,
// so that a producer's Acquire and the engine's Release on another core write different lines.
func TestRegistrationShardLayout(t *testing.T) {
	r, err := NewDirect().Register(make([]byte, 64), ToDevice)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(r.shards), pcpu.Max())
	require.Zero(t, len(r.shards)&(len(r.shards)-1), "a power of two")
	a := uintptr(unsafePointer(&r.shards[0].n))
	for i := 1; i < len(r.shards); i++ {
		b := uintptr(unsafePointer(&r.shards[i].n))
		require.GreaterOrEqual(t, b-a, uintptr(128), "shards %d and %d share a line pair", i-1, i)
		a = b
	}
}
