package sdma

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/membarrier"
)

// TestLockHeldBy: ticketLock.heldBy names the holder exactly, with a ticket and through the bias,
// also while another goroutine waits to revoke the bias (the bias pointer is nil then), and is
// false for every other goroutine and after Unlock.
func TestLockHeldBy(t *testing.T) {
	if !haveGetg {
		t.Skip("heldBy needs getg")
	}
	other := func(l *ticketLock) bool {
		ch := make(chan bool)
		go func() { ch <- l.heldBy(getg()) }()
		return <-ch
	}
	for _, biasable := range []bool{false, true} {
		if biasable && !membarrier.Available() {
			continue
		}
		l := &ticketLock{biasable: biasable}
		me := getg()
		require.False(t, l.heldBy(me))
		for range 4 { // a biasable lock is granted to its one user
			l.Lock()
			require.True(t, l.heldBy(me), "biasable %v", biasable)
			require.False(t, other(l))
			l.Unlock()
			require.False(t, l.heldBy(me))
		}
		require.Equal(t, biasable, l.held == nil && l.bias.Load() != nil)
		l.Lock()
		got := make(chan bool)
		go func() { // waits for the hold (revoking the bias first, if any), then holds
			l.Lock()
			g := getg()
			got <- l.heldBy(g) && !l.heldBy(me)
			l.Unlock()
		}()
		want := uint32(2) // the other goroutine's ticket is out, behind ours or the bias
		if l.held != nil {
			want = 1
		}
		for atomic.LoadUint32(&l.next)-l.turn.Load() < want {
			runtime.Gosched()
		}
		require.True(t, l.heldBy(me), "while a waiter revokes or waits")
		l.Unlock()
		require.True(t, <-got)
		require.False(t, l.heldBy(me))
	}
}
