package dma_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/dma"
)

// UnmapAll undoes many mappings in one call, as sdma's completion pass undoes a txreq's
// fragments: every entry is tried, and the error names the first that was not mapped.
func ExampleUnmapAll() {
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		panic(err)
	}
	hdr, payload := make([]byte, 64), make([]byte, 1000)
	a1, _ := m.MapSingle(hdr, dma.ToDevice)
	a2, _ := m.MapSingle(payload, dma.ToDevice)
	fmt.Println("live:", m.LiveCount())

	us := []dma.Unmap{
		{Addr: a1, Size: len(hdr), Dir: dma.ToDevice, Kind: dma.KindSingle},
		{Addr: a2, Size: len(payload), Dir: dma.ToDevice, Kind: dma.KindSingle},
	}
	fmt.Println("unmap:", dma.UnmapAll(m, us), "live:", m.LiveCount())
	err = dma.UnmapAll(m, us[:1]) // already undone
	fmt.Println("again:", errors.Is(err, dma.ErrNotMapped), "live:", m.LiveCount())
	// Output:
	// live: 2
	// unmap: <nil> live: 0
	// again: true live: 0
}
