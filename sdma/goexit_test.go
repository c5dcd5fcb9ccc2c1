package sdma

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangGuard waits for ch (a hang guard, not a timing assumption) or fails with what.
func hangGuard[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
	panic("unreachable")
}

// closeGuarded closes dev on another goroutine and requires it to return nil.
func closeGuarded(t *testing.T, dev *Device) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- dev.Close() }()
	require.NoError(t, hangGuard(t, closed, "Close did not return: a lock left held by the exited goroutine"))
}

// requireGoexitHalt checks the engine's record of a Goexit: a *HaltError that names it, and the
// engine not running.
func requireGoexitHalt(t *testing.T, e *Engine, what string) {
	t.Helper()
	h := e.HaltCause()
	require.ErrorIs(t, h, ErrHalted)
	require.ErrorContains(t, h, what)
	require.ErrorContains(t, h, "runtime.Goexit")
	require.False(t, e.Running())
}

// goexitTxs sends n txreqs of 64 bytes to e, packet i's first byte i; each must be accepted
// (nil) or flushed (ErrNotRunning: the engine halted meanwhile). cb completes them.
func goexitTxs(t *testing.T, dev *Device, e *Engine, w *IOWait, n int, cb Completer) []*TxReq {
	t.Helper()
	txs := make([]*TxReq, n)
	for i := range txs {
		txs[i] = new(TxReq)
		buf := engTestPattern(64, 0)
		buf[0] = byte(i)
		engTestBuild(t, dev, txs[i], 0, buf, cb)
		if err := e.Send(w, txs[i], false); err != nil {
			require.ErrorIs(t, err, ErrNotRunning)
		}
	}
	return txs
}

// goexitSinkRun opens a device of one goroutine engine whose Sink calls runtime.Goexit in packet
// k, sends it n txreqs (goexitTxs, completed by c) and waits for the engine's goroutine to end.
func goexitSinkRun(t *testing.T, n, k int, c *completions) (*Device, *Engine, []*TxReq) {
	sink := SinkFunc(func(_ int, segs [][]byte) error {
		if int(segs[0][0]) == k {
			runtime.Goexit()
		}
		return nil
	})
	dev, err := NewDevice(Config{Sink: sink})
	require.NoError(t, err)
	e := dev.Engine(0)
	txs := goexitTxs(t, dev, e, nil, n, c)
	hangGuard(t, e.done, "the engine's goroutine did not end")
	return dev, e, txs
}

// requireGoexitStatuses checks that the txreqs before packet k, which the sink returned from,
// completed StatusOK, and the one it exited in and the rest StatusAborted.
func requireGoexitStatuses(t *testing.T, c *completions, txs []*TxReq, k int) {
	t.Helper()
	for i, tx := range txs {
		want := StatusOK
		if i >= k {
			want = StatusAborted
		}
		require.Equal(t, want, c.seen[tx], "txreq %d", i)
	}
}

// TestSinkGoexitDoesNotWedgeClose: a Sink that calls runtime.Goexit (t.FailNow or require in a
// test's sink does) on the engine's goroutine ends it in the middle of a pass, with hwMu held.
// The engine halts with a recorded cause, the lock is released, and Close returns; every txreq
// completes exactly once: StatusOK for the packets the sink returned from, StatusAborted for the
// one it exited in and the rest (in the ring, or flushed after the halt).
func TestSinkGoexitDoesNotWedgeClose(t *testing.T) {
	const n, k = 8, 3 // the sink exits in packet k
	c := &completions{}
	dev, e, txs := goexitSinkRun(t, n, k, c)
	requireGoexitHalt(t, e, "the Sink's Deliver")
	require.ErrorIs(t, e.Start(), ErrHalted, "no goroutine: the engine does not run again")
	var late TxReq
	engTestBuild(t, dev, &late, 0, engTestPattern(64, 1), c)
	require.ErrorIs(t, e.Send(nil, &late, false), ErrNotRunning, "flushed: completes aborted at Close")
	closeGuarded(t, dev)
	require.EqualValues(t, n+1, c.n.Load(), "every txreq completes")
	require.Zero(t, c.dup.Load(), "none twice")
	requireGoexitStatuses(t, c, txs, k)
	require.Equal(t, StatusAborted, c.seen[&late])
}

// goexitBatchSink is a BatchSink that calls runtime.Goexit in the method named exit on its call
// number at (counting that method's calls), and records the packets it finished with: Deliver
// returned, or a Flush returned for the queued ones.
type goexitBatchSink struct {
	exit   string
	at     int
	calls  map[string]int
	queued []byte
	sent   map[byte]bool
}

func (s *goexitBatchSink) BatchLimit() (int, int) { return 4, 0 }

func (s *goexitBatchSink) call(m string) {
	if s.calls == nil {
		s.calls, s.sent = map[string]int{}, map[byte]bool{}
	}
	s.calls[m]++
	if m == s.exit && s.calls[m] == s.at {
		runtime.Goexit()
	}
}

func (s *goexitBatchSink) Deliver(_ int, segs [][]byte) error {
	s.call("Deliver")
	s.sent[segs[0][0]] = true
	return nil
}

func (s *goexitBatchSink) Queue(_ int, segs [][]byte) error {
	s.call("Queue")
	s.queued = append(s.queued, segs[0][0])
	return nil
}

func (s *goexitBatchSink) Flush(_ int, _ []error) {
	s.call("Flush")
	for _, p := range s.queued {
		s.sent[p] = true
	}
	s.queued = s.queued[:0]
}

// TestProcessSinkGoexit: a Sink called by a caller's Process that calls runtime.Goexit ends the
// caller's goroutine; hwMu is not left held: the engine halts with a recorded cause (Process says
// ErrNotRunning), Stop cleans it and Start runs it again, and Close returns. Every txreq completes
// once, StatusOK exactly when the sink finished with its packet (Deliver returned, or the Flush
// of its batch). Deliver, and a BatchSink's Queue and Flush.
func TestProcessSinkGoexit(t *testing.T) {
	for _, tc := range []struct {
		name string
		sink *goexitBatchSink
		lim  bool // batching on
	}{
		{"Deliver", &goexitBatchSink{exit: "Deliver", at: 3}, false},
		{"Queue", &goexitBatchSink{exit: "Queue", at: 6}, true},
		{"Flush", &goexitBatchSink{exit: "Flush", at: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sink Sink = tc.sink
			if !tc.lim {
				sink = SinkFunc(tc.sink.Deliver) // no BatchSink: every packet goes to Deliver
			}
			dev, err := NewDevice(Config{Manual: true, Sink: sink})
			require.NoError(t, err)
			e := dev.Engine(0)
			c := &completions{}
			txs := goexitTxs(t, dev, e, nil, 12, c)
			ended := runReturned(func() {
				_, _ = e.Process()
			})
			require.False(t, hangGuard(t, ended, "Process's goroutine did not end"), "Process returned: the sink did not exit")
			requireGoexitHalt(t, e, "the Sink's "+tc.name)
			_, err = e.Process()
			require.ErrorIs(t, err, ErrNotRunning, "halted: hwMu is free and the pass refuses")
			stopped := make(chan error, 1)
			go func() { stopped <- e.Stop() }()
			require.NoError(t, hangGuard(t, stopped, "Stop did not return"))
			require.EqualValues(t, len(txs), c.n.Load(), "Stop completed every txreq")
			for i, tx := range txs {
				want := StatusAborted
				if tc.sink.sent[byte(i)] {
					want = StatusOK
				}
				require.Equal(t, want, c.seen[tx], "txreq %d", i)
			}
			require.NotEmpty(t, tc.sink.sent, "some packets went out before the exit")
			tc.sink.exit = "" // the engine runs again
			require.NoError(t, e.Start())
			more := goexitTxs(t, dev, e, nil, 2, c)
			_, err = e.Process()
			require.NoError(t, err)
			closeGuarded(t, dev)
			require.EqualValues(t, len(txs)+len(more), c.n.Load())
			require.Zero(t, c.dup.Load())
			for _, tx := range more {
				require.Equal(t, StatusOK, c.seen[tx])
			}
		})
	}
}

// TestCallbackGoexitDoesNotWedgeClose: a completion, drained or wakeup callback that calls
// runtime.Goexit on the engine's goroutine ends it in a completion pass, holding hwMu, headMu and
// (completion, drained) the head seqcount's write section. All are released, the engine halts
// with a recorded cause, and Close returns; every txreq completes exactly once, the iowait's
// count drops (Drain returns), and a wakeup the exit kept from running still runs.
func TestCallbackGoexitDoesNotWedgeClose(t *testing.T) {
	t.Run("completion", func(t *testing.T) {
		dev, err := NewDevice(Config{})
		require.NoError(t, err)
		e := dev.Engine(0)
		var w IOWait
		var drained atomic.Int32
		w.Init(nil, nil, func(*IOWait) { drained.Add(1) })
		c := &completions{}
		const n, k = 6, 2
		var exitTx atomic.Pointer[TxReq]
		cb := CompleterFunc(func(tx *TxReq, st Status) {
			c.Complete(tx, st)
			if tx == exitTx.Load() {
				runtime.Goexit()
			}
		})
		txs := make([]*TxReq, n)
		for i := range txs {
			txs[i] = new(TxReq)
			engTestBuild(t, dev, txs[i], 0, engTestPattern(64, byte(i)), cb)
		}
		exitTx.Store(txs[k])
		for _, tx := range txs {
			if err := e.Send(&w, tx, false); err != nil {
				require.ErrorIs(t, err, ErrNotRunning)
			}
		}
		hangGuard(t, e.done, "the engine's goroutine did not end")
		requireGoexitHalt(t, e, "a completion callback")
		require.Equal(t, StatusOK, c.seen[txs[k]], "its callback ran, with StatusOK")
		closeGuarded(t, dev)
		require.EqualValues(t, n, c.n.Load(), "every txreq completes")
		require.Zero(t, c.dup.Load(), "none twice")
		for i, tx := range txs {
			if i <= k {
				require.Equal(t, StatusOK, c.seen[tx], "txreq %d", i)
			}
		}
		drainErr := make(chan error, 1)
		go func() { drainErr <- w.Drain(context.Background()) }()
		require.NoError(t, hangGuard(t, drainErr, "Drain did not return: the exited completion's count was not dropped"))
		require.Positive(t, drained.Load())
	})
	t.Run("drained", func(t *testing.T) {
		dev, err := NewDevice(Config{})
		require.NoError(t, err)
		e := dev.Engine(0)
		var w IOWait
		w.Init(nil, nil, func(*IOWait) { runtime.Goexit() })
		c := &completions{}
		txs := goexitTxs(t, dev, e, &w, 1, c)
		hangGuard(t, e.done, "the engine's goroutine did not end")
		requireGoexitHalt(t, e, "a drained callback")
		closeGuarded(t, dev)
		require.EqualValues(t, 1, c.n.Load())
		require.Equal(t, StatusOK, c.seen[txs[0]])
	})
}

// TestCallbackGoexitInFlush: a completion callback that calls runtime.Goexit in the engine
// goroutine's flush of the flush list: the txreqs the flush had taken and not completed go back
// to the list, and Close completes them (aborted), each once.
func TestCallbackGoexitInFlush(t *testing.T) {
	dev, err := NewDevice(Config{})
	require.NoError(t, err)
	e := dev.Engine(0)
	require.NoError(t, e.Stop())
	c := &completions{}
	cb := goexitOnce(c)
	e.hwMu.Lock() // the goroutine's pass waits: the flush takes all four at once
	txs := goexitTxs(t, dev, e, nil, 4, cb)
	e.hwMu.Unlock()
	hangGuard(t, e.done, "the engine's goroutine did not end")
	require.ErrorContains(t, e.HaltCause(), "a completion callback")
	require.EqualValues(t, 1, c.n.Load(), "the flush stopped at the first")
	closeGuarded(t, dev)
	require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes")
	require.Zero(t, c.dup.Load(), "none twice")
	for i, tx := range txs {
		require.Equal(t, StatusAborted, c.seen[tx], "txreq %d", i)
	}
}

// TestCallbackGoexitWakeupOnEngineGoroutine: a wakeup that calls runtime.Goexit on the engine's
// goroutine: the engine halts, Close returns, and the other waiter of the batch is still woken
// (late, with no lock held, before the goroutine ends).
func TestCallbackGoexitWakeupOnEngineGoroutine(t *testing.T) {
	dev, err := NewDevice(Config{})
	require.NoError(t, err)
	e := dev.Engine(0)
	var w1, w2 IOWait
	var mu sync.Mutex
	var order []int
	w1.Init(nil, func(*IOWait, int) {
		mu.Lock()
		order = append(order, 1)
		mu.Unlock()
		runtime.Goexit()
	}, nil)
	w2.Init(nil, func(*IOWait, int) {
		mu.Lock()
		order = append(order, 2)
		mu.Unlock()
	}, nil)
	for _, w := range []*IOWait{&w1, &w2} {
		ok, err := e.QueueWait(w, 1, true)
		require.NoError(t, err)
		require.True(t, ok)
	}
	c := &completions{}
	goexitTxs(t, dev, e, nil, 1, c) // its completion pass wakes both
	hangGuard(t, e.done, "the engine's goroutine did not end")
	requireGoexitHalt(t, e, "a wakeup callback")
	mu.Lock()
	assert.Equal(t, []int{1, 2}, order, "w2 woken after w1's exit")
	mu.Unlock()
	closeGuarded(t, dev)
	require.EqualValues(t, 1, c.n.Load())
}

// TestSinkGoexitConcurrentSenders: four producers send while the engine's Sink calls
// runtime.Goexit at its 300th packet. Every txreq is seen exactly once: StatusOK exactly when the
// sink returned for its packet, StatusAborted otherwise (the packet it exited in, the ring behind
// it, and what the producers sent after the halt, flushed), and Close returns.
func TestSinkGoexitConcurrentSenders(t *testing.T) {
	const producers, per, exitAt = 4, 200, 300
	sent := map[uint16]bool{} // written by the sink (one packet at a time), read after the goroutine ended
	calls := 0
	sink := SinkFunc(func(_ int, segs [][]byte) error {
		if calls++; calls == exitAt {
			runtime.Goexit()
		}
		sent[uint16(segs[0][0])<<8|uint16(segs[0][1])] = true
		return nil
	})
	dev, err := NewDevice(Config{Sink: sink, RingSize: 64})
	require.NoError(t, err)
	e := dev.Engine(0)
	c := &completions{}
	txs := make([][]*TxReq, producers)
	var wg sync.WaitGroup
	for p := range producers {
		txs[p] = make([]*TxReq, per)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				tx := new(TxReq)
				buf := engTestPattern(64, 0)
				buf[0], buf[1] = byte(p), byte(i)
				if err := tx.Init(0, len(buf), c); err != nil {
					t.Error(err)
					return
				}
				if err := tx.AddKVAddr(dev, buf); err != nil {
					t.Error(err)
					return
				}
				for {
					err := e.Send(nil, tx, false)
					if err == ErrBusy {
						runtime.Gosched() // ring full: the engine (or the halt) makes room
						continue
					}
					if err != nil && err != ErrNotRunning {
						t.Error(err)
						return
					}
					break
				}
				txs[p][i] = tx
			}
		}()
	}
	wg.Wait()
	hangGuard(t, e.done, "the engine's goroutine did not end")
	requireGoexitHalt(t, e, "the Sink's Deliver")
	closeGuarded(t, dev)
	require.EqualValues(t, producers*per, c.n.Load(), "every txreq completes")
	require.Zero(t, c.dup.Load(), "none twice")
	require.Len(t, sent, exitAt-1)
	for p := range producers {
		for i, tx := range txs[p] {
			want := StatusAborted
			if sent[uint16(p)<<8|uint16(i)] {
				want = StatusOK
			}
			require.Equal(t, want, c.seen[tx], "producer %d txreq %d", p, i)
		}
	}
}

// TestGoneEngineStopAndShutdown: after a Sink's Goexit ended the engine's goroutine, Stop cleans
// the engine (every txreq completes once: the finished packets OK, the rest aborted) and takes it
// down, Start is refused with the recorded *HaltError (no goroutine to run it), and Shutdown
// does not wait for the engine to drain (it never will): it closes at once.
func TestGoneEngineStopAndShutdown(t *testing.T) {
	const n, k = 6, 2
	c := &completions{}
	dev, e, txs := goexitSinkRun(t, n, k, c)
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }()
	require.NoError(t, hangGuard(t, stopped, "Stop did not return"))
	require.EqualValues(t, n, c.n.Load(), "Stop completed every txreq")
	requireGoexitStatuses(t, c, txs, k)
	require.ErrorIs(t, e.Start(), ErrHalted)
	require.ErrorIs(t, e.injectHalt(CauseHalt), ErrNotRunning)
	var late TxReq
	engTestBuild(t, dev, &late, 0, engTestPattern(64, 1), c)
	require.ErrorIs(t, e.Send(nil, &late, false), ErrNotRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	require.NoError(t, dev.Shutdown(ctx), "Shutdown waited for the gone engine to drain")
	require.EqualValues(t, n+1, c.n.Load())
	require.Zero(t, c.dup.Load())
	require.Equal(t, StatusAborted, c.seen[&late])
}

// TestCallerCallbackGoexit: a completion callback that calls runtime.Goexit in a pass that a call
// runs on its caller's goroutine (a direct Process or Poll of a Manual engine, Stop's sw clean,
// ProgressSchedule, SendWait's drive) ends that goroutine; the pass's locks are released (the
// call's deferred unlock, or the handler), the Goexit is recorded (a CallbackError with Goexit),
// and the engine goes on: the next pass completes the rest, and Close returns. Every txreq
// completes once.
func TestCallerCallbackGoexit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		run  func(e *Engine)
	}{
		{"Process", Config{Manual: true}, func(e *Engine) { _, _ = e.Process() }},
		{"Poll", Config{Manual: true, Completion: CompletePoll}, func(e *Engine) {
			_, _ = e.Process()
			e.Poll()
		}},
		{"Stop", Config{Completion: CompletePoll}, func(e *Engine) { _ = e.Stop() }}, // the goroutine delivers, Stop completes
		{"StopManual", Config{Manual: true}, func(e *Engine) { _ = e.Stop() }},
		{"Close", Config{Completion: CompletePoll}, func(e *Engine) { _ = e.Device().Close() }}, // the next Close does the rest
		{"CloseManual", Config{Manual: true}, func(e *Engine) { _ = e.Device().Close() }},
		{"ProgressSchedule", Config{Manual: true, Completion: CompletePoll, RingSize: 64}, func(e *Engine) {
			_, _ = e.Process()
			e.ProgressSchedule()
		}},
		{"SendWait", Config{Manual: true}, func(e *Engine) {
			var tx TxReq
			_ = tx.Init(0, 64, nil)
			_ = tx.AddKVAddr(e.Device(), engTestPattern(64, 9))
			_ = e.SendWait(context.Background(), &tx) // the ring is full: it drives Process
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(tc.cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			var w IOWait
			var drained atomic.Int32
			w.Init(nil, nil, func(*IOWait) { drained.Add(1) })
			c := &completions{}
			cb := goexitOnce(c)
			var txs []*TxReq
			for {
				tx := new(TxReq)
				engTestBuild(t, dev, tx, 0, engTestPattern(64, byte(len(txs))), cb)
				if err := e.Send(&w, tx, false); err == ErrBusy {
					break
				} else {
					require.NoError(t, err)
				}
				if txs = append(txs, tx); len(txs) == 16 && tc.name != "SendWait" {
					break // SendWait: fill the ring
				}
			}
			ended := runReturned(func() {
				tc.run(e)
			})
			require.False(t, hangGuard(t, ended, tc.name+"'s goroutine did not end"), "the callback did not exit")
			var ce *CallbackError
			require.ErrorAs(t, e.CallbackError(), &ce)
			require.True(t, ce.Goexit)
			require.Equal(t, "completion", ce.Callback)
			require.EqualValues(t, 1, c.n.Load(), "the pass stopped at the first")
			closeGuarded(t, dev)
			require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes")
			require.Zero(t, c.dup.Load(), "none twice")
			drainErr := make(chan error, 1)
			go func() { drainErr <- w.Drain(context.Background()) }()
			require.NoError(t, hangGuard(t, drainErr, "Drain did not return"))
		})
	}
}

// TestCallerWakeupGoexit: a wakeup that calls runtime.Goexit in a Manual engine's Process: the
// other waiter of its batch is still woken (late, on the exiting goroutine), the locks are
// released, and the engine goes on.
func TestCallerWakeupGoexit(t *testing.T) {
	dev, err := NewDevice(Config{Manual: true})
	require.NoError(t, err)
	e := dev.Engine(0)
	var w1, w2 IOWait
	woken := make(chan int, 4)
	w1.Init(nil, func(*IOWait, int) { woken <- 1; runtime.Goexit() }, nil)
	w2.Init(nil, func(*IOWait, int) { woken <- 2 }, nil)
	for _, w := range []*IOWait{&w1, &w2} {
		ok, err := e.QueueWait(w, 1, true)
		require.NoError(t, err)
		require.True(t, ok)
	}
	c := &completions{}
	goexitTxs(t, dev, e, nil, 1, c)
	ended := runReturned(func() {
		_, _ = e.Process() // its completion pass wakes both: w1's wakeup exits
	})
	require.False(t, hangGuard(t, ended, "Process's goroutine did not end"))
	require.Equal(t, 1, <-woken)
	require.Equal(t, 2, <-woken, "w2 woken after w1's exit")
	var ce *CallbackError
	require.ErrorAs(t, e.CallbackError(), &ce)
	require.True(t, ce.Goexit)
	require.Equal(t, "wakeup", ce.Callback)
	goexitTxs(t, dev, e, nil, 1, c)
	n, err := e.Process()
	require.NoError(t, err, "the engine goes on")
	require.Equal(t, 1, n)
	closeGuarded(t, dev)
	require.EqualValues(t, 2, c.n.Load())
	require.Zero(t, c.dup.Load())
}

// goexitOnce is a completion callback that records each completion in c and calls
// runtime.Goexit in the first one it runs.
func goexitOnce(c *completions) CompleterFunc {
	var exited atomic.Bool
	return func(tx *TxReq, st Status) {
		c.Complete(tx, st)
		if exited.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	}
}

// runReturned runs f on a goroutine of its own; the channel says whether f returned (false: f,
// or a callback it ran, called runtime.Goexit).
func runReturned(f func()) chan bool {
	ended := make(chan bool, 1)
	go func() {
		returned := false
		defer func() { ended <- returned }()
		f()
		returned = true
	}()
	return ended
}
