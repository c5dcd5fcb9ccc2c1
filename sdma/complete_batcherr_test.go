package sdma

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// TestCompletionUnmapErrorCounted: a completion's unmap that fails (here: the mapping was undone
// behind the txreq's back, after the hardware read it and before the completion pass) is counted
// in Device.UnmapErrors, whether the txreq's clean undoes its mappings (a pass over one txreq) or
// a batch of the pass does (several txreqs with public mappings). The batch's error was dropped:
// UnmapErrors stayed 0.
func TestCompletionUnmapErrorCounted(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("txreqs=%d", n), func(t *testing.T) {
			m := &handleZeroSole{Direct: dma.NewDirect(), public: true}
			dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: CompletePoll, RingSize: 1024})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			txs := make([]TxReq, n)
			for i := range txs {
				tx := &txs[i]
				require.NoError(t, tx.Init(0, 24, nil))
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:8]))
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 64)[:16]))
				require.NoError(t, e.Send(nil, tx, false))
			}
			_, err = e.Process() // the hardware reads every packet
			require.NoError(t, err)
			d := txs[n-1].descp[1]
			require.NoError(t, dev.Mapper().UnmapSingle(dma.Addr(d.Addr()), d.Len(), dma.ToDevice))
			require.Equal(t, n, e.Poll())
			assert.Equal(t, uint64(1), dev.UnmapErrors(), "the failed unmap counted")
			if n > 1 {
				assert.Equal(t, 1, m.batches, "the pass unmapped by a batch")
			}
		})
	}
}
