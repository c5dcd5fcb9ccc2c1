package sdma

import (
	"testing"

	"github.com/gosdma/gosdma/dma"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHintHandles: the handle a txreq records for each descriptor is its own mapping's (a
// descriptor that maps nothing, the pad included, records 0, never a handle an earlier packet of
// the same txreq left), the device's translator is the mapper's TranslateSole where it has one
// and its Translate otherwise, and a packet arrives whole either way.
func TestHintHandles(t *testing.T) {
	for _, m := range []struct {
		name string
		m    dma.Mapper
		hint bool
	}{
		{"direct", dma.NewDirect(), true},
		{"counting", dma.NewCounting(dma.NewDirect()), false},
	} {
		t.Run("mapper="+m.name, func(t *testing.T) {
			dev, cs := engTestDevice(t, Config{Manual: true, Mapper: m.m})
			_, plain := dev.hints.(plainTranslator)
			assert.Equal(t, !m.hint, plain, "translator")
			e := dev.Engine(0)
			buf := txTestPattern(300, 7)
			var tx TxReq
			send := func(want []byte) {
				t.Helper()
				require.NoError(t, e.Send(nil, &tx, false))
				_, err := e.Process()
				require.NoError(t, err)
				e.Poll()
				pkts := cs.Packets(0)
				require.Equal(t, want, pkts[len(pkts)-1])
			}
			require.NoError(t, tx.Init(0, 296, nil))
			require.NoError(t, tx.AddKVAddr(dev, buf[:40]))
			require.NoError(t, tx.AddKVAddr(dev, buf[40:296]))
			if m.hint {
				assert.NotZero(t, tx.soles[0])
				assert.NotZero(t, tx.soles[1])
			}
			send(buf[:296])
			// Five bytes: a descriptor and the pad, at index 1, where the last packet's handle was.
			require.NoError(t, tx.Init(0, 5, nil))
			require.NoError(t, tx.AddKVAddr(dev, buf[:5]))
			require.Equal(t, 2, tx.NumDesc())
			assert.Zero(t, tx.soles[1], "the pad's handle")
			send(append(append([]byte(nil), buf[:5]...), 0, 0, 0))
			assert.Zero(t, dev.UnmapErrors())
		})
	}
}
