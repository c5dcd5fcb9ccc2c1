package sdma_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// qp is a verbs-style sender: its lock guards its sends and its IOWait's parked txreqs, as
// qp->s_lock does in hfi1.
type qp struct {
	mu     sync.Mutex
	wait   sdma.IOWait
	engine *sdma.Engine
	woken  chan struct{}
}

func newQP(e *sdma.Engine) *qp {
	q := &qp{engine: e, woken: make(chan struct{}, 1)}
	q.wait.Init(
		// The kernel-style sleeper: under the engine's wait lock, retry if the ring moved,
		// else keep the txreq on TxHead and park (qp.c iowait_sleep).
		func(e *sdma.Engine, w *sdma.IOWait, tx *sdma.TxReq, seq uint32, pktsSent bool) error {
			return e.ParkOrRetry(w, tx, seq, pktsSent)
		},
		// The wakeup runs on the completion goroutine: it must not block.
		func(*sdma.IOWait, int) {
			select {
			case q.woken <- struct{}{}:
			default:
			}
		},
		nil)
	return q
}

// send submits tx, verbs-style: ErrBusy means the txreq is parked on TxHead and will be resent
// after the wakeup; ErrNotRunning counts as sent (the txreq completes aborted).
func (q *qp) send(tx *sdma.TxReq) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.engine.Send(&q.wait, tx, true)
	if errors.Is(err, sdma.ErrNotRunning) {
		return nil
	}
	return err
}

// resend sends the parked txreqs after a wakeup.
func (q *qp) resend() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for tx := q.wait.TxHead().PopFront(); tx != nil; tx = q.wait.TxHead().PopFront() {
		if err := q.engine.Send(&q.wait, tx, false); err != nil {
			return err // parked again (ErrBusy): wait for the next wakeup
		}
	}
	return nil
}

// A verbs-style sender with a kernel-style sleeper, on a manual engine so that the output is
// deterministic: the ring fills up, the sender parks, the hardware and the completion pass free
// the ring and wake it, and it resends.
func ExampleEngine_Send() {
	sink := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{RingSize: 64, Manual: true, Sink: sink})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	q := newQP(dev.Engine(0))

	done := 0
	count := sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { done++ }) // one func for all
	txs := make([]sdma.TxReq, 40)
	parked := 0
	for i := range txs {
		hdr, payload := []byte("HDR:"), []byte(fmt.Sprintf("packet %02d", i)) // 4 + 9 bytes: padded
		tx := &txs[i]
		_ = tx.Init(0, len(hdr)+len(payload), count)
		_ = tx.AddKVAddr(dev, hdr)
		_ = tx.AddKVAddr(dev, payload)
		if err := q.send(tx); errors.Is(err, sdma.ErrBusy) {
			parked++
			_, _ = q.engine.Process() // the chip runs; its idle interrupt completes and wakes
			<-q.woken
			if err := q.resend(); err != nil {
				panic(err)
			}
		}
	}
	_, _ = q.engine.Process()
	_ = q.wait.Drain(context.Background())
	pkts := sink.Packets(0)
	fmt.Printf("parked %d time(s), %d packets, %d completions\n", parked, len(pkts), done)
	fmt.Printf("%q\n", pkts[39])
	// Output:
	// parked 1 time(s), 40 packets, 40 completions
	// "HDR:packet 39\x00\x00\x00"
}

// waitPacket is a packet of ExampleEngine_SendWait: the txreq first, then what its completion
// needs. It is its own sdma.Completer, so a completion costs no closure.
type waitPacket struct {
	sdma.TxReq
	wg *sync.WaitGroup
}

// Complete runs once, on the engine's completion pass.
func (p *waitPacket) Complete(_ *sdma.TxReq, st sdma.Status) {
	if st != sdma.StatusOK {
		panic(st)
	}
	p.wg.Done()
}

// A blocking sender: SendWait waits on a context for room in the ring; the engine's own goroutine
// gathers the packets and completes them.
func ExampleEngine_SendWait() {
	sink := &sdmatest.DiscardSink{}
	dev, err := sdma.NewDevice(sdma.Config{RingSize: 64, Sink: sink})
	if err != nil {
		panic(err)
	}
	e := dev.Engine(0)
	var wg sync.WaitGroup
	buf := make([]byte, 1000*1024)
	pkts := make([]waitPacket, 1000)
	for i := range pkts {
		payload := buf[i*1024 : (i+1)*1024]
		p := &pkts[i]
		p.wg = &wg
		wg.Add(1)
		_ = p.Init(0, len(payload), p)
		_ = p.AddKVAddr(dev, payload)
		if err := e.SendWait(context.Background(), &p.TxReq); err != nil {
			panic(err)
		}
	}
	wg.Wait()
	if err := dev.Close(); err != nil {
		panic(err)
	}
	fmt.Println(sink.Packets(), "packets,", sink.Bytes(), "bytes")
	// Output:
	// 1000 packets, 1024000 bytes
}
