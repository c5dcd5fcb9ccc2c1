package sdma

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestShutdownConcurrentBothDrain: two Shutdowns at once, both without a deadline: the second
// must drain as the first does (the engines go on sending what they hold), not fall through to
// Close and abort it. Before the fix the second Shutdown found the device draining already and
// ran Close at once, so packets still in the ring completed StatusAborted while both Shutdowns
// returned nil.
func TestShutdownConcurrentBothDrain(t *testing.T) {
	engTestNoLeak(t)
	release := make(chan struct{})
	var once sync.Once
	var returned atomic.Int64
	sink := SinkFunc(func(int, [][]byte) error {
		<-release
		returned.Add(1)
		return nil
	})
	dev, err := NewDevice(Config{Sink: sink, RingSize: 64})
	require.NoError(t, err)
	defer once.Do(func() { close(release) })
	e := dev.Engine(0)
	c := &completions{}
	const n = 20
	txs := make([]TxReq, n)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, engTestPattern(64, byte(i)), c)
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	errs := make(chan error, 2)
	go func() { errs <- dev.Shutdown(context.Background()) }()
	for dev.state.Load() != devDraining {
		time.Sleep(50 * time.Microsecond)
	}
	go func() { errs <- dev.Shutdown(context.Background()) }()
	// Give the second Shutdown time to (wrongly) reach Close, which stops the goroutine.
	for i := 0; i < 200 && !e.stopping.Load(); i++ {
		time.Sleep(500 * time.Microsecond)
	}
	once.Do(func() { close(release) })
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.EqualValues(t, n, c.n.Load())
	require.Zero(t, c.dup.Load())
	require.EqualValues(t, n, returned.Load(), "every packet went out")
	for i := range txs {
		st, _ := c.status(&txs[i])
		require.Equal(t, StatusOK, st, "txreq %d: a Shutdown without deadline drains", i)
	}
}

// TestShutdownFrozenEngineReturns: an engine frozen (FreezeNotify) with packets in its ring will
// send none of them until it is unfrozen. Shutdown without a deadline must not wait for that ring
// forever: Close aborts it. Before the fix, Shutdown(context.Background()) never returned.
func TestShutdownFrozenEngineReturns(t *testing.T) {
	for _, manual := range []bool{true, false} {
		release := make(chan struct{})
		sink := SinkFunc(func(int, [][]byte) error {
			<-release
			return nil
		})
		dev, err := NewDevice(Config{Manual: manual, Sink: sink, Engines: 2, RingSize: 64})
		require.NoError(t, err)
		e := dev.Engine(1)
		c := &completions{}
		txs := make([]TxReq, 10)
		for i := range txs {
			engTestBuild(t, dev, &txs[i], 0, engTestPattern(64, byte(i)), c)
			require.NoError(t, e.Send(nil, &txs[i], false))
		}
		close(release) // a goroutine's pass may now send some before the freeze
		require.NoError(t, dev.freezeNotify(false))
		// And one onto the flush list of the frozen engine, which the flush leaves for the sw
		// clean behind the ring (flushDeferred) if the ring still holds packets.
		var late TxReq
		engTestBuild(t, dev, &late, 0, engTestPattern(64, 99), c)
		require.ErrorIs(t, e.Send(nil, &late, false), ErrNotRunning)
		done := make(chan error, 1)
		go func() { done <- dev.Shutdown(context.Background()) }()
		select {
		case err := <-done:
			require.NoError(t, err, "manual %v", manual)
		case <-time.After(10 * time.Second): // a hang guard
			_ = dev.Close()
			t.Fatalf("manual %v: Shutdown waited for a frozen engine's ring", manual)
		}
		require.EqualValues(t, len(txs)+1, c.n.Load(), "manual %v: every txreq completes once", manual)
		require.Zero(t, c.dup.Load())
	}
}

// TestRunningDuringShutdownDrain: Running's doc said "accepts sends"; during a Shutdown's drain
// the engine runs (Running is true) while Send refuses with ErrClosed. The doc now says so.
func TestRunningDuringShutdownDrain(t *testing.T) {
	engTestNoLeak(t)
	release := make(chan struct{})
	dev, err := NewDevice(Config{Sink: SinkFunc(func(int, [][]byte) error { <-release; return nil })})
	require.NoError(t, err)
	e := dev.Engine(0)
	c := &completions{}
	var tx, late TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(64, 1), c)
	require.NoError(t, e.Send(nil, &tx, false))
	done := make(chan error, 1)
	go func() { done <- dev.Shutdown(context.Background()) }()
	for dev.state.Load() != devDraining {
		time.Sleep(50 * time.Microsecond)
	}
	require.True(t, e.Running(), "the engine runs during the drain")
	engTestBuild(t, dev, &late, 0, engTestPattern(64, 2), c)
	require.ErrorIs(t, e.Send(nil, &late, false), ErrClosed, "but refuses new sends")
	require.NoError(t, late.Clean())
	close(release)
	require.NoError(t, <-done)
	require.False(t, e.Running())
	require.EqualValues(t, 1, c.n.Load())
}
