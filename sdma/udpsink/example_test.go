//go:build linux

package udpsink_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/udpsink"
)

// A device whose engines deliver every packet as a loopback UDP datagram (batched: sendmmsg
// with each packet's segments as its gather list), and a Receiver that checks sequence numbers
// and checksums. Closing the sink sends the end-of-run markers, which stop the receiver.
func ExampleNew() {
	recv, err := udpsink.Listen(udpsink.ReceiverConfig{}) // 127.0.0.1, a free port
	if err != nil {
		panic(err)
	}
	defer recv.Close()
	done := make(chan udpsink.Report)
	go func() {
		rep, err := recv.Run(context.Background())
		if err != nil {
			panic(err)
		}
		done <- rep
	}()

	sink, err := udpsink.New(udpsink.Config{Addr: recv.Addr().String(), Engines: 2})
	if err != nil {
		panic(err)
	}
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Sink: sink})
	if err != nil {
		panic(err)
	}
	hdr, payload := make([]byte, 40), make([]byte, 1000) // two segments: 1040 bytes, no pad
	for i := range 10 {
		tx := new(sdma.TxReq)
		if err := tx.Init(0, len(hdr)+len(payload), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {})); err != nil {
			panic(err)
		}
		if err := tx.AddKVAddr(dev, hdr); err != nil {
			panic(err)
		}
		if err := tx.AddKVAddr(dev, payload); err != nil {
			panic(err)
		}
		if err := dev.Engine(i%2).SendWait(context.Background(), tx); err != nil {
			panic(err)
		}
	}
	if err := dev.Shutdown(context.Background()); err != nil { // every packet delivered, then Close
		panic(err)
	}
	if err := sink.Close(); err != nil { // after the device: the end markers
		panic(err)
	}
	rep := <-done
	fmt.Println("sent:", sink.Stats().Packets, "packets")
	fmt.Println("received:", rep.Packets, "packets,", rep.Bytes, "bytes from", len(rep.Engines), "engines")
	fmt.Println("lost:", rep.Lost, "bad checksums:", rep.BadChecksum, "ended:", rep.Ended, "ok:", rep.OK())
	// Output:
	// sent: 10 packets
	// received: 10 packets, 10400 bytes from 2 engines
	// lost: 0 bad checksums: 0 ended: true ok: true
}

// The Sink is a batching sink: engines queue packets with it and it sends them many a system
// call, without copying them.
var _ sdma.BatchSink = (*udpsink.Sink)(nil)

// The receiver alone, as sdmaperf -server runs it: it listens on a loopback address only and
// stops by itself, at the end markers or after Idle without a datagram.
func ExampleListen() {
	_, err := udpsink.Listen(udpsink.ReceiverConfig{Addr: "192.0.2.1:18515"})
	fmt.Println(err)
	// Output:
	// udpsink: not a loopback address: "192.0.2.1:18515" resolves to 192.0.2.1; only 127.0.0.0/8 and ::1 are allowed
}

// A receiver that waits an hour for a slow sender's next datagram, looking for a run that may
// follow without waiting that long: RunWithin returns when no run began within its wait, as at
// the idle timeout. A run that began within it would be received as Run receives it.
func ExampleReceiver_RunWithin() {
	recv, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: time.Hour})
	if err != nil {
		panic(err)
	}
	defer recv.Close()
	rep, err := recv.RunWithin(context.Background(), 50*time.Millisecond) // nobody sends
	fmt.Println(rep.IdleTimeout, rep.Packets, err)
	// Output:
	// true 0 <nil>
}

// A sender in the receiver's process waits, before the Sink's Close sends the end-of-run
// markers, until the Receiver has taken what reached its socket: every datagram sent, or none
// pending (a full receive buffer dropped the others). The markers, datagrams too, then find
// room, and the report counts the packets dropped as lost (sdmaperf's in-process receiver waits
// so, and gives up on a Run that reads nothing for 5 s).
func ExampleReceiver_Pending() {
	recv, err := udpsink.Listen(udpsink.ReceiverConfig{})
	if err != nil {
		panic(err)
	}
	defer recv.Close()
	done := make(chan udpsink.Report)
	go func() {
		rep, err := recv.Run(context.Background())
		if err != nil {
			panic(err)
		}
		done <- rep
	}()
	sink, err := udpsink.New(udpsink.Config{Addr: recv.Addr().String(), Batch: 1})
	if err != nil {
		panic(err)
	}
	payload := make([]byte, 1024)
	for range 100 {
		if err := sink.Deliver(0, [][]byte{payload}); err != nil {
			panic(err)
		}
	}
	sent := sink.Stats().Packets
	for recv.Received() < sent {
		pending, err := recv.Pending()
		if err != nil {
			panic(err)
		}
		if !pending {
			break // the rest were dropped
		}
		time.Sleep(time.Millisecond)
	}
	if err := sink.Close(); err != nil { // the end markers
		panic(err)
	}
	rep := <-done
	fmt.Println("ended:", rep.Ended, "received or lost:", rep.Packets+rep.Lost == sent)
	// Output:
	// ended: true received or lost: true
}
