package sdma_test

import (
	"context"
	"fmt"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// Registered memory: a buffer pool registered once; packets added from it make no mapping and
// have nothing to unmap at completion. Deregister waits for the packets in flight.
func ExampleDevice_Register() {
	m := dma.NewCounting(dma.NewDirect())
	sink := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Mapper: m, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	pool := make([]byte, 4096) // e.g. one slot per packet in flight
	reg, err := dev.Register(pool)
	if err != nil {
		panic(err)
	}
	e := dev.Engine(0)
	for i := range 3 {
		slot := pool[i*64 : i*64+8]
		copy(slot, fmt.Sprintf("packet %d", i))
		var tx sdma.TxReq
		_ = tx.Init(0, len(slot), nil)
		if err := tx.AddKVAddr(dev, slot); err != nil { // no map call: the address is computed
			panic(err)
		}
		if err := e.Send(nil, &tx, false); err != nil {
			panic(err)
		}
	}
	_, _ = e.Process()
	if err := dev.Deregister(context.Background(), reg); err != nil {
		panic(err)
	}
	c := m.Counts()
	fmt.Printf("%d packets, %d map calls, %d unmap calls\n", len(sink.Packets(0)), c.MapSingle, c.UnmapSingle)
	fmt.Printf("%q\n", sink.Packets(0)[2])
	// Output:
	// 3 packets, 0 map calls, 0 unmap calls
	// "packet 2"
}
