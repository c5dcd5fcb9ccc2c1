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

// TestPoolStaleBlockFreeRefusedAfterWrap: a stale copy is refused however many times its slot
// was reused since, also 2^31 times (a 32-bit count wrapped there, back to the copy's value, and
// Free took the copy for the new owner's). The slot's count is set to just before 2^32 rather
// than cycled there.
func TestPoolStaleBlockFreeRefusedAfterWrap(t *testing.T) {
	p, err := NewPool(NewDirect(), "wrap", 64, 64)
	require.NoError(t, err)
	old, err := p.Alloc()
	require.NoError(t, err)
	require.NoError(t, p.Free(old))
	p.mu.Lock()
	p.chunks[old.ref.chunk].gen[old.ref.slot] = 1<<32 - 2 // free, 2^31-1 reuses after old's
	p.mu.Unlock()
	b, err := p.Alloc()
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	cur, err := p.Alloc() // 2^31 reuses after old's
	require.NoError(t, err)
	require.Equal(t, old.Addr, cur.Addr)
	require.ErrorIs(t, p.Free(old), ErrNotOwned, "a stale copy 2^31 reuses old")
	require.Equal(t, 1, p.InUse())
	require.NoError(t, p.Free(cur))
	require.NoError(t, p.Destroy())
}
