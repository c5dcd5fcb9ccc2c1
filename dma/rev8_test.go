package dma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnmapBatchRegisteredKind: a batch entry naming a registration (Kind KindRegistered, or a
// coherent allocation with KindCoherent) is not one of the kinds an Unmap names (KindSingle,
// KindPage, KindSG): it is ErrNotMapped and leaves the registration's IOVA range taken, so that
// no later map is handed the registration's bus addresses while it is live.
func TestUnmapBatchRegisteredKind(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{IOVABits: 20}) // 256 granules: no magazines, exact allocation
	require.NoError(t, err)
	buf := make([]byte, 100)
	r, err := m.Register(buf, ToDevice)
	require.NoError(t, err)
	err = m.UnmapBatch([]Unmap{{Addr: r.Addr(), Size: len(buf), Dir: ToDevice, Kind: KindRegistered}})
	assert.ErrorIs(t, err, ErrNotMapped)
	assert.ErrorIs(t, m.UnmapSingle(r.Addr(), len(buf), ToDevice), ErrNotMapped)
	// Map until the space is full: none may get the registration's granule.
	for {
		a, err := m.MapSingle(make([]byte, 8), ToDevice)
		if err != nil {
			break
		}
		require.NotEqual(t, uint64(r.Addr())>>12, uint64(a)>>12, "a map was handed the live registration's granule")
	}
	require.NoError(t, m.Deregister(context.Background(), r))

	c, err := m.AllocCoherent(64)
	if err == nil {
		assert.ErrorIs(t, m.UnmapBatch([]Unmap{{Addr: c.Addr(), Size: len(c.Bytes()), Dir: Bidirectional, Kind: KindCoherent}}), ErrNotMapped)
	}
}
