package pio_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/pio"
)

type countSink struct{ packets int }

func (s *countSink) Deliver(int, [][]byte) error { s.packets++; return nil }

// A producer that found no credits parks on the context's wait list (pio_wait) and is woken by
// the release pass that returns credits, after which its allocation succeeds. ReleaseSeq, taken
// before the allocation that failed, closes the sleep window: credits that come back between the
// failure and QueueWait make QueueWait return false, and the producer retries at once.
func ExampleSendContext_QueueWait() {
	sink := &countSink{}
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: sink, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	data := make([]byte, 56) // with the PBC, one 64-byte block: one credit
	dw := 2 + len(data)/4
	send := func() error {
		b, err := sc.BufferAlloc(dw, nil)
		if err != nil {
			return err
		}
		return b.Copy(pio.CreatePBC(0, 0, 0, uint32(dw)), data)
	}

	var w pio.Waiter
	w.Init(func(*pio.Waiter) { fmt.Println("woken") }) // must not block: a pass runs it
	for sent := 0; ; sent++ {
		seq := sc.ReleaseSeq()
		err := send()
		if errors.Is(err, pio.ErrNoCredits) {
			fmt.Println("no credits after", sent, "packets; parked:", sc.QueueWait(&w, seq))
			break
		}
		if err != nil {
			panic(err)
		}
	}
	sc.Process() // the chip sends the packets and returns their credits: the wake-up runs
	fmt.Println("delivered:", sink.packets, "retry:", send())
	// Output:
	// no credits after 18 packets; parked: true
	// woken
	// delivered: 18 retry: <nil>
}
