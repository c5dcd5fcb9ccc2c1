package sdma_test

import (
	"fmt"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// printDescs prints what a txreq's descriptors say, without the (machine-dependent) addresses.
func printDescs(tx *sdma.TxReq) {
	names := [...]string{desc.MapNone: "none", desc.MapSingle: "single", desc.MapPage: "page", 3: "?"}
	ds := tx.Descs()
	skip := 0
	if len(ds) > 0 {
		skip = desc.EditDescs(ds[0].HeaderMode())
	}
	for i, d := range ds {
		if i >= 1 && i <= skip {
			fmt.Printf("desc %d: AHG edit descriptor, update words %d..%d\n", i, 4*i-3, 4*i)
			continue
		}
		fmt.Printf("desc %d: %5d bytes map=%-6s first=%-5v last=%-5v h2h=%-5v intreq=%v",
			i, d.Len(), names[d.Generation()], d.First(), d.Last(), d.HeadToHost(), d.IntReq())
		if m := d.HeaderMode(); m != desc.AHGNoAHG && i == 0 {
			fmt.Printf(" ahg mode=%d entry=%d dws=%d", m, d.HeaderIndex(), d.HeaderDWs())
		}
		fmt.Println()
	}
}

// A packet from two heap buffers: each is mapped (MapSingle) as one descriptor, and the add that
// completes the 10 bytes closes the packet with a 2-byte pad descriptor.
func ExampleTxReq_AddKVAddr() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	hdr := []byte("HDR:")
	payload := []byte("hello!")

	var tx sdma.TxReq
	if err := tx.Init(sdma.FlagUrgent, len(hdr)+len(payload), sdma.CompleterFunc(func(tx *sdma.TxReq, st sdma.Status) {
		fmt.Println("completed:", st)
	})); err != nil {
		panic(err)
	}
	if err := tx.AddKVAddr(dev, hdr); err != nil {
		panic(err) // tx was cleaned: Init it again before reuse
	}
	if err := tx.AddKVAddr(dev, payload); err != nil {
		panic(err)
	}
	printDescs(&tx)

	// Not sent in this example: Clean undoes the mappings.
	if err := tx.Clean(); err != nil {
		panic(err)
	}
	fmt.Println("after Clean:", tx.NumDesc(), "descriptors")
	// Output:
	// desc 0:     4 bytes map=single first=true  last=false h2h=false intreq=false
	// desc 1:     6 bytes map=single first=false last=false h2h=false intreq=false
	// desc 2:     2 bytes map=none   first=false last=true  h2h=true  intreq=true
	// after Clean: 0 descriptors
}

// Page-backed memory added page by page, as user_sdma does: AddPage takes a range that must lie
// inside the page.
func ExampleTxReq_AddPage() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	pages, err := dma.AllocPages(2)
	if err != nil {
		panic(err)
	}
	defer pages.Close()
	p0, _ := pages.Page(0)
	p1, _ := pages.Page(1)

	var tx sdma.TxReq
	if err := tx.Init(0, 96+32, nil); err != nil {
		panic(err)
	}
	// 96 bytes at the end of page 0 and 32 at the start of page 1.
	if err := tx.AddPage(dev, p0, dma.PageSize-96, 96); err != nil {
		panic(err)
	}
	if err := tx.AddPage(dev, p1, 0, 32); err != nil {
		panic(err)
	}
	printDescs(&tx)

	// A range crossing the page's end is refused, and the failed add cleans the txreq.
	var bad sdma.TxReq
	_ = bad.Init(0, 64, nil)
	fmt.Println(bad.AddPage(dev, p0, dma.PageSize-32, 64))

	_ = tx.Clean()
	// Output:
	// desc 0:    96 bytes map=page   first=true  last=false h2h=false intreq=false
	// desc 1:    32 bytes map=page   first=false last=true  h2h=true  intreq=false
	// sdma: AddPage: range 4064+64 crosses the page's end (4096)
}

// With FlagUseAHG the chip builds the header from an AHG entry: the first descriptor is a
// zero-length header descriptor carrying the update words (here 3, so one edit descriptor
// follows), and tlen counts the payload only.
func ExampleTxReq_InitAHG() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	// Patch a 16-bit field at bits 0..15 of dword 3, and two more fields.
	var words []uint32
	for _, f := range []struct {
		val          uint16
		dw, start, n uint8
	}{{0x1234, 3, 0, 16}, {7, 5, 16, 8}, {1, 6, 31, 1}} {
		w, err := desc.AHGUpdate(f.val, f.dw, f.start, f.n)
		if err != nil {
			panic(err)
		}
		words = append(words, w)
	}

	var tx sdma.TxReq
	const entry, headerLen = 5, 40
	if err := tx.InitAHG(sdma.FlagUseAHG, 256, sdma.AHG{Entry: entry, Words: words, HeaderLen: headerLen}, nil); err != nil {
		panic(err)
	}
	if err := tx.AddKVAddr(dev, make([]byte, 256)); err != nil {
		panic(err)
	}
	printDescs(&tx)
	_ = tx.Clean()
	// Output:
	// desc 0:     0 bytes map=none   first=true  last=false h2h=false intreq=false ahg mode=3 entry=5 dws=10
	// desc 1: AHG edit descriptor, update words 1..4
	// desc 2:   256 bytes map=single first=false last=true  h2h=true  intreq=false
}

// The splitting adds take any byte range and cut it at page boundaries, so callers cannot build
// a descriptor that crosses a page: AddPages for page-backed memory (MapPage per piece), AddBytes
// for heap memory (MapSingle per piece).
func ExampleTxReq_AddPages() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	region, err := dma.AllocPages(4)
	if err != nil {
		panic(err)
	}
	defer region.Close()

	var tx sdma.TxReq
	// 10000 bytes starting 100 bytes before the end of page 0: four pieces.
	if err := tx.Init(0, 10000, nil); err != nil {
		panic(err)
	}
	if err := tx.AddPages(dev, region, dma.PageSize-100, 10000); err != nil {
		panic(err)
	}
	printDescs(&tx)
	_ = tx.Clean()
	// Output:
	// desc 0:   100 bytes map=page   first=true  last=false h2h=false intreq=false
	// desc 1:  4096 bytes map=page   first=false last=false h2h=false intreq=false
	// desc 2:  4096 bytes map=page   first=false last=false h2h=false intreq=false
	// desc 3:  1708 bytes map=page   first=false last=true  h2h=true  intreq=false
}

// AddBytes splits heap memory at the page boundaries of its address; how many pieces a buffer
// takes depends on where the Go heap put it, so this example only counts bytes.
func ExampleTxReq_AddBytes() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	buf := make([]byte, 9000)

	var tx sdma.TxReq
	if err := tx.Init(0, len(buf), nil); err != nil {
		panic(err)
	}
	if err := tx.AddBytes(dev, buf); err != nil {
		panic(err)
	}
	total, within := 0, true
	for _, d := range tx.Descs() {
		total += d.Len()
		within = within && d.Len() <= dma.PageSize
	}
	fmt.Println("bytes:", total, "pieces within a page:", within, "closed:", tx.Remaining() == 0)
	_ = tx.Clean()
	// Output:
	// bytes: 9000 pieces within a page: true closed: true
}

// A header the caller mapped itself (here coherent memory from the device's mapper) is added by
// bus address: AddDAddr neither maps nor unmaps it, so it stays mapped after Clean and is freed by
// its owner.
func ExampleTxReq_AddDAddr() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	hdr, err := dev.Mapper().AllocCoherent(64)
	if err != nil {
		panic(err)
	}
	defer func() { _ = dev.Mapper().FreeCoherent(hdr) }()
	copy(hdr.Bytes(), "header")
	payload := make([]byte, 1000)

	var tx sdma.TxReq
	if err := tx.Init(0, 64+len(payload), nil); err != nil {
		panic(err)
	}
	if err := tx.AddDAddr(dev, hdr.Addr(), 64); err != nil {
		panic(err)
	}
	if err := tx.AddKVAddr(dev, payload); err != nil {
		panic(err)
	}
	printDescs(&tx)
	_ = tx.Clean() // unmaps the payload; the header stays the caller's
	// Output:
	// desc 0:    64 bytes map=none   first=true  last=false h2h=false intreq=false
	// desc 1:  1000 bytes map=single first=false last=true  h2h=true  intreq=false
}

// More fragments than the inline descriptors hold: past 6 the txreq moves to an array of 64, and
// past 63 every fragment is copied into one coalesce buffer that becomes the last descriptor, so a
// packet never needs more than 64 descriptors, however many fragments it has.
func ExampleTxReq_Init() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	frag := []byte("0123456789")

	var tx sdma.TxReq
	const frags = 100
	if err := tx.Init(0, frags*len(frag)+1, nil); err != nil {
		panic(err)
	}
	for i := range frags {
		if err := tx.AddKVAddr(dev, frag); err != nil {
			panic(err)
		}
		if i == 5 || i == 6 || i == 62 || i == 63 {
			fmt.Printf("after %3d fragments: %2d descriptors, %4d bytes left\n", i+1, tx.NumDesc(), tx.Remaining())
		}
	}
	if err := tx.AddKVAddr(dev, frag[:1]); err != nil {
		panic(err)
	}
	ds := tx.Descs()
	last := ds[len(ds)-1]
	fmt.Println("descriptors:", len(ds), "last:", last.Len(), "bytes (37 fragments and 1 byte copied, a 3-byte pad), LAST:", last.Last())
	_ = tx.Clean()
	// Output:
	// after   6 fragments:  6 descriptors,  941 bytes left
	// after   7 fragments:  7 descriptors,  931 bytes left
	// after  63 fragments: 63 descriptors,  371 bytes left
	// after  64 fragments: 63 descriptors,  361 bytes left
	// descriptors: 64 last: 374 bytes (37 fragments and 1 byte copied, a 3-byte pad), LAST: true
}

// An add that fails has already cleaned the txreq (every mapping it made is undone), as in the
// kernel: further adds are refused until it is initialised again. Clean may still be called, any
// number of times.
func ExampleTxReq_Clean() {
	dev, err := sdma.NewDevice(sdma.Config{Mapper: dma.NewDirect()})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	buf := make([]byte, 100)

	var tx sdma.TxReq
	if err := tx.Init(0, 64, nil); err != nil {
		panic(err)
	}
	_ = tx.AddKVAddr(dev, buf[:16])
	fmt.Println(tx.AddKVAddr(dev, buf[16:]))          // 84 bytes: more than the 48 left
	fmt.Println(tx.AddKVAddr(dev, buf[16:64]))        // refused: the failure cleaned tx
	fmt.Println(tx.Clean(), tx.Clean(), tx.NumDesc()) // harmless

	if err := tx.Init(0, 64, nil); err != nil { // start the packet again
		panic(err)
	}
	fmt.Println(tx.AddKVAddr(dev, buf[:64]), tx.Remaining())
	_ = tx.Clean()
	// Output:
	// sdma: AddKVAddr: length 84 beyond the 48 bytes left
	// sdma: AddKVAddr: txreq cleaned (failed, completed or Clean): Init before reuse
	// <nil> <nil> 0
	// <nil> 0
}
