package dma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeregisterWhileDeregistering: a Deregister that runs while another is waiting for uses in
// flight (which then gives up on its context) is told ErrNotMapped, "not registered", though the
// registration is not deregistered and is live again afterwards. Registrar's doc gives
// ErrNotMapped only to a registration of another mapper or one deregistered already; a caller
// that treats ErrNotMapped as "gone" (an idempotent cleanup) leaks the registration.
func TestDeregisterWhileDeregistering(t *testing.T) {
	t.Skip("bug: a concurrent Deregister during another's drain reports ErrNotMapped 'not registered' for a live registration; suggested fix: wait for the first's outcome (or report a distinct 'being deregistered' error) and document it in Registrar.Deregister")
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		r, err := rg.Register(make([]byte, 256), ToDevice)
		require.NoError(t, err)
		require.True(t, r.Acquire()) // a use in flight
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		first := make(chan error, 1)
		go func() { first <- rg.Deregister(ctx, r) }()
		for r.Live() {
			time.Sleep(time.Millisecond)
		}
		err2 := rg.Deregister(context.Background(), r) // while the first waits
		assert.ErrorIs(t, <-first, context.DeadlineExceeded)
		assert.True(t, r.Live(), "the first gave up: the registration is live again")
		assert.NotErrorIs(t, err2, ErrNotMapped, "the registration was never deregistered: %v", err2)
		r.Release()
		require.NoError(t, rg.Deregister(context.Background(), r))
	})
}
