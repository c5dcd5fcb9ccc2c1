package dma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolStaleBlockFreeRefused: a Block value freed once and kept (a copy the caller still holds)
// is refused by a second Free with ErrNotOwned even after its slot was handed out again: that Free
// would otherwise return the new owner's block to the free list, and the next Alloc would hand the
// block to a second holder while the first still uses it (dma_pool_free of a stale handle). The
// new owner's block stays allocated, and is freed once.
func TestPoolStaleBlockFreeRefused(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		p, err := NewPool(m, "stale", 64, 64)
		require.NoError(t, err)
		old, err := p.Alloc()
		require.NoError(t, err)
		require.NoError(t, p.Free(old))
		cur, err := p.Alloc()
		require.NoError(t, err)
		require.Equal(t, old.Addr, cur.Addr, "LIFO: the freed slot is handed out again")
		require.ErrorIs(t, p.Free(old), ErrNotOwned, "a stale copy of a freed block")
		require.Equal(t, 1, p.InUse(), "the new owner's block is still allocated")
		next, err := p.Alloc()
		require.NoError(t, err)
		require.NotEqual(t, cur.Addr, next.Addr, "a block held by its new owner is not handed out again")
		require.NoError(t, p.Free(next))
		require.NoError(t, p.Free(cur))
		require.ErrorIs(t, p.Free(cur), ErrNotOwned)
		require.NoError(t, p.Destroy())
		require.ErrorIs(t, p.Free(old), ErrNotOwned, "after Destroy")
		require.Zero(t, m.LiveCount())
	})
}
