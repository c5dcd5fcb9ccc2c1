package sdma_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// packet is a caller's txreq type: sdma.TxReq first, then the caller's own fields. It is its own
// completion (sdma.Completer): the *packet stored in the txreq's Completer is a pointer in an
// interface, which does not allocate, and Complete's receiver is the packet, with no unsafe.
type packet struct {
	sdma.TxReq
	hdr  [64]byte
	slab *alloc.Slab[packet]
	done *sync.WaitGroup
}

// Complete runs once per packet, after the txreq's mappings are undone, on the completion pass.
func (p *packet) Complete(_ *sdma.TxReq, st sdma.Status) {
	if st != sdma.StatusOK {
		panic(st)
	}
	done := p.done
	_ = p.slab.Put(p)
	done.Done()
}

// readmeSend builds one packet from a header and payload and sends it, the README's way.
func readmeSend(dev *sdma.Device, slab *alloc.Slab[packet], wg *sync.WaitGroup, flow uint32, payload []byte) {
	e := dev.SelectEngine(flow, 0)
	p, err := slab.Get()
	if err != nil {
		panic(err)
	}
	p.slab, p.done = slab, wg
	wg.Add(1)
	if err := p.Init(0, len(p.hdr)+len(payload), p); err != nil {
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

// The README's API sketch, whole: an allocator of the caller's txreq type, an IOMMU-mapped
// device with two engines, packets built from a header and a payload that the splitting add
// cuts at page boundaries, blocking sends, completions back to the allocator.
func Example_readme() {
	slab, err := alloc.NewSlab(alloc.SlabConfig[packet]{ObjectsPerSlab: 256})
	if err != nil {
		panic(err)
	}
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		panic(err)
	}
	sink := &sdmatest.DiscardSink{}
	dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Engines: 2, RingSize: 2048, Sink: sink})
	if err != nil {
		panic(err)
	}

	payload := make([]byte, 10000)
	var wg sync.WaitGroup
	for flow := uint32(0); flow < 100; flow++ {
		readmeSend(dev, slab, &wg, flow, payload)
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

// TestReadmeSendAllocs holds the README's promise: sending the README's way (a slab of the
// caller's packet type, the packet its own Completer, AddKVAddr + AddBytes, SendWait) allocates
// nothing per packet in steady state, completions included. The mapper is the direct one: the
// IOMMU model's page table is a Go map keyed by fresh IOVAs, whose growth is amortised
// allocation that belongs to the mapper, not to the send path (issue 11 registers memory).
func TestReadmeSendAllocs(t *testing.T) {
	if readmeRace {
		t.Skip("sync.Pool drops items under -race: allocation counts are asserted without it")
	}
	slab, err := alloc.NewSlab(alloc.SlabConfig[packet]{ObjectsPerSlab: 256})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect(), Engines: 2, RingSize: 2048, Sink: &sdmatest.DiscardSink{}})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	payload := make([]byte, 10000)
	var wg sync.WaitGroup
	flow := uint32(0)
	send := func() {
		for range 64 { // a batch, so that the ring and the slab reach their steady state
			readmeSend(dev, slab, &wg, flow, payload)
			flow++
		}
		wg.Wait()
	}
	send() // warm up: slabs, SendWait's waiter pool
	if a := testing.AllocsPerRun(50, send); a != 0 {
		t.Fatalf("the README's send path allocates: %.2f allocations per 64 packets, want 0", a)
	}
}
