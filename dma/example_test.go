package dma_test

import (
	"context"
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

// Pages outside the Go heap (alloc_pages), one of them mapped for the device to write
// (dma_map_page), and what closing the region does while the device can still reach it.
func ExampleAllocPages() {
	m := dma.NewDirect()
	pages, err := dma.AllocPages(2)
	if err != nil {
		panic(err)
	}
	p, _ := pages.Page(1)
	addr, err := m.MapPage(p, 16, 8, dma.FromDevice)
	if err != nil {
		panic(err)
	}
	dev, _ := m.Translate(addr, 8, dma.FromDevice) // the device writes
	copy(dev, "from dev")
	_ = m.SyncForCPU(addr, 8, dma.FromDevice)
	fmt.Printf("%s\n", p.Bytes()[16:24])

	err = pages.Close() // still mapped: reported, released at the last unmap
	fmt.Println(errors.Is(err, dma.ErrBusy), pages.Closed())
	_, err = m.MapPage(p, 0, 8, dma.ToDevice) // a closed region is an error, not a crash
	fmt.Println(errors.Is(err, dma.ErrClosed))
	_ = m.UnmapPage(addr, 8, dma.FromDevice) // the memory goes now
	fmt.Println(p.Bytes() == nil, errors.Is(pages.Close(), dma.ErrClosed))
	// Output:
	// from dev
	// true true
	// true
	// true true
}

// A scatter list (dma_map_sg): each entry gets its bus address and length, and one UnmapSG
// undoes them all. The IOMMU keeps each buffer's offset within its granule, so only the granule
// numbers are fixed.
func ExampleIOMMU_MapSG() {
	m, _ := dma.NewIOMMU(dma.IOMMUConfig{})
	sg := []dma.SG{{Buf: []byte("LRH+BTH")}, {Buf: []byte("payload")}}
	n, err := m.MapSG(sg, dma.ToDevice)
	if err != nil {
		panic(err)
	}
	for _, e := range sg[:n] {
		b, _ := m.Translate(e.Addr, e.Len, dma.ToDevice)
		fmt.Printf("granule %d: %d bytes %s\n", e.Addr/4096, e.Len, b)
	}
	fmt.Println(m.UnmapSG(sg, dma.ToDevice), m.LiveCount())
	// Output:
	// granule 1: 7 bytes LRH+BTH
	// granule 2: 7 bytes payload
	// <nil> 0
}

// Coherent memory (dma_alloc_coherent): the CPU and the device share it with no syncs. Both its
// addresses are aligned to the power-of-two number of pages covering its size: a 40 KiB ring
// lies within one 64 KiB block.
func ExampleIOMMU_AllocCoherent() {
	m, _ := dma.NewIOMMU(dma.IOMMUConfig{})
	c, err := m.AllocCoherent(64)
	if err != nil {
		panic(err)
	}
	copy(c.Bytes(), "ring")
	dev, _ := m.Translate(c.Addr(), 4, dma.ToDevice)
	fmt.Printf("%s %#x\n", dev, c.Addr())
	ring, err := m.AllocCoherent(40 << 10)
	if err != nil {
		panic(err)
	}
	fmt.Println(ring.Addr()%(64<<10) == 0)
	fmt.Println(m.FreeCoherent(ring))
	fmt.Println(m.FreeCoherent(c), c.Bytes() == nil)
	fmt.Println(errors.Is(m.FreeCoherent(c), dma.ErrClosed))
	// Output:
	// ring 0x1000
	// true
	// <nil>
	// <nil> true
	// true
}

// Fault injection built into the IOMMU: the third map call fails, as alloc_iova would when the
// space is full, to drive a driver's error path.
func ExampleIOMMUConfig() {
	m, err := dma.NewIOMMU(dma.IOMMUConfig{FailNth: 3})
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 64)
	for i := 1; i <= 4; i++ {
		addr, err := m.MapSingle(buf, dma.ToDevice)
		fmt.Println(i, errors.Is(err, dma.ErrMapping))
		if err == nil {
			_ = m.UnmapSingle(addr, len(buf), dma.ToDevice)
		}
	}
	fmt.Println(m.Injected())
	_, err = dma.NewIOMMU(dma.IOMMUConfig{PageSize: 3000})
	fmt.Println(errors.Is(err, dma.ErrInvalid))
	// Output:
	// 1 false
	// 2 false
	// 3 true
	// 4 false
	// 1
	// true
}

// Counting interposes on every call of the mapper it wraps.
func ExampleCounting() {
	m := dma.NewCounting(dma.NewDirect())
	buf := make([]byte, 32)
	addr, _ := m.MapSingle(buf, dma.ToDevice)
	_, _ = m.Translate(addr, 32, dma.ToDevice)
	_, err := m.Translate(addr, 33, dma.ToDevice) // one byte too many: a fault
	_ = m.UnmapSingle(addr, 32, dma.ToDevice)
	c := m.Counts()
	fmt.Println(c.MapSingle, c.Translate, c.UnmapSingle, c.Errors, m.Faults())
	var f *dma.Fault
	fmt.Println(errors.As(err, &f), f.Size, f.Reason)
	// Output:
	// 1 2 1 1 1
	// true 33 partly mapped
}

// Registering memory maps it once: a buffer inside has its bus address by arithmetic, and the
// device reads it with no per-packet mapping until Deregister.
func ExampleRegistrar() {
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		panic(err)
	}
	buf := []byte("header|payload")
	reg, err := m.Register(buf, dma.ToDevice)
	if err != nil {
		panic(err)
	}
	addr, _ := reg.AddrOf(buf[7:]) // no lock, no allocation
	b, _ := m.Translate(addr, 7, dma.ToDevice)
	fmt.Printf("%s %v\n", b, m.Registered(buf[7:]) == reg)
	_ = m.Deregister(context.Background(), reg) // waits for uses in flight (Acquire/Release)
	_, err = m.Translate(addr, 7, dma.ToDevice)
	fmt.Println(errors.Is(err, dma.ErrFault), m.LiveCount())
	// Output:
	// payload true
	// true 0
}

// quotaMapper is a user's mapper: Direct with a MapSingleSole that refuses every map. It embeds
// *dma.Direct, so it also has Direct's MapSingleSoleHint, which knows nothing of the override.
type quotaMapper struct{ *dma.Direct }

func (q quotaMapper) MapSingleSole(buf []byte, dir dma.Direction) (dma.Addr, dma.Sole, error) {
	return 0, 0, errors.New("over quota")
}

// HintIsOwn tells a caller holding a hint whether MapSingleSoleHint is the mapper's own: only
// then may it pass the hint; otherwise it calls MapSingleSole, the user's override.
func ExampleHintIsOwn() {
	for _, m := range []dma.Mapper{dma.NewDirect(), dma.NewCounting(nil), quotaMapper{dma.NewDirect()}} {
		s := m.(dma.SoleMapper)
		buf := make([]byte, 64)
		var addr dma.Addr
		var h dma.Sole
		var err error
		if dma.HintIsOwn(m) {
			addr, h, err = s.MapSingleSoleHint(buf, dma.ToDevice, 0)
		} else {
			addr, h, err = s.MapSingleSole(buf, dma.ToDevice)
		}
		fmt.Printf("%T own hint: %v, map error: %v\n", m, dma.HintIsOwn(m), err)
		if err == nil {
			_ = s.UnmapSingleSole(addr, len(buf), dma.ToDevice, h)
		}
	}
	// Output:
	// *dma.Direct own hint: true, map error: <nil>
	// *dma.Counting own hint: true, map error: <nil>
	// dma_test.quotaMapper own hint: false, map error: over quota
}
