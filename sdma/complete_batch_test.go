package sdma

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// handleZeroSole is a Direct mapper (a SoleMapper) whose MapSingleSole returns handle 0 while
// public is set, as a SoleMapper does for a mapping it could not put in its index (Direct's full
// set, the IOMMU without per-P magazines under purego): AddKVAddr's mapping is then a public one.
// It counts the batches a completion pass hands it.
type handleZeroSole struct {
	*dma.Direct
	public           bool
	batches, entries int
}

func (m *handleZeroSole) MapSingleSole(buf []byte, dir dma.Direction) (dma.Addr, dma.Sole, error) {
	if m.public {
		a, err := m.Direct.MapSingle(buf, dir)
		return a, 0, err
	}
	return m.Direct.MapSingleSole(buf, dir)
}

func (m *handleZeroSole) MapSingleSoleHint(buf []byte, dir dma.Direction, _ dma.Sole) (dma.Addr, dma.Sole, error) {
	return m.MapSingleSole(buf, dir)
}

func (m *handleZeroSole) UnmapBatch(us []dma.Unmap) error {
	m.batches++
	m.entries += len(us)
	return m.Direct.UnmapBatch(us)
}

// checkedBatches is handleZeroSole whose batches must all succeed: an entry unmapped twice, or
// never mapped, fails its batch (the completion pass drops a batch's error).
type checkedBatches struct {
	*handleZeroSole
	t *testing.T
}

func (m *checkedBatches) UnmapBatch(us []dma.Unmap) error {
	err := m.handleZeroSole.UnmapBatch(us)
	assert.NoError(m.t, err, "a batch entry not mapped")
	return err
}

// TestCompletionBatchMixedPass: one completion pass over txreqs of every mapping mix, in a
// random order and more than a chunk's unmaps (unmapChunkBatch): sole only, public only (handle
// 0), extended past 6 descriptors (sole inline, public beyond), coalesced past 63 (the coalesce
// buffer's public mapping) and registered (nothing mapped). Every mapping is undone exactly once,
// before its txreq's callback, whether a batch or a clean undoes it.
func TestCompletionBatchMixedPass(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		inner := &handleZeroSole{Direct: dma.NewDirect()}
		m := &checkedBatches{handleZeroSole: inner, t: t}
		dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: CompletePoll, RingSize: 4096})
		require.NoError(t, err)
		regMem := make([]byte, 4*dma.PageSize)
		_, err = dev.Register(regMem)
		require.NoError(t, err)
		e := dev.Engine(0)
		base := inner.LiveCount()
		rng := rand.New(rand.NewSource(seed))
		const n = 48
		txs := make([]TxReq, n)
		done := make([]int, n)
		for i := range txs {
			tx := &txs[i]
			kind := rng.Intn(5)
			frags, size := 2, 8
			switch kind {
			case 2:
				frags = 9 // 6 inline (sole), 3 in the extended array (public)
			case 3:
				frags, size = 70, 1 // coalesced past 63 descriptors
			}
			require.NoError(t, tx.Init(0, frags*size, CompleterFunc(func(tx *TxReq, st Status) {
				assert.Equal(t, StatusOK, st)
				assert.Zero(t, tx.nmaps, "unmapped before the callback")
				done[i]++
			})))
			inner.public = kind == 1
			for f := 0; f < frags; f++ {
				buf := make([]byte, 64)[:size]
				if kind == 4 {
					buf = regMem[f*64 : f*64+size]
				}
				require.NoError(t, tx.AddKVAddr(dev, buf))
			}
			inner.public = false
			require.NoError(t, e.Send(nil, tx, false), "txreq %d kind %d", i, kind)
		}
		_, err = e.Process()
		require.NoError(t, err)
		require.Equal(t, n, e.Poll())
		for i, d := range done {
			require.Equal(t, 1, d, "seed %d txreq %d: callbacks", seed, i)
		}
		assert.Equal(t, base, inner.LiveCount(), "seed %d: every mapping undone", seed)
		assert.Zero(t, dev.UnmapErrors(), "seed %d", seed)
		assert.NotZero(t, inner.batches, "seed %d: the public mappings were batched", seed)
		require.NoError(t, dev.Close())
	}
}
