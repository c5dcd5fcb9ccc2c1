package sdma

import (
	"fmt"
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
