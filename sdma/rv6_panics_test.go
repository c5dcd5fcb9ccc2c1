package sdma

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallbackPanicsConcurrentExact: Stats.CallbackPanics counts every callback panic and Goexit
// exactly when two goroutines count at once. Each round, two goroutines each run a Poll of a
// Manual engine whose completion callback calls runtime.Goexit (counted under the engine's lock,
// callerExited) with its txreq's iowait drained, whose drained callback then runs late with no
// lock held (lateDrained) and panics at the same moment as the other goroutine's: 4 counts a
// round. The counter was a relaxed.Counter (one writer at a time), which two such adds at once
// could lose one of; it is an atomic counter now. Run under -race too.
func TestCallbackPanicsConcurrentExact(t *testing.T) {
	const rounds = 100
	dev, err := NewDevice(Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	require.NoError(t, err)
	e := dev.Engine(0)
	c := &completions{}
	cb := CompleterFunc(func(tx *TxReq, st Status) {
		c.Complete(tx, st)
		runtime.Goexit()
	})
	for r := range rounds {
		var both sync.WaitGroup
		both.Add(2)
		drained := func(*IOWait) {
			both.Done()
			both.Wait() // the other goroutine's drained callback is here too
			panic("drained")
		}
		var ws [2]IOWait
		for i := range ws {
			ws[i].Init(nil, nil, drained)
			tx := new(TxReq)
			engTestBuild(t, dev, tx, 0, engTestPattern(64, byte(r)), cb)
			require.NoError(t, e.Send(&ws[i], tx, false))
		}
		_, err := e.Process()
		require.NoError(t, err)
		var ended [2]chan bool
		for i := range ended {
			ended[i] = runReturned(func() { e.Poll() })
		}
		for i := range ended {
			require.False(t, dumpGuard(t, ended[i], "a Poll did not end"), "its callback did not exit")
		}
	}
	require.EqualValues(t, 4*rounds, e.Stats().CallbackPanics)
	closeGuarded(t, dev)
	require.EqualValues(t, 2*rounds, c.n.Load())
	require.Zero(t, c.dup.Load())
}
