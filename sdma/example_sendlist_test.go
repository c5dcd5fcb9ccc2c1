package sdma_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// A batch of txreqs sent with one call: SendList takes them off the list in order and publishes
// the ring's tail once per batch of up to 32. A Manual engine, so that the output is
// deterministic: Process runs the chip, whose idle interrupt runs the completion pass.
func ExampleEngine_SendList() {
	sink := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)

	var order []int
	txs := make([]sdma.TxReq, 3)
	var l sdma.TxList
	for i := range txs {
		payload := []byte(fmt.Sprintf("pkt%d", i))
		cb := sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { order = append(order, i) })
		_ = txs[i].Init(0, len(payload), cb)
		_ = txs[i].AddKVAddr(dev, payload)
		l.PushBack(&txs[i])
	}
	n, err := e.SendList(nil, &l)
	fmt.Println("sent", n, "left", l.Len(), err)
	delivered, err := e.Process()
	fmt.Println("delivered", delivered, err)
	fmt.Printf("completed in order %v; wire: %q\n", order, sink.Packets(0))
	// Output:
	// sent 3 left 0 <nil>
	// delivered 3 <nil>
	// completed in order [0 1 2]; wire: ["pkt0" "pkt1" "pkt2"]
}

// Several lists sent as one: SendListIn takes the epoch read before the first (Epoch) and
// refuses a later list with ErrReset, changing nothing, once a sw clean (here Stop and Start)
// reset the ring in between: the later list never goes into a ring that lost the earlier one, as
// user_sdma's AHG packets must not (their header is in the entry the first packet writes).
func ExampleEngine_SendListIn() {
	sink := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	list := func(names ...string) *sdma.TxList {
		var l sdma.TxList
		for _, name := range names {
			tx := new(sdma.TxReq)
			_ = tx.Init(0, len(name), nil)
			_ = tx.AddKVAddr(dev, []byte(name))
			l.PushBack(tx)
		}
		return &l
	}
	epoch := e.Epoch()
	n, err := e.SendListIn(nil, list("pkt0", "pkt1"), epoch)
	fmt.Println("first:", n, err)
	_, _ = e.Process()
	_ = e.Stop() // a sw clean between the two lists
	_ = e.Start()
	second := list("pkt2", "pkt3")
	n, err = e.SendListIn(nil, second, epoch)
	fmt.Println("second:", n, errors.Is(err, sdma.ErrReset), "left", second.Len())
	fmt.Printf("wire: %q\n", sink.Packets(0))
	// Output:
	// first: 2 <nil>
	// second: 0 true left 2
	// wire: ["pkt0" "pkt1"]
}

// The graceful close: Shutdown refuses new sends, lets the engines finish what they hold (here
// it drives the Manual engine itself), then closes the device. Every txreq sent before it
// completes StatusOK.
func ExampleDevice_Shutdown() {
	sink := &sdmatest.DiscardSink{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		panic(err)
	}
	e := dev.Engine(0)
	statuses := map[sdma.Status]int{}
	count := sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { statuses[st]++ })
	txs := make([]sdma.TxReq, 10)
	for i := range txs {
		_ = txs[i].Init(0, 64, count)
		_ = txs[i].AddBytes(dev, make([]byte, 64))
		if err := e.Send(nil, &txs[i], false); err != nil {
			panic(err)
		}
	}
	fmt.Println("shutdown:", dev.Shutdown(context.Background()))
	fmt.Println("completions:", statuses, "delivered:", sink.Packets())

	var late sdma.TxReq
	_ = late.Init(0, 64, count)
	err = late.AddBytes(dev, make([]byte, 64))
	fmt.Println("an add after it:", errors.Is(err, sdma.ErrClosed))
	// Output:
	// shutdown: <nil>
	// completions: map[ok:10] delivered: 10
	// an add after it: true
}

// SelectEngine spreads selectors (QP numbers, flow hashes) over a VL's engines as the kernel's
// sdma_select_engine_vl does: selector & mask picks one of the VL's engines.
func ExampleDevice_SelectEngine() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 4, NumVLs: 2})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	// vl 2 is past the two VLs: it takes the map's repeated slot (VL 0's engines), as the
	// kernel's does; a vl from MaxVLs (8) on gets engine 0.
	for _, vl := range []uint8{0, 1, 2, sdma.MaxVLs} {
		fmt.Printf("vl %d:", vl)
		for sel := uint32(0); sel < 4; sel++ {
			fmt.Printf(" %d", dev.SelectEngine(sel, vl).Index())
		}
		fmt.Println()
	}
	// Output:
	// vl 0: 0 1 0 1
	// vl 1: 2 3 2 3
	// vl 2: 0 1 0 1
	// vl 8: 0 0 0 0
}
