package sdma

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// soleBatchCounter is a Direct mapper (a SoleMapper and SoleTranslator, its methods promoted)
// that counts the batches a completion pass hands it. Direct, not the IOMMU: the IOMMU's maps go
// to its index (with a handle) only with per-P magazines, which purego builds do not have.
type soleBatchCounter struct {
	*dma.Direct
	batches, entries int
}

func (m *soleBatchCounter) UnmapBatch(us []dma.Unmap) error {
	m.batches++
	m.entries += len(us)
	return m.Direct.UnmapBatch(us)
}

// publicBatchCounter is a mapper that is not a SoleMapper (the interface hides the IOMMU's sole
// methods): every kvaddr mapping is a public one, handle 0. It counts the batches too.
type publicBatchCounter struct {
	dma.Mapper
	inner            *dma.IOMMU
	batches, entries int
}

func (m *publicBatchCounter) UnmapBatch(us []dma.Unmap) error {
	m.batches++
	m.entries += len(us)
	return m.inner.UnmapBatch(us)
}

// TestCompletionBatchesOnlyPublicMappings: a completion pass over several mapped txreqs gathers
// into one UnmapBatch only the mappings without a Sole handle (public mappings, which take the
// table's locks); txreqs whose mappings are all sole ones (AddKVAddr on a SoleMapper, the common
// case) are unmapped by their clean, a store each, and never reach a batch, which would cost them
// a scan and the batch's general path for nothing. Both ways every mapping is undone exactly once,
// before the txreq's callback.
func TestCompletionBatchesOnlyPublicMappings(t *testing.T) {
	const n = 5
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public=%v", public), func(t *testing.T) {
			iommu := engTestIOMMU(t)
			direct := dma.NewDirect()
			var m dma.Mapper
			var live func() int
			sole := &soleBatchCounter{Direct: direct}
			pub := &publicBatchCounter{Mapper: iommu, inner: iommu}
			if public {
				m, live = pub, iommu.LiveCount
			} else {
				m, live = sole, direct.LiveCount
			}
			dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: CompletePoll, RingSize: 1024})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			base := live() // the device's own (its pad)
			done := 0
			txs := make([]TxReq, n)
			for i := range txs {
				tx := &txs[i]
				require.NoError(t, tx.Init(0, 24, CompleterFunc(func(tx *TxReq, st Status) {
					assert.Equal(t, StatusOK, st)
					assert.Zero(t, tx.nmaps, "unmapped before the callback")
					done++
				})))
				// Each buffer on a line of its own (64-byte objects): Direct's index has a set of
				// two entries per buffer line, and a third buffer on a line would be a public mapping.
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:8]))
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:16]))
				require.Equal(t, base+2*(i+1), live())
				if !public {
					require.True(t, tx.soles[0] != 0 && tx.soles[1] != 0, "sole mappings, with handles: %v", tx.soles)
				}
				require.NoError(t, e.Send(nil, tx, false))
			}
			_, err = e.Process()
			require.NoError(t, err)
			assert.Equal(t, n, e.Poll())
			assert.Equal(t, n, done, "each callback once")
			assert.Equal(t, base, live(), "every mapping undone")
			assert.Zero(t, dev.UnmapErrors())
			if public {
				assert.Equal(t, 1, pub.batches, "the public mappings in one batch")
				assert.Equal(t, 2*n, pub.entries)
			} else {
				assert.Zero(t, sole.batches, "sole mappings are freed by clean, not batched")
			}
		})
	}
}

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

func (m *handleZeroSole) UnmapBatch(us []dma.Unmap) error {
	m.batches++
	m.entries += len(us)
	return m.Direct.UnmapBatch(us)
}

// TestCompletionBatchNpub: npub counts AddKVAddr's mappings that a SoleMapper returned without a
// handle (they join the batch, as every other public mapping: TestCompletionBatchesOnlyPublicMappings
// reaches only addDesc's count, through a mapper that is not a SoleMapper), and a txreq's clean
// zeroes it, so that a reused txreq whose mappings are all sole ones stays out of the batch. Both
// ways every mapping is undone once.
func TestCompletionBatchNpub(t *testing.T) {
	const n = 5
	direct := dma.NewDirect()
	m := &handleZeroSole{Direct: direct}
	dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: CompletePoll, RingSize: 1024})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	base := direct.LiveCount()
	done := 0
	txs := make([]TxReq, n)
	build := func(tx *TxReq) {
		require.NoError(t, tx.Init(0, 24, CompleterFunc(func(tx *TxReq, st Status) {
			assert.Equal(t, StatusOK, st)
			assert.Zero(t, tx.nmaps, "unmapped before the callback")
			done++
		})))
		// One buffer per line (see TestCompletionBatchesOnlyPublicMappings).
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:8]))
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:16]))
	}
	pass := func(want int) {
		t.Helper()
		_, err := e.Process()
		require.NoError(t, err)
		require.Equal(t, want, e.Poll())
		require.Equal(t, base, direct.LiveCount(), "every mapping undone")
	}

	// Handle-0 mappings from the SoleMapper are public: n txreqs of them, one batch of all.
	m.public = true
	for i := range txs {
		build(&txs[i])
		require.Equal(t, uint8(2), txs[i].npub, "handle-0 mappings counted as public")
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	pass(n)
	assert.Equal(t, 1, m.batches, "the handle-0 mappings in one batch")
	assert.Equal(t, 2*n, m.entries)

	// Each txreq alone in a pass (no batch: its clean unmaps it), with public mappings ...
	m.batches, m.entries = 0, 0
	for i := range txs {
		build(&txs[i])
		require.NoError(t, e.Send(nil, &txs[i], false))
		pass(1)
	}
	assert.Zero(t, m.batches, "a lone txreq is unmapped by its clean")
	// ... then reused with sole mappings only: no npub left over from the last use.
	m.public = false
	for i := range txs {
		build(&txs[i])
		require.Zero(t, txs[i].npub, "npub of a reused txreq")
		require.True(t, txs[i].soles[0] != 0 && txs[i].soles[1] != 0, "sole mappings: %v", txs[i].soles)
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	pass(n)
	assert.Zero(t, m.batches, "reused txreqs with sole mappings only are not batched")
	assert.Equal(t, 3*n, done, "each callback once")
	assert.Zero(t, dev.UnmapErrors())
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
