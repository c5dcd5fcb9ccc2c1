package pio_test

import "github.com/gosdma/gosdma/pio"

// A packet whose pieces are not whole quadwords (a header, then payload fragments), copied
// piece by piece as hfi1's verbs path does with seg_pio_copy_start, seg_pio_copy_mid and
// seg_pio_copy_end: the bytes that do not fill a quadword wait in the buffer's carry, and
// CopyEnd writes the last one and hands the packet to the chip.
func ExampleBuf_CopyStart() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: printSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	hdr, frags := []byte("hdr:"), [][]byte{[]byte("pay"), []byte("load, "), []byte("in pieces")}
	n := len(hdr)
	for _, f := range frags {
		n += len(f)
	}
	dw := 2 + (n+3)/4 // PBC included, the payload padded to whole dwords
	b, err := sc.BufferAlloc(dw, nil)
	if err != nil {
		panic(err)
	}
	if err := b.CopyStart(pio.CreatePBC(0, 0, 0, uint32(dw)), hdr); err != nil {
		panic(err)
	}
	for _, f := range frags {
		if err := b.CopyMid(f); err != nil {
			panic(err)
		}
	}
	if err := b.CopyEnd(); err != nil {
		panic(err)
	}
	sc.Process()
	// Output:
	// context 0 sent "hdr:payload, in pieces\x00\x00"
}
