package desc_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/desc"
)

func ExampleMake() {
	d, err := desc.Make(0x1000, 256, desc.MapSingle)
	if err != nil {
		panic(err)
	}
	d.SetFirst(true)
	d.SetLast(true)
	d.SetHeadToHost(true)
	fmt.Printf("qw0=%#016x qw1=%#x len=%d addr=%#x\n", d.Qw0, d.Qw1, d.Len(), d.Addr())
	// Output: qw0=0xc100000000001000 qw1=0x5 len=256 addr=0x1000
}

func ExampleDesc_SetLen() {
	var d desc.Desc
	err := d.SetLen(20000) // the kernel would silently mask this to 3616
	var fe *desc.FieldError
	fmt.Println(errors.Is(err, desc.ErrRange), errors.As(err, &fe), fe.Field)
	// Output: true true byte count
}

func ExampleAHGUpdate() {
	// Replace the 16-bit field at bits 16..31 of header dword 6 with 0x0123.
	w, err := desc.AHGUpdate(0x0123, 6, 16, 16)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%#08x %+v\n", w, desc.DecodeAHG(w))
	// Output: 0x90060123 {Enable:true StartBit:16 Bits:16 DWIndex:6 Value:291}
}

// The first descriptor of an AHG packet that applies three update words (hfi1: sdma_txinit_ahg
// with SDMA_TXREQ_F_USE_AHG): zero-length, FIRST, the AHG entry, mode, header length and the first
// update word; EditDescs says how many edit descriptors follow it unstamped.
func Example() {
	w, err := desc.AHGUpdate(0x0040, 4, 0, 16) // dword 4, bits 0..15 := 0x40
	if err != nil {
		panic(err)
	}
	var d desc.Desc
	d.SetFirst(true)
	for _, err := range []error{
		d.SetHeaderIndex(7),
		d.SetHeaderMode(desc.AHGApplyUpdate2), // 2..5 update words: one edit descriptor
		d.SetHeaderDWs(36 >> 2),               // a 36-byte header
	} {
		if err != nil {
			panic(err)
		}
	}
	d.SetUpdate1(w)
	fmt.Printf("qw0=%#x qw1=%#x\n", d.Qw0, d.Qw1)
	fmt.Println("entry", d.HeaderIndex(), "mode", d.HeaderMode(), "dws", d.HeaderDWs(),
		"edit descriptors", desc.EditDescs(d.HeaderMode()))
	fmt.Printf("%+v\n", desc.DecodeAHG(d.Update1()))
	// Output:
	// qw0=0x8000000000000000 qw1=0x8004004000006790
	// entry 7 mode 3 dws 9 edit descriptors 1
	// {Enable:true StartBit:0 Bits:16 DWIndex:4 Value:64}
}

// The ring stamps each slot's generation over the mapping type a txreq's copy keeps in qw1 3:2.
func ExampleDesc_WithGeneration() {
	d, err := desc.Make(0x2000, 64, desc.MapPage)
	if err != nil {
		panic(err)
	}
	const shift = 11                                                // a 2048-slot ring
	index := uint64(3000)                                           // pass 1 of the ring
	inRing := d.WithGeneration(desc.Generation(index >> shift & 3)) // (index >> log2(size)) & 3
	fmt.Println(d.MapType(), inRing.Generation(), inRing.Addr() == d.Addr(), inRing.Len())
	// Output: 2 1 true 64
}

func ExampleEditDescs() {
	for mode := desc.AHGNoAHG; mode <= desc.AHGApplyUpdate3; mode++ {
		fmt.Print(desc.EditDescs(mode), " ")
	}
	fmt.Println()
	// Output: 0 0 0 1 2
}

// A value that does not fit its field is refused with a *FieldError naming the field.
func ExampleFieldError() {
	var d desc.Desc
	err := d.SetHeaderIndex(32)
	var fe *desc.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Field, fe.Value, fe.Max)
	}
	fmt.Println(err)
	// Output:
	// AHG index 32 31
	// desc: AHG index 0x20 out of range (max 0x1f)
}
