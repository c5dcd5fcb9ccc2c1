package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreHeads: StoreHWHead and StoreSwHead move the heads as SetHWHead and SetSwHead do (the
// completion side sees the slots, producers get the room back, across the index wrap), and check
// the order only in -race builds (checkOrder), where an out-of-order head panics with ErrOrder
// and changes nothing.
func TestStoreHeads(t *testing.T) {
	for _, start := range []uint64{0, 64 - 2, ^uint64(0) - 1} {
		r, err := newAt(64, start)
		require.NoError(t, err)
		for range 3 {
			res, err := r.Reserve(5)
			require.NoError(t, err)
			res.Write(0, batch(1, 5), 0)
			res.Publish()
			tl := r.Tail()
			require.Equal(t, uint64(5), tl-r.SwHead())
			r.StoreHWHead(tl - 2)
			assert.Equal(t, tl-2, r.HWHead())
			r.StoreHWHead(tl)
			assert.Equal(t, tl, r.HWHead())
			free := r.FreeCnt()
			r.BeginWrite()
			r.StoreSwHead(tl - 3)
			r.StoreSwHead(tl)
			r.EndWrite()
			assert.Equal(t, tl, r.SwHead())
			assert.Equal(t, free+5, r.FreeCnt(), "the room is back")
			assert.True(t, r.Empty())
		}
		if !checkOrder {
			continue
		}
		tl := r.Tail()
		requirePanicIs(t, ErrOrder, func() { r.StoreHWHead(tl + 1) })
		requirePanicIs(t, ErrOrder, func() { r.StoreHWHead(tl - 1) })
		requirePanicIs(t, ErrOrder, func() { r.StoreSwHead(tl + 1) })
		requirePanicIs(t, ErrOrder, func() { r.StoreSwHead(tl - 1) })
		assert.Equal(t, tl, r.HWHead(), "a refused store changes nothing")
		assert.Equal(t, tl, r.SwHead(), "a refused store changes nothing")
	}
}
