package sdmatest_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// sendBytes sends one packet of b on e and drives the Manual engine until it completed.
func sendBytes(dev *sdma.Device, e *sdma.Engine, b []byte) {
	tx := new(sdma.TxReq)
	_ = tx.Init(0, len(b), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
		fmt.Println("completed:", st)
	}))
	_ = tx.AddKVAddr(dev, b)
	if err := e.Send(nil, tx, true); err != nil {
		fmt.Println("send:", err)
		return
	}
	_, _ = e.Process()
	e.Poll()
}

// A DiscardSink drops what the engines deliver and counts it: the sink of benchmarks and of
// tests that look at the send side only.
func ExampleDiscardSink() {
	sink := &sdmatest.DiscardSink{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	for range 3 {
		sendBytes(dev, dev.Engine(0), make([]byte, 64))
	}
	fmt.Println(sink.Packets(), "packets,", sink.Bytes(), "bytes")
	// Output:
	// completed: ok
	// completed: ok
	// completed: ok
	// 3 packets, 192 bytes
}

// A CaptureSink keeps a copy of each packet, per engine, in delivery order: a packet is its
// descriptors' bytes, padded to whole dwords (the pad the txreq adds).
func ExampleCaptureSink() {
	sink := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Manual: true, RingSize: 64, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	sendBytes(dev, dev.Engine(1), []byte("hello, world"))
	sendBytes(dev, dev.Engine(1), []byte("hi"))
	for _, p := range sink.Packets(1) {
		fmt.Printf("%q\n", p)
	}
	fmt.Println(sink.Count(), len(sink.Packets(0)))
	// Output:
	// completed: ok
	// completed: ok
	// "hello, world"
	// "hi\x00\x00"
	// 2 0
}

// A FaultSink fails a share of the deliveries (here every one): a failed delivery is a packet
// lost on the wire, recorded against the engine as a sink error; the txreq still completes OK
// and the engine does not halt.
func ExampleFaultSink() {
	fs := &sdmatest.FaultSink{Sink: &sdmatest.DiscardSink{}, FailRate: 1, Seed: 1}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: fs})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	sendBytes(dev, e, make([]byte, 64))
	s := e.Stats()
	fmt.Println(fs.Failed(), s.SinkErrors, s.Faults, errors.Is(e.SinkError(), sdma.ErrInjected))

	// A rate outside 0..1 is refused when the device is made.
	_, err = sdma.NewDevice(sdma.Config{Sink: &sdmatest.FaultSink{FailRate: 2}})
	fmt.Println(err)
	// Output:
	// completed: ok
	// 1 1 0 true
	// sdma: sdmatest.FaultSink.FailRate = 2: want a probability, 0..1
}

// InjectHalt halts a running engine as the chip would on an error, and returns once it
// recovered: the halt is counted by cause, the engine runs again, and History shows the way
// through the halt states.
func ExampleInjectHalt() {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	if err := sdmatest.InjectHalt(e, sdma.CauseMemRead); err != nil {
		panic(err)
	}
	s := e.Stats()
	fmt.Println(s.Halts[sdma.CauseMemRead], s.Faults, s.Recoveries, sdmatest.EngineState(e))
	h := sdmatest.History(e)
	fmt.Println(h[len(h)-1].To == sdmatest.S99Running)
	fmt.Println(errors.Is(sdmatest.InjectHalt(e, sdma.CauseNone), sdma.ErrInvalid))
	sendBytes(dev, e, make([]byte, 8))
	// Output:
	// 1 1 1 s99_running
	// true
	// true
	// completed: ok
}

// RaiseEvent drives the engine state machine directly (hfi1: sdma_process_event): e70 takes a
// running engine through the idle halt to s20, where a send is refused and its txreq goes to the
// flush list (it completes aborted), and e30 runs it again.
func ExampleRaiseEvent() {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	_ = sdmatest.RaiseEvent(e, sdmatest.E70GoIdle, "example")
	fmt.Println(sdmatest.EngineState(e))
	sendBytes(dev, e, make([]byte, 8))
	_ = sdmatest.RaiseEvent(e, sdmatest.E30GoRunning, "example")
	fmt.Println(sdmatest.EngineState(e))
	sendBytes(dev, e, make([]byte, 8))
	// Output:
	// s20_idle
	// send: sdma: engine not running; txreq flushed
	// completed: aborted
	// s99_running
	// completed: ok
}
