package pio_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/pio"
)

// fillContext sends one-credit packets until the context has no credits; it returns the seq to
// park with (taken before the allocation that failed) and the send function.
func fillContext(sc *pio.SendContext) (uint32, func() error) {
	data := make([]byte, 56) // with the PBC, one 64-byte block: one credit
	dw := 2 + len(data)/4
	send := func() error {
		b, err := sc.BufferAlloc(dw, nil)
		if err != nil {
			return err
		}
		return b.Copy(pio.CreatePBC(0, 0, 0, uint32(dw)), data)
	}
	for {
		seq := sc.ReleaseSeq()
		err := send()
		if errors.Is(err, pio.ErrNoCredits) {
			return seq, send
		}
		if err != nil {
			panic(err)
		}
	}
}

// A producer that found no credits before it sent anything in its pass parks with pktsSent
// false (pio_wait with ps->pkts_sent false): it goes to the head of the wait list, ahead of one
// that sent packets, and its starved count grows, which ranks its wake-up first.
func ExampleSendContext_QueueWaitSent() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: &countSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	seq, _ := fillContext(sc)

	var busy, starting pio.Waiter
	busy.Init(func(*pio.Waiter) { fmt.Println("woken: the producer that sent") })
	starting.Init(func(*pio.Waiter) { fmt.Println("woken: the producer that sent nothing") })
	sc.QueueWaitSent(&busy, seq, true) // as QueueWait: at the tail
	sc.QueueWaitSent(&starting, seq, false)
	fmt.Println("starved:", busy.Starved(), starting.Starved())
	sc.Process() // the chip returns the credits: the release pass wakes both
	// Output:
	// starved: 0 1
	// woken: the producer that sent nothing
	// woken: the producer that sent
}

// A Waiter with a priority parks at the head of the wait list, and the release pass wakes the
// batch's highest priority<<4 + starved count first, then the others in list order
// (sc_piobufavail): here the list is starving, urgent, plain, and urgent (priority 1: key 16)
// outranks starving (key 1).
func ExampleWaiter_SetPriority() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: &countSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	seq, send := fillContext(sc)

	var plain, urgent, starving pio.Waiter
	for _, w := range []struct {
		w    *pio.Waiter
		name string
	}{{&plain, "plain"}, {&urgent, "urgent"}, {&starving, "starving"}} {
		w.w.Init(func(*pio.Waiter) { fmt.Println("woken:", w.name) })
	}
	urgent.SetPriority(1)
	sc.QueueWait(&plain, seq)               // the tail
	sc.QueueWait(&urgent, seq)              // a priority: the head
	sc.QueueWaitSent(&starving, seq, false) // sent nothing: the head
	sc.Process()
	fmt.Println("retry:", send())
	// Output:
	// woken: urgent
	// woken: starving
	// woken: plain
	// retry: <nil>
}

// The starved count grows by one at each park with pktsSent false and goes back to 0 at a park
// with pktsSent true (iowait_queue's starved_cnt): a producer woken again and again before it
// could send ranks higher at each wake.
func ExampleWaiter_Starved() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: &countSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	var w pio.Waiter
	w.Init(func(*pio.Waiter) {})
	for _, sent := range []bool{false, false, false, true} {
		sc.QueueWaitSent(&w, sc.ReleaseSeq(), sent)
		fmt.Print(w.Starved(), " ")
		sc.CancelWait(&w)
	}
	fmt.Println()
	// Output: 1 2 3 0
}

// A producer whose send pass sent packets and ended without waiting (its work done) clears its
// starved count, as hfi1_do_send's iowait_starve_clear does: its next wait ranks from 0 again.
// A pass that sent nothing leaves the count.
func ExampleWaiter_StarveClear() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: &countSink{}, Manual: true})
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	var w pio.Waiter
	w.Init(func(*pio.Waiter) {})
	for range 2 { // two passes that found no credits before sending anything
		sc.QueueWaitSent(&w, sc.ReleaseSeq(), false)
		sc.CancelWait(&w)
	}
	fmt.Print(w.Starved(), " ")
	w.StarveClear(false) // a pass that sent nothing
	fmt.Print(w.Starved(), " ")
	w.StarveClear(true) // a pass that sent packets and did not wait
	fmt.Println(w.Starved())
	// Output: 2 2 0
}
