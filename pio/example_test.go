package pio_test

import (
	"context"
	"fmt"

	"github.com/gosdma/gosdma/pio"
)

type printSink struct{}

func (printSink) Deliver(ctxt int, segs [][]byte) error {
	for _, s := range segs {
		fmt.Printf("context %d sent %q\n", ctxt, s)
	}
	return nil
}

// A kernel send context with a manual chip: allocate, copy behind a PBC, let the chip send it,
// see the credits come back.
func Example() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: printSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	data := []byte("hello, PIO!!") // whole dwords
	dw := 2 + len(data)/4          // PBC included
	b, err := sc.BufferAlloc(dw, pio.ReleaseFunc(func(code pio.ReleaseCode) {
		fmt.Println("released:", code)
	}))
	if err != nil {
		panic(err)
	}
	if err := b.Copy(pio.CreatePBC(0, 0, 0, uint32(dw)), data); err != nil {
		panic(err)
	}
	sc.Process()
	fmt.Println("credits free:", sc.Avail(), "of", sc.Credits())
	// Output:
	// context 0 sent "hello, PIO!!"
	// released: threshold
	// credits free: 18 of 18
}

// A packet built from pieces of any length (seg_pio_copy_*), sent with the blocking send.
func ExampleSendContext_SendWait() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: printSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	segs := [][]byte{[]byte("head:"), []byte("pay"), []byte("load")}
	if err := sc.SendWait(context.Background(), 0, 0, segs, nil); err != nil {
		panic(err)
	}
	sc.Process()
	// Output:
	// context 0 sent "head:payload"
}

// The kernel's sizing of each context type.
func ExampleContextSizes() {
	sz, err := pio.ContextSizes(pio.SizeConfig{SDMA: true, RcvContexts: 2})
	if err != nil {
		panic(err)
	}
	for t, s := range sz {
		fmt.Printf("%-6s %2d × %4d blocks\n", pio.Type(t), s.Count, s.Blocks)
	}
	// Output:
	// kernel 16 ×   18 blocks
	// vl15    1 ×  102 blocks
	// ack     1 ×   32 blocks
	// user    1 × 1024 blocks
}

// A halt releases what the context held, with an error, and the context recovers.
func ExampleSendContext_InjectHalt() {
	sc, err := pio.New(pio.Config{Sink: printSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	b, _ := sc.BufferAlloc(4, pio.ReleaseFunc(func(code pio.ReleaseCode) {
		fmt.Println("released:", code, "error:", code.Err())
	}))
	b.Copy(pio.CreatePBC(0, 0, 0, 4), []byte("lost0000"))
	sc.InjectHalt()
	fmt.Println("enabled again:", sc.Enabled(), "halts:", sc.Stats().Halts)
	// Output:
	// released: sc-disable error: true
	// enabled again: true halts: 1
}
