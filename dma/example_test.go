package dma_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/dma"
)

// The identity mapper: the bus address is the buffer's address, but translation is still checked.
func ExampleDirect() {
	m := dma.NewDirect()
	hdr := []byte("packet header")
	addr, err := m.MapSingle(hdr, dma.ToDevice)
	if err != nil {
		panic(err)
	}
	b, _ := m.Translate(addr, 6, dma.ToDevice) // what the device reads
	fmt.Printf("%s\n", b)
	_, err = m.Translate(addr, 6, dma.FromDevice) // the device may not write it
	fmt.Println(errors.Is(err, dma.ErrFault))
	_ = m.UnmapSingle(addr, len(hdr), dma.ToDevice)
	_, err = m.Translate(addr, 6, dma.ToDevice)
	var f *dma.Fault
	fmt.Println(errors.As(err, &f), f.Reason, m.Faults())
	// Output:
	// packet
	// true
	// true not mapped 2
}

// An IOMMU with a small IOVA space: its own bus addresses, a leak report, clean exhaustion.
func ExampleIOMMU() {
	m, err := dma.NewIOMMU(dma.IOMMUConfig{IOVABits: 14}) // 4 granules of 4 KiB; granule 0 unused
	if err != nil {
		panic(err)
	}
	pages, err := dma.AllocPages(4)
	if err != nil {
		panic(err)
	}
	defer pages.Close()
	for i := range 4 {
		p, _ := pages.Page(i)
		addr, err := m.MapPage(p, 0, dma.PageSize, dma.ToDevice)
		if err != nil {
			fmt.Println(errors.Is(err, dma.ErrMapping))
			break
		}
		fmt.Printf("page %d at %#x\n", i, addr)
	}
	for _, l := range m.Live() { // the leak report
		fmt.Println(l)
		_ = m.UnmapPage(l.Addr, l.Size, l.Dir)
	}
	fmt.Println(m.LiveCount())
	// Output:
	// page 0 at 0x1000
	// page 1 at 0x2000
	// page 2 at 0x3000
	// true
	// page [0x1000,+4096) to-device
	// page [0x2000,+4096) to-device
	// page [0x3000,+4096) to-device
	// 0
}

// A pool of pre-mapped 64-byte headers, as added with sdma_txadd_daddr.
func ExamplePool() {
	m, _ := dma.NewIOMMU(dma.IOMMUConfig{})
	pool, err := dma.NewPool(m, "hdr", 64, 64)
	if err != nil {
		panic(err)
	}
	b, err := pool.Alloc()
	if err != nil {
		panic(err)
	}
	copy(b.Bytes, "LRH BTH")
	dev, _ := m.Translate(b.Addr, 7, dma.ToDevice)
	fmt.Printf("%s %d %v\n", dev, pool.InUse(), b.Addr%64 == 0)
	err = pool.Destroy() // a block is still out: reported
	fmt.Println(errors.Is(err, dma.ErrBusy))
	_ = pool.Free(b)
	fmt.Println(m.LiveCount())
	// Output:
	// LRH BTH 1 true
	// true
	// 0
}

// Interposition: a driver wraps the mapper it was given, here to count calls and to make the
// second map fail.
func ExampleFaultInjector() {
	count := dma.NewCounting(dma.NewDirect())
	m := dma.NewFaultInjector(count)
	m.FailNth(2)
	buf := make([]byte, 100)
	for range 3 {
		addr, err := m.MapSingle(buf, dma.ToDevice)
		if err != nil {
			fmt.Println(err)
			continue
		}
		_ = m.UnmapSingle(addr, len(buf), dma.ToDevice)
	}
	c := count.Counts()
	fmt.Println(c.MapSingle, c.UnmapSingle, m.Injected())
	// Output:
	// dma: map_single (injected): dma: mapping failed
	// 2 2 1
}
