package usdma_test

import (
	"context"
	"fmt"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/usdma"
)

// Send a 1 MiB message as PSM does: one request, 128 packets of 8 KiB, headers by AHG.
func Example() {
	sink := &sdmatest.DiscardSink{}
	dev, _ := sdma.NewDevice(sdma.Config{Sink: sink})
	defer dev.Close()
	pq, _ := usdma.New(usdma.Config{Device: dev})
	defer pq.Close(context.Background())

	msg := make([]byte, 1<<20)
	tmpl := usdma.Template{DLID: 7, SLID: 3, Opcode: 0xc0, PKey: 0xffff, DestQP: 0x80, PSN: 100}
	info, hdr := usdma.Message(0, 8192, tmpl, msg) // slot 0, 8 KiB fragments
	if err := pq.Submit(context.Background(), info, &hdr, msg); err != nil {
		panic(err)
	}
	err := pq.Wait(context.Background(), 0) // or poll pq.Comp(0) until it leaves QUEUED
	st := pq.Stats()
	fmt.Println(err, pq.Comp(0).Status, info.NPkts, "packets,", st.AHGPackets, "built by AHG;", sink.Bytes(), "bytes")
	// Output: <nil> COMPLETE 128 packets, 127 built by AHG; 1056768 bytes
}

// A request's errors are clear and change nothing; a failed request's slot says why.
func ExamplePktQ_Submit_errors() {
	dev, _ := sdma.NewDevice(sdma.Config{})
	defer dev.Close()
	pq, _ := usdma.New(usdma.Config{Device: dev})
	defer pq.Close(context.Background())

	msg := make([]byte, 100000)
	info, hdr := usdma.Message(1, 8192, usdma.Template{Opcode: 0xc0}, msg)
	info.FragSize = 8100 // not a multiple of 64 bytes
	fmt.Println(pq.Submit(context.Background(), info, &hdr, msg))
	info.Ctrl = usdma.Ctrl(usdma.Expected, 1)
	fmt.Println(pq.Submit(context.Background(), info, &hdr, msg))
	info, hdr = usdma.Message(65538, 8192, usdma.Template{Opcode: 0xc0}, msg) // CompIdx is 16 bits: not slot 2
	fmt.Println(pq.Submit(context.Background(), info, &hdr, msg))
	fmt.Println(pq.Comp(1).Status, pq.Comp(2).Status)
	// Output:
	// usdma: request slot 1: fragsize 8100 not a multiple of 64
	// usdma: request slot 1: EXPECTED (TID) requests need receive-side TID entries, which gosdma does not model; send EAGER
	// usdma: request slot 65538: Message: slot 65538 out of 0..65535 (CompIdx is 16 bits)
	// FREE FREE
}
