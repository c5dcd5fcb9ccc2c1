package sdma_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// packet is a caller's txreq type: sdma.TxReq first, then the caller's own fields.
type packet struct {
	sdma.TxReq
	hdr [64]byte
}

// The README's API sketch, whole: an allocator of the caller's txreq type, an IOMMU-mapped
// device with two engines, packets built from a header and a payload that the splitting add
// cuts at page boundaries, blocking sends, completions back to the allocator.
func Example_readme() {
	slab, err := alloc.NewSlab(alloc.SlabConfig[packet]{ObjectsPerSlab: 256})
	if err != nil {
		panic(err)
	}
	toPacket := alloc.OuterFunc[packet, sdma.TxReq]() // *sdma.TxReq -> *packet, no allocation

	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		panic(err)
	}
	sink := &sdma.DiscardSink{}
	dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Engines: 2, RingSize: 2048, Sink: sink})
	if err != nil {
		panic(err)
	}

	payload := make([]byte, 10000)
	var wg sync.WaitGroup
	for flow := uint32(0); flow < 100; flow++ {
		e := dev.SelectEngine(flow, 0)
		p, err := slab.Get()
		if err != nil {
			panic(err)
		}
		wg.Add(1)
		err = p.Init(0, len(p.hdr)+len(payload), func(tx *sdma.TxReq, st sdma.Status) {
			defer wg.Done()
			if st != sdma.StatusOK {
				panic(st)
			}
			_ = slab.Put(toPacket(tx)) // runs once, after the txreq's mappings are undone
		})
		if err != nil {
			panic(err)
		}
		if err := p.AddKVAddr(dev, p.hdr[:]); err != nil { // mapped now, unmapped at completion
			panic(err)
		}
		if err := p.AddBytes(dev, payload); err != nil { // split at page boundaries
			panic(err)
		}
		if err := e.SendWait(context.Background(), &p.TxReq); err != nil {
			panic(err)
		}
	}
	wg.Wait()
	if err := dev.Close(); err != nil {
		panic(err)
	}
	// Only the device's own pad mapping could remain, and Close released it.
	fmt.Println(sink.Packets(), "packets,", sink.Bytes(), "bytes,", iommu.LiveCount(), "mappings left")
	// Output:
	// 100 packets, 1006400 bytes, 0 mappings left
}
