package dma

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

// deregWaiters returns how many Deregisters of r wait for another's outcome.
func deregWaiters(r *Registration) int {
	r.dereg.mu.Lock()
	defer r.dereg.mu.Unlock()
	return r.dereg.waiters
}

// awaitDeregWaiters yields until n Deregisters of r wait for another's outcome; it fails if one
// of the Deregisters whose results come on chs returns meanwhile.
func awaitDeregWaiters(t *testing.T, r *Registration, n int, chs ...<-chan error) {
	t.Helper()
	for deregWaiters(r) != n {
		for i, ch := range chs {
			select {
			case err := <-ch:
				t.Fatalf("Deregister %d returned instead of waiting: %v", i, err)
			default:
			}
		}
		runtime.Gosched()
	}
}

// refused reports whether r refuses a new use; a use it grants is released at once.
func refused(r *Registration) bool {
	if r.Acquire() {
		r.Release()
		return false
	}
	return true
}

// awaitDraining yields until a Deregister of r drains it.
func awaitDraining(r *Registration) {
	for {
		r.dereg.mu.Lock()
		d := r.dereg.draining
		r.dereg.mu.Unlock()
		if d {
			return
		}
		runtime.Gosched()
	}
}

// deregisterAsync runs Deregister in a goroutine and returns the channel of its result.
func deregisterAsync(ctx context.Context, rg Registrar, r *Registration) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- rg.Deregister(ctx, r) }()
	return ch
}

// registerInUse registers size bytes with rg and acquires one use of them (a use in flight).
func registerInUse(t *testing.T, rg Registrar, size int) *Registration {
	t.Helper()
	r, err := rg.Register(make([]byte, size), ToDevice)
	require.NoError(t, err)
	require.True(t, r.Acquire())
	return r
}

// drainingAsync starts a Deregister of r under ctx and returns its result's channel once it
// drains (waits for the uses in flight).
func drainingAsync(ctx context.Context, rg Registrar, r *Registration) <-chan error {
	ch := deregisterAsync(ctx, rg, r)
	awaitDraining(r)
	return ch
}

// drainingInUse registers size bytes with rg, acquires a use of them and starts a Deregister
// under ctx that waits for it: the registration and the Deregister's result's channel.
func drainingInUse(ctx context.Context, t *testing.T, rg Registrar, size int) (*Registration, <-chan error) {
	t.Helper()
	r := registerInUse(t, rg, size)
	return r, drainingAsync(ctx, rg, r)
}

// TestDeregisterWhileDeregistering: a Deregister that runs while another waits for the uses in
// flight waits for that one's outcome; when the first gives up on its context the second takes
// over the wait under its own, and the registration stays closed to new uses throughout (it
// used to be told ErrNotMapped, "not registered", for a registration that was live again
// afterwards: a caller treating ErrNotMapped as "gone" leaked it). Once the use is released the
// second deregisters it, and a third Deregister is ErrNotMapped.
func TestDeregisterWhileDeregistering(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		r, first := drainingInUse(ctx1, t, rg, 256) // a use in flight
		second := deregisterAsync(context.Background(), rg, r)
		awaitDeregWaiters(t, r, 1, second)
		assert.True(t, refused(r), "being deregistered")

		cancel1()
		assert.ErrorIs(t, <-first, context.Canceled)
		assert.False(t, r.Live(), "the second took over: the registration stays closed to new uses")
		assert.True(t, refused(r), "being deregistered by the second")
		assert.Nil(t, rg.Registered(r.Bytes()))
		select {
		case err := <-second:
			t.Fatalf("the second returned %v with a use in flight", err)
		default:
		}

		r.Release()
		require.NoError(t, <-second, "the second deregistered it")
		assert.Equal(t, 0, m.LiveCount())
		assert.ErrorIs(t, rg.Deregister(context.Background(), r), ErrNotMapped, "deregistered already")
		assert.False(t, r.Acquire())
	})
}

// TestDeregisterWaiterSeesFirstDone: a Deregister that waits for another's outcome returns
// ErrNotMapped (deregistered already) once the other deregistered the registration.
func TestDeregisterWaiterSeesFirstDone(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		r, first := drainingInUse(context.Background(), t, rg, 4096)
		const n = 3
		waiters := make([]<-chan error, n)
		for i := range waiters {
			waiters[i] = deregisterAsync(context.Background(), rg, r)
		}
		awaitDeregWaiters(t, r, n, waiters...)
		r.Release()
		require.NoError(t, <-first)
		for i, w := range waiters {
			err := <-w
			assert.ErrorIs(t, err, ErrNotMapped, "waiter %d", i)
			assert.ErrorContains(t, err, "deregistered already", "waiter %d", i)
		}
		assert.Equal(t, 0, m.LiveCount())
		assert.Equal(t, 0, deregWaiters(r))
	})
}

// TestDeregisterWaiterCanceled: a Deregister whose context ends while it waits for another's
// outcome returns an error matching its context's and changes nothing: the first still waits for
// the use, then deregisters.
func TestDeregisterWaiterCanceled(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		r, first := drainingInUse(context.Background(), t, rg, 512)
		ctx2, cancel2 := context.WithCancel(context.Background())
		second := deregisterAsync(ctx2, rg, r)
		awaitDeregWaiters(t, r, 1, second)
		cancel2()
		err := <-second
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, ErrNotMapped)
		assert.Equal(t, 0, deregWaiters(r))
		assert.False(t, r.Live(), "the first still drains")
		assert.True(t, refused(r))

		// A waiter whose context is done already still waits for nothing.
		assert.ErrorIs(t, rg.Deregister(ctx2, r), context.Canceled)

		r.Release()
		require.NoError(t, <-first)
		assert.Equal(t, 0, m.LiveCount())
	})
}

// TestDeregisterBothGiveUp: when the first gives up while a second waits and the second's context
// ends too (before or after it took over: the contexts end back to back, in either order, and
// the second may see its context's end or the first's outcome first), the registration is live
// again, usable, and a later Deregister undoes it.
func TestDeregisterBothGiveUp(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		r := registerInUse(t, rg, 256)
		for i := range 64 {
			ctx1, cancel1 := context.WithCancel(context.Background())
			ctx2, cancel2 := context.WithCancel(context.Background())
			first := drainingAsync(ctx1, rg, r)
			second := deregisterAsync(ctx2, rg, r)
			awaitDeregWaiters(t, r, 1, first, second)
			if i%2 == 0 {
				cancel1()
				cancel2()
			} else {
				cancel2()
				cancel1()
			}
			require.ErrorIs(t, <-first, context.Canceled, "try %d", i)
			require.ErrorIs(t, <-second, context.Canceled, "try %d", i)
			require.True(t, r.Live(), "try %d: both gave up: live again", i)
		}
		require.True(t, r.Acquire(), "usable again")
		r.Release()
		r.Release()
		require.NoError(t, rg.Deregister(context.Background(), r))
		assert.Equal(t, 0, m.LiveCount())
	})
}

// TestDeregisterConcurrentRace: many Deregisters of one registration at once, some giving up on
// their contexts at random moments, while uses are acquired and released: exactly one returns nil
// (and only once no use is in flight: no use is released after it), every other returns
// ErrNotMapped (deregistered already) or its context's error, the memory is unmapped once, and
// no goroutine is left. Run under -race -cpu 1,2,4.
func TestDeregisterConcurrentRace(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		rng := rand.New(rand.NewPCG(1, 2))
		for round := range rounds {
			deregConcurrentRound(t, rg, m, rng, round)
		}
	})
}

// deregConcurrentRound is one round of TestDeregisterConcurrentRace.
func deregConcurrentRound(t *testing.T, rg Registrar, m testMapper, rng *rand.Rand, round int) {
	t.Helper()
	r, err := rg.Register(make([]byte, 1024), ToDevice)
	require.NoError(t, err)
	uses := 1 + rng.IntN(3)
	for range uses {
		require.True(t, r.Acquire())
	}
	const callers = 6
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex // guards the counts below and released
		ok, gone, gaveUp int
		released         int // uses released so far
		okAfter          = -1
	)
	cancels := make([]context.CancelFunc, callers)
	for i := range callers {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() {
			err := rg.Deregister(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
				okAfter = released
			case errors.Is(err, ErrNotMapped):
				gone++
			case errors.Is(err, context.Canceled):
				gaveUp++
			default:
				t.Errorf("round %d caller %d: %v", round, i, err)
			}
		})
	}
	// Cancel every caller but the last at a random moment, release the uses in between.
	order := rng.Perm(callers - 1)
	for k, i := range order {
		if k < uses {
			runtime.Gosched()
			mu.Lock()
			released++
			mu.Unlock()
			r.Release()
		}
		if rng.IntN(2) == 0 {
			runtime.Gosched()
		}
		cancels[i]()
	}
	for k := len(order); k < uses; k++ {
		mu.Lock()
		released++
		mu.Unlock()
		r.Release()
	}
	wg.Wait()
	cancels[callers-1]()
	require.Equal(t, 1, ok, "round %d: exactly one Deregister succeeds (gone %d, gave up %d)", round, gone, gaveUp)
	require.Equal(t, callers, ok+gone+gaveUp, "round %d", round)
	require.Equal(t, uses, okAfter, "round %d: success only after every use was released", round)
	require.False(t, r.Live())
	require.False(t, r.Acquire())
	require.Equal(t, 0, m.LiveCount(), "round %d: unmapped", round)
	require.ErrorIs(t, rg.Deregister(context.Background(), r), ErrNotMapped)
}
