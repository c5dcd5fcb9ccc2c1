package alloc_test

import (
	"runtime"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPoolNeverEmpty(t *testing.T) {
	p := alloc.NewPool(resetObj)
	var held []*obj
	for range 100 {
		o, err := p.Get()
		require.NoError(t, err)
		o.val = 7
		held = append(held, o)
	}
	st := p.Stats()
	assert.GreaterOrEqual(t, st.Objects, int64(100))
	assert.Equal(t, st.Objects, int64(st.Slabs)*8)
	for _, o := range held {
		require.NoError(t, p.Put(o))
		assert.Zero(t, o.val, "Reset ran on Put")
	}
}

// TestPoolAfterGC: idle objects may be collected; objects still held are still told as ours,
// their memory being kept alive by the holder, and foreign puts are still refused.
func TestPoolAfterGC(t *testing.T) {
	p := alloc.NewPool[obj](nil)
	kept, err := p.Get()
	require.NoError(t, err)
	for range 5 {
		var held []*obj
		for range 50 {
			o, err := p.Get()
			require.NoError(t, err)
			held = append(held, o)
		}
		for _, o := range held {
			require.NoError(t, p.Put(o))
		}
		held = nil
		runtime.GC()
		runtime.GC() // sync.Pool keeps a victim cache for one cycle
		// Fresh allocations may reuse collected chunks' memory: never mistaken for ours.
		for range 50 {
			require.ErrorIs(t, p.Put(new(obj)), alloc.ErrForeign)
		}
	}
	require.NoError(t, p.Put(kept))
	require.ErrorIs(t, p.Put(kept), alloc.ErrDoublePut)
}
