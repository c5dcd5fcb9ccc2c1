package pio_test

import (
	"fmt"

	"github.com/gosdma/gosdma/pio"
)

// A PBC as a sender builds it (hfi1: create_pbc) for a 64-byte payload on VL 2 that asks for a
// credit return, and the fields the chip model reads back. The length counts the PBC's own two
// dwords; CreatePBC always sets InsertHCRC to none.
func ExamplePBC() {
	payload := 64               // bytes, whole dwords
	dw := uint32(2 + payload/4) // PBC included
	pbc := pio.CreatePBC(pio.PBCCreditReturn, 0, 2, dw)

	fmt.Printf("pbc %#x\n", uint64(pbc))
	fmt.Println("length:", pbc.LengthDWs(), "dwords, VL", pbc.VL())
	fmt.Println("credit return:", pbc&pio.PBCCreditReturn != 0,
		"HCRC none:", pbc.InsertHCRC() == pio.IHCRCNone, "delay:", pbc.StaticRate())
	// Output:
	// pbc 0xa002012
	// length: 18 dwords, VL 2
	// credit return: true HCRC none: true delay: 0
}

// WriteQWords copies whole quadwords only, with the stores the send-buffer copy uses: the tail
// of src that does not fill a quadword is not written (Buf's copy keeps such a tail in its carry
// and writes it zero-padded at the end, as the kernel's seg_pio_copy_end does).
func ExampleWriteQWords() {
	src := []byte("0123456789abcdefXYZ") // 19 bytes: 2 quadwords and 3 bytes
	dst := make([]byte, 24)
	pio.WriteQWords(dst, src)
	fmt.Printf("%q\n", dst)
	// Output:
	// "0123456789abcdef\x00\x00\x00\x00\x00\x00\x00\x00"
}
