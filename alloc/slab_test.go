package alloc_test

import (
	"math"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewSlabBadConfig(t *testing.T) {
	big := uint64(1) << 32
	for _, cfg := range []alloc.SlabConfig[obj]{
		{},
		{ObjectsPerSlab: -1},
		{ObjectsPerSlab: int(big)},
		{ObjectsPerSlab: 4, MaxSlabs: -1},
	} {
		_, err := alloc.NewSlab(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

func TestSlabGrowsAndStops(t *testing.T) {
	inits := 0
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{
		ObjectsPerSlab: 3, MaxSlabs: 2,
		Init:  func(o *obj) { inits++; o.val = -1 },
		Reset: resetObj,
	})
	require.NoError(t, err)
	assert.Equal(t, alloc.Stats{}, s.Stats())

	var held []*obj
	for k := range 6 {
		o, err := s.Get()
		require.NoError(t, err)
		assert.Equal(t, -1, o.val, "Init ran on a new object")
		held = append(held, o)
		assert.Equal(t, k/3+1, s.Stats().Slabs)
	}
	assert.Equal(t, 6, inits)
	_, err = s.Get()
	require.ErrorIs(t, err, alloc.ErrEmpty)
	assert.Equal(t, alloc.Stats{InUse: 6, HighWater: 6, Objects: 6, Slabs: 2}, s.Stats())

	for _, o := range held[:4] {
		require.NoError(t, s.Put(o))
	}
	assert.Equal(t, alloc.Stats{InUse: 2, HighWater: 6, Objects: 6, Slabs: 2}, s.Stats())
	// Freed objects are re-used, clean, and no slab is added.
	for range 4 {
		o, err := s.Get()
		require.NoError(t, err)
		assert.Zero(t, o.val, "Reset ran on Put")
		assert.True(t, s.Owns(o))
	}
	assert.Equal(t, 2, s.Stats().Slabs)
	assert.Equal(t, 6, inits, "Init runs once per object, not per Get")
}

// TestSlabConcurrentGrowth: goroutines hold many objects at once so the slab grows under
// contention; every object handed out must be distinct and owned by the slab.
func TestSlabConcurrentGrowth(t *testing.T) {
	workers, each := 8, 200
	if testing.Short() {
		each = 50
	}
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 5})
	require.NoError(t, err)
	var wg sync.WaitGroup
	held := make([][]*obj, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				o, err := s.Get()
				if !assert.NoError(t, err) {
					return
				}
				if !assert.True(t, o.owner.CompareAndSwap(0, int64(w+1))) {
					return
				}
				held[w] = append(held[w], o)
			}
		}()
	}
	wg.Wait()
	seen := map[*obj]bool{}
	for _, hs := range held {
		for _, o := range hs {
			require.False(t, seen[o], "object handed out twice")
			seen[o] = true
			require.True(t, s.Owns(o))
		}
	}
	st := s.Stats()
	assert.Equal(t, int64(workers*each), st.InUse)
	assert.Equal(t, st.InUse, st.HighWater)
	assert.GreaterOrEqual(t, st.Objects, st.InUse)
	assert.Less(t, st.Objects, st.InUse+int64(workers*5), "no more than one spare slab per racing grower")
	for _, hs := range held {
		for _, o := range hs {
			o.owner.Store(0)
			require.NoError(t, s.Put(o))
		}
	}
	assert.Zero(t, s.Stats().InUse)
}

// TestSlabZeroSize: objects of a zero-size type are still distinct and tracked.
func TestSlabZeroSize(t *testing.T) {
	s, err := alloc.NewSlab(alloc.SlabConfig[struct{}]{ObjectsPerSlab: 4})
	require.NoError(t, err)
	a, _ := s.Get()
	b, _ := s.Get()
	require.NotSame(t, a, b)
	require.NoError(t, s.Put(a))
	require.ErrorIs(t, s.Put(a), alloc.ErrDoublePut)
	require.NoError(t, s.Put(b))
}

// TestSlabHugeMaxSlabs: a MaxSlabs so large that MaxSlabs*ObjectsPerSlab overflows int64 caps
// nothing (the index space is the limit): Get grows, and Traits reports a positive capacity.
// The product used to wrap negative, so every Get returned ErrEmpty.
func TestSlabHugeMaxSlabs(t *testing.T) {
	for _, maxSlabs := range []int{math.MaxInt, math.MaxInt / 3, math.MaxInt >> 1} {
		s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 4, MaxSlabs: maxSlabs})
		require.NoError(t, err)
		o, err := s.Get()
		require.NoError(t, err, "MaxSlabs %d", maxSlabs)
		require.NoError(t, s.Put(o))
		assert.Positive(t, s.Traits().Capacity, "MaxSlabs %d", maxSlabs)
	}
}
