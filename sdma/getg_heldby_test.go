package sdma

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGetg: where the build has getg (amd64 and arm64), it names the calling goroutine: the
// same value on each call of one goroutine, non-zero, and a different one for each of several
// goroutines running at once.
func TestGetg(t *testing.T) {
	if !haveGetg {
		t.Skip("no getg on this build")
	}
	me := getg()
	require.NotZero(t, me)
	require.Equal(t, me, getg())
	require.Equal(t, uint64(me), gid())
	const n = 8
	gs := make(chan uintptr, n)
	hold := make(chan struct{})
	for range n { // all alive at once: the runtime cannot give one's g to another
		go func() {
			g := getg()
			if g != getg() {
				g = 0
			}
			gs <- g
			<-hold
		}()
	}
	seen := map[uintptr]bool{me: true}
	for range n {
		g := <-gs
		require.NotZero(t, g)
		require.False(t, seen[g], "two running goroutines share a g")
		seen[g] = true
	}
	close(hold)
}

// TestManualCloseOtherDeviceWhileHeld: a completion callback of Manual engine A's direct
// Process calls Close of another device, whose Manual engine B's lock another goroutine holds
// (its Process, blocked in B's Sink). The Close is not the caller's own pass: it must wait for
// B's lock and close B's device, not be refused. Where the build has getg the lock knows its
// holder (ticketLock.heldBy), so the answer is exact; builds without it search the caller's
// stack for a Manual pass, which cannot tell A's from B's, and refuse (host.go: manualPass).
// Every txreq of both devices completes exactly once.
func TestManualCloseOtherDeviceWhileHeld(t *testing.T) {
	if !haveGetg {
		t.Skip("without getg the own-pass check cannot tell A's pass from B's (documented)")
	}
	in, release := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	sinkB := SinkFunc(func(int, [][]byte) error {
		if blocked.CompareAndSwap(false, true) {
			close(in)
			<-release
		}
		return nil
	})
	devB, err := NewDevice(Config{Manual: true, Sink: sinkB})
	require.NoError(t, err)
	eB := devB.Engine(0)
	cB := &completions{}
	txsB := goexitTxs(t, devB, eB, nil, 2, cB)
	heldB := runReturned(func() { _, _ = eB.Process() })
	dumpGuard(t, in, "B's sink never ran")
	l := &eB.hwMu
	base := atomic.LoadUint32(&l.next) - l.turn.Load() // B's holder's ticket, or none (the bias)

	devA, err := NewDevice(Config{Manual: true})
	require.NoError(t, err)
	eA := devA.Engine(0)
	closed := make(chan error, 1)
	var calls atomic.Int32
	cA := &completions{}
	cb := CompleterFunc(func(tx *TxReq, st Status) {
		cA.Complete(tx, st)
		if calls.Add(1) == 1 {
			closed <- devB.Close()
		}
	})
	txsA := goexitTxs(t, devA, eA, nil, 2, cb)
	passA := runReturned(func() {
		_, _ = eA.Process()
		eA.Poll()
	})
	// The Close either answered at once (a refusal) or waits for B's lock with a ticket of its
	// own: only then does B's holder go on.
	for atomic.LoadUint32(&l.next)-l.turn.Load() == base && len(closed) == 0 {
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, dumpGuard(t, closed, "B's Close never returned"), "Close of another device from A's pass")
	require.True(t, dumpGuard(t, passA, "A's Process/Poll did not return"))
	require.True(t, dumpGuard(t, heldB, "B's Process did not return"))
	require.EqualValues(t, len(txsB), cB.n.Load(), "B's txreqs")
	require.Zero(t, cB.dup.Load())
	require.Equal(t, devClosed, devB.state.Load(), "B's device is closed")
	require.EqualValues(t, len(txsA), cA.n.Load(), "A's txreqs")
	requireManualGoesOn(t, devA, eA, cA)
	closeGuarded(t, devA)
	require.Zero(t, cA.dup.Load())
}
