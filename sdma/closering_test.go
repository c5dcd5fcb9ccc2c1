package sdma

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendRefusedByClosedRingFlushes: a producer past the gate check whose engine is stopped
// before it reserves finds the ring closed (the sw clean closed it, without waiting for the
// producer), looks at the gate again and takes the ErrNotRunning path: the txreq goes to the
// flush list and completes aborted exactly once, and nothing of it reached the ring. Start opens
// the ring again.
func TestSendRefusedByClosedRingFlushes(t *testing.T) {
	engTestNoLeak(t)
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	tx, c, sent, release := sendHeldAt(t, dev, e, func(h *engineTestHooks, hold func()) { h.admitted = hold })

	require.NoError(t, e.Stop(), "the sw clean does not wait for a producer that has not reserved")
	assert.True(t, e.ring.Closed(), "stopped: the ring is closed")
	close(release)
	require.ErrorIs(t, <-sent, ErrNotRunning)
	assert.True(t, e.ring.Empty(), "nothing of the refused send reached the ring")
	assert.Zero(t, e.ring.Tail())
	e.Poll() // the flush
	require.EqualValues(t, 1, c.n.Load())
	c.mu.Lock()
	assert.Equal(t, StatusAborted, c.seen[tx])
	c.mu.Unlock()

	require.NoError(t, e.Start())
	assert.False(t, e.ring.Closed(), "running: the ring is open")
	c2 := sendsAgain(t, dev, e)
	assert.Zero(t, c.dup.Load()+c2.dup.Load(), "completed twice")
	require.NoError(t, dev.Close())
	assert.EqualValues(t, 1, c.n.Load())
}

// TestSendRaceStopHaltCloseConcurrent: producers Send (and SendList) while a chaos goroutine
// stops and starts the engine and injects halts, a driver goroutine runs Process and Poll, and
// Close comes in the middle. Every txreq whose send was accepted (nil, or ErrNotRunning: flushed)
// completes exactly once, with StatusOK or StatusAborted; every refused one (ErrClosed, ErrBusy
// left to the caller) never completes; and Close returns with nothing outstanding. Run under
// -race at -cpu 1,2,4.
func TestSendRaceStopHaltCloseConcurrent(t *testing.T) {
	engTestNoLeak(t)
	producers, perProducer := 4, 400
	if testing.Short() {
		perProducer = 150
	}
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	txs := make([][]TxReq, producers)
	for p := range txs {
		txs[p] = make([]TxReq, perProducer)
		for i := range txs[p] {
			engTestBuild(t, dev, &txs[p][i], 0, make([]byte, 4+4*(i%5)), &c)
		}
	}
	accepted := make([][]bool, producers)
	var sends atomic.Int64
	var wg sync.WaitGroup
	for p := range producers {
		accepted[p] = make([]bool, perProducer)
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; {
				tx := &txs[p][i]
				var err error
				if p%2 == 0 {
					err = e.Send(nil, tx, true)
				} else {
					var l TxList
					l.PushBack(tx)
					_, err = e.SendList(nil, &l)
				}
				sends.Add(1)
				switch {
				case err == nil || errors.Is(err, ErrNotRunning):
					accepted[p][i] = true
				case errors.Is(err, ErrBusy):
					runtime.Gosched()
					continue // the ring is full: tx is ours, send it again
				case errors.Is(err, ErrClosed):
				default:
					t.Errorf("producer %d, txreq %d: %v", p, i, err)
				}
				i++
			}
		}(p)
	}
	stop := make(chan struct{})
	var acts atomic.Int64 // chaos acts done
	var bg sync.WaitGroup
	engTestLoop(stop, &bg, func(int) { // the driver: the hardware model and the completion pass
		_, _ = e.Process()
		e.Poll()
		runtime.Gosched()
	})
	engTestLoop(stop, &bg, func(i int) { // chaos: stop and start, halts
		switch i % 3 {
		case 0:
			_ = e.Stop()
			runtime.Gosched()
			_ = e.Start()
		case 1:
			_ = e.injectHalt(CauseMemRead)
		}
		acts.Add(1)
		runtime.Gosched()
	})
	for sends.Load() < int64(producers*perProducer/2) || acts.Load() < 30 {
		runtime.Gosched()
	}
	require.NoError(t, dev.Close()) // in the middle of the sends
	wg.Wait()
	close(stop)
	bg.Wait()

	n := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range txs {
		for i := range txs[p] {
			st, done := c.seen[&txs[p][i]]
			switch {
			case accepted[p][i] && !done:
				t.Errorf("producer %d, txreq %d: accepted, never completed", p, i)
			case accepted[p][i] && st != StatusOK && st != StatusAborted:
				t.Errorf("producer %d, txreq %d: status %v", p, i, st)
			case !accepted[p][i] && done:
				t.Errorf("producer %d, txreq %d: refused, yet completed", p, i)
			}
			if accepted[p][i] {
				n++
			}
		}
	}
	assert.Zero(t, c.dup.Load(), "completed twice")
	assert.EqualValues(t, n, c.n.Load())
	assert.Positive(t, n)
	t.Logf("%d of %d sends accepted, %d chaos acts", n, producers*perProducer, acts.Load())
}

// sendHeldAt sends one 8-byte txreq on e from another goroutine and returns once the send is
// inside the test hook that set installs (set gets the hook's body): the send goes on when
// release is closed, and its result arrives on sent. The hook is removed before it returns (the
// hook ran: no other send reads it).
func sendHeldAt(t *testing.T, dev *Device, e *Engine, set func(h *engineTestHooks, hold func())) (tx *TxReq, c *completions, sent <-chan error, release chan struct{}) {
	in := make(chan struct{})
	release = make(chan struct{})
	e.test = &engineTestHooks{}
	set(e.test, func() { close(in); <-release })
	tx, c = new(TxReq), new(completions)
	engTestBuild(t, dev, tx, 0, make([]byte, 8), c)
	res := make(chan error, 1)
	go func() { res <- e.Send(nil, tx, false) }()
	<-in
	*e.test = engineTestHooks{}
	return tx, c, res, release
}

// sendsAgain sends one 8-byte txreq on the Manual engine e, processes and polls it, and checks
// that it completed once: the engine runs again.
func sendsAgain(t *testing.T, dev *Device, e *Engine) *completions {
	var c completions
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
	require.NoError(t, e.Send(nil, &tx, false))
	_, err := e.Process()
	require.NoError(t, err)
	e.Poll()
	assert.EqualValues(t, 1, c.n.Load())
	return &c
}
