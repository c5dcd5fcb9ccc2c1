package sdmatest_test

import (
	"fmt"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// logBatch is a BatchSink that prints what the engine hands it: batches of up to 8 packets.
type logBatch struct{}

func (logBatch) BatchLimit() (packets, bytes int) { return 8, 0 }
func (logBatch) Deliver(engine int, segs [][]byte) error {
	fmt.Printf("engine %d: deliver %q\n", engine, segs[0])
	return nil
}
func (logBatch) Queue(engine int, segs [][]byte) error {
	fmt.Printf("engine %d: queue %q\n", engine, segs[0])
	return nil
}
func (logBatch) Flush(engine int, errs []error) {
	fmt.Printf("engine %d: flush %d packets\n", engine, len(errs))
}

// A FaultBatchSink fails a share of the packets (FailRate, drawn from Seed) on their way into a
// BatchSink, which still gets its batches: a failed packet is never queued, is recorded against
// the engine as a sink error (a packet lost on the wire), and its txreq completes OK. This is
// how sdmaperf's -faults sinkfail keeps the UDP sink's sendmmsg batches.
func ExampleFaultBatchSink() {
	fs := &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{FailRate: 0.5, Seed: 1}, Batch: logBatch{}}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: fs})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	ok := 0
	txs := make([]sdma.TxReq, 4)
	for i := range txs {
		_ = txs[i].Init(0, 4, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
			if st == sdma.StatusOK {
				ok++
			}
		}))
		_ = txs[i].AddKVAddr(dev, []byte(fmt.Sprint("pkt", i)))
		if err := e.Send(nil, &txs[i], true); err != nil {
			panic(err)
		}
	}
	_, _ = e.Process() // the hardware pass: queue (or fail) each packet, then flush
	e.Poll()           // the completion pass
	fmt.Println("completed OK:", ok, "failed:", fs.Failed(), "sink errors:", e.Stats().SinkErrors)
	// Output:
	// engine 0: queue "pkt0"
	// engine 0: queue "pkt1"
	// engine 0: flush 2 packets
	// completed OK: 4 failed: 2 sink errors: 2
}
