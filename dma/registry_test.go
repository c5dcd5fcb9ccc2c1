package dma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegistryAny: a mapper's Registry says nothing is registered until the first Register, and
// then that something may be (Registered is asked from then on, also once all is deregistered).
func TestRegistryAny(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		ry, ok := m.(interface{ Registry() *Registry })
		require.True(t, ok, "%T gives its Registry", m)
		ry2 := ry.Registry()
		assert.False(t, ry2.Any(), "nothing registered")
		mem := newRegion(t, 1).Bytes()
		assert.Nil(t, rg.Registered(mem))
		r, err := rg.Register(mem, ToDevice)
		require.NoError(t, err)
		assert.True(t, ry2.Any())
		assert.Same(t, r, rg.Registered(mem))
		require.NoError(t, rg.Deregister(context.Background(), r))
		assert.True(t, ry2.Any(), "may be: Registered tells")
		assert.Nil(t, rg.Registered(mem))
	})
}
