package dma

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

// TestDeregisterHandoverUnderAcquires (rv2 review of 19a31b4): Deregisters of one registration
// that give up one after another (each cancelled while another waits, so the drain is handed
// over several times) while goroutines acquire and release uses without pause. Exactly one
// Deregister returns nil; no use is held when it returns (a use acquired before it is released
// before it); no Acquire succeeds once it returned; every other Deregister is ErrNotMapped or
// Canceled; no goroutine is left. Run under -race -cpu 1,2,4.
func TestDeregisterHandoverUnderAcquires(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	rounds := 40
	if testing.Short() {
		rounds = 15
	}
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		rng := rand.New(rand.NewPCG(3, 4))
		for round := range rounds {
			r, err := rg.Register(make([]byte, 512), ToDevice)
			require.NoError(t, err)
			var dead, bad atomic.Bool
			var acquired atomic.Int64
			stop := make(chan struct{})
			var hammer sync.WaitGroup
			for range 3 {
				hammer.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						was := dead.Load()
						if r.Acquire() {
							acquired.Add(1)
							if was {
								bad.Store(true) // acquired after the successful Deregister returned
							}
							runtime.Gosched()
							if dead.Load() {
								bad.Store(true) // held while the successful Deregister returned
							}
							r.Release()
						} else {
							runtime.Gosched()
						}
					}
				})
			}
			const callers = 5
			var wg sync.WaitGroup
			var ok, gone, gaveUp atomic.Int32
			cancels := make([]context.CancelFunc, callers)
			for i := range callers {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[i] = cancel
				wg.Go(func() {
					err := rg.Deregister(ctx, r)
					switch {
					case err == nil:
						dead.Store(true)
						ok.Add(1)
					case errors.Is(err, ErrNotMapped):
						gone.Add(1)
					case errors.Is(err, context.Canceled):
						gaveUp.Add(1)
					default:
						t.Errorf("round %d: %v", round, err)
					}
				})
			}
			for _, i := range rng.Perm(callers - 1) {
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				cancels[i]()
			}
			wg.Wait() // the last caller's ctx never ends: it (or one before) succeeds
			close(stop)
			hammer.Wait()
			cancels[callers-1]()
			require.False(t, bad.Load(), "round %d: a use was held across, or acquired after, the successful Deregister", round)
			require.EqualValues(t, 1, ok.Load(), "round %d: gone %d gave up %d", round, gone.Load(), gaveUp.Load())
			require.EqualValues(t, callers, ok.Load()+gone.Load()+gaveUp.Load())
			require.False(t, r.Acquire())
			require.Equal(t, 0, m.LiveCount())
			require.Equal(t, 0, deregWaiters(r))
		}
	})
}
