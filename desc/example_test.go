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
