package usdma

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// panicMapper is a Mapper (not a SoleMapper: every add goes through MapSingle) whose MapSingle
// numbered panicAt (1-based) panics.
type panicMapper struct {
	dma.Mapper
	maps    atomic.Int32
	panicAt int32
}

func (m *panicMapper) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	if m.maps.Add(1) == m.panicAt {
		panic("panicMapper: MapSingle")
	}
	return m.Mapper.MapSingle(buf, dir)
}

// TestSubmitMapperPanicGivesTxreqBack: a panic of the device's Mapper while Submit builds a packet
// (its header's mapping) goes on to the caller, and the txreq of that packet goes back to the
// allocator with the others: Submit's doc says every txreq it took and no packet holds goes back.
func TestSubmitMapperPanicGivesTxreqBack(t *testing.T) {
	for _, panicAt := range []int32{1, 3} {
		l, err := alloc.NewList[TxReq](16, nil)
		require.NoError(t, err)
		m := &panicMapper{Mapper: testIOMMU(t), panicAt: panicAt}
		dev := testDevice(t, sdma.Config{Manual: true, Mapper: m, Sink: &sdmatest.DiscardSink{}})
		eng := dev.Engine(0)
		pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096, Alloc: l, DisableAHG: true})
		require.NoError(t, err)
		data := pattern(4*4096, 1)
		info, hdr := Message(0, 4096, testTemplate, data)
		require.PanicsWithValue(t, "panicMapper: MapSingle", func() { _ = pq.Submit(context.Background(), info, &hdr, data) })
		for pq.Comp(0).Status == Queued {
			_, err := eng.Process()
			require.NoError(t, err)
		}
		require.NoError(t, closeBounded(pq))
		require.Zero(t, l.Stats().InUse, "panicAt %d: txreqs not given back", panicAt)
	}
}
