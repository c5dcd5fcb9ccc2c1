package sdma_test

import (
	"fmt"

	"github.com/gosdma/gosdma/sdma"
)

// printBatches is a BatchSink that holds up to four packets and, at each Flush, "sends" them
// (prints their sizes). A real one keeps the slice headers Queue gets and hands them to one
// system call at Flush, as udpsink does with sendmmsg.
type printBatches struct {
	held [][][]byte
}

func (p *printBatches) Deliver(_ int, segs [][]byte) error {
	fmt.Println("deliver: a lone packet of", len(segs[0]), "bytes")
	return nil
}

func (p *printBatches) BatchLimit() (packets, bytes int) { return 4, 0 }

func (p *printBatches) Queue(_ int, segs [][]byte) error {
	p.held = append(p.held, append([][]byte(nil), segs...)) // the slice headers, not the bytes
	return nil
}

func (p *printBatches) Flush(_ int, errs []error) {
	fmt.Println("flush:", len(p.held), "packets, one send")
	clear(p.held)
	p.held = p.held[:0]
}

// A BatchSink holds packets and sends them together: the engine writes its head back, and so
// lets completion unmap, only past packets the sink has flushed. Ten packets published at once
// go in batches of the sink's limit, the last one when the ring has nothing more to read; a
// packet alone on an idle engine is delivered at once.
func ExampleBatchSink() {
	sink := &printBatches{}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	completed := 0
	done := sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { completed++ })
	send := func(n int) {
		for range n {
			tx := new(sdma.TxReq)
			if err := tx.Init(0, 64, done); err != nil {
				panic(err)
			}
			if err := tx.AddKVAddr(dev, make([]byte, 64)); err != nil {
				panic(err)
			}
			if err := e.Send(nil, tx, false); err != nil {
				panic(err)
			}
		}
		if _, err := e.Process(); err != nil {
			panic(err)
		}
	}
	send(10)
	send(1)
	fmt.Println("completed:", completed)
	// Output:
	// flush: 4 packets, one send
	// flush: 4 packets, one send
	// flush: 2 packets, one send
	// deliver: a lone packet of 64 bytes
	// completed: 11
}
