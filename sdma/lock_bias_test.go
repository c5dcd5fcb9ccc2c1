package sdma

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/membarrier"
)

// TestLockBiasChosen: an engine's locks are biasable exactly where the bias can work (getg and
// the process-wide barrier: linux/amd64 outside -race and purego), and a Manual engine driven by
// one goroutine takes its hardware lock through the bias: after a few passes the bias names
// that goroutine and Process holds no ticket.
func TestLockBiasChosen(t *testing.T) {
	dev, err := NewDevice(Config{Manual: true, Engines: 2})
	require.NoError(t, err)
	defer dev.Close()
	want := canBias && membarrier.Available()
	for i := range dev.NumEngines() {
		e := dev.Engine(i)
		assert.Equal(t, want, e.hwMu.biasable, "engine %d hwMu", i)
		assert.Equal(t, want, e.headMu.biasable, "engine %d headMu", i)
	}
	if !want {
		t.Skip("no bias on this build")
	}
	e := dev.Engine(0)
	for range 8 {
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
	}
	r := e.hwMu.bias.Load()
	require.NotNil(t, r, "bias granted")
	assert.Equal(t, getg(), r.g, "to this goroutine")
	next := e.hwMu.next
	for range 8 {
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
	}
	assert.Equal(t, next, e.hwMu.next, "no ticket taken by the owner")
	assert.Zero(t, r.busy.Load(), "released")
}

// BenchmarkTicketLock: an uncontended Lock and Unlock by one goroutine, with the bias
// (bias=on, where the build has it) and without (bias=off: the ticket's atomic add).
func BenchmarkTicketLock(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "bias=off"
		if on {
			name = "bias=on"
		}
		b.Run(name, func(b *testing.B) {
			if on && !(canBias && membarrier.Available()) {
				b.Skip("no bias on this build")
			}
			var l ticketLock
			l.biasable = on
			n := 0
			for b.Loop() {
				l.Lock()
				n++
				l.Unlock()
			}
			if n != b.N {
				b.Fatal(n, b.N)
			}
		})
	}
}

// TestLockBiasStress: goroutines take one biasable lock, some in long runs (which earn the bias),
// some now and then (which revoke it), with TryLock too; a plain counter and a plain "inside"
// flag, touched only under the lock, catch two holders at once (the flag) and a lost update (the
// count). With the bias on, the owner's side uses plain stores only, so this is the test of the
// Dekker pair; -race (where the lock is not biasable) runs it on the ticket lock.
func TestLockBiasStress(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "bias=off", true: "bias=on"}[on], func(t *testing.T) {
			if on && !(canBias && membarrier.Available()) {
				t.Skip("no bias on this build")
			}
			var l ticketLock
			l.biasable = on
			var (
				count   int
				inside  bool
				revoked bool // a revocation's need seen by enter (under the lock)
				bad     atomic.Int32
			)
			// enter is the critical section: long enough (a few hundred instructions) for a
			// second holder to overlap it, and it keeps the bias cheap to earn back (need: every
			// holder may write the holders' fields), so that the bias changes hands thousands of
			// times.
			enter := func() {
				if inside {
					bad.Add(1)
				}
				inside = true
				n := 32
				if count%16 == 0 {
					n = 4096 // now and then a hold longer than a barrier
				}
				for range n {
					count++
					if !inside {
						bad.Add(1)
					}
				}
				count -= n - 1
				if count%4 == 0 {
					revoked = revoked || l.need != 0 // a revocation set it (the evidence, before the reset)
					l.need = 0
				}
				inside = false
			}
			const workers, run = 4, 64
			rounds := 2000
			if testing.Short() {
				rounds = 300
			}
			var wg sync.WaitGroup
			total := 0
			for w := range workers {
				wg.Add(1)
				n := 0
				for r := range rounds {
					if w%2 == 0 || r%8 == 0 {
						n += run
					} else {
						n++
					}
				}
				total += n
				go func() {
					defer wg.Done()
					for r := range rounds {
						k := 1
						if w%2 == 0 || r%8 == 0 {
							k = run
						}
						for i := range k {
							if i%3 == 2 {
								for !l.TryLock() {
									runtime.Gosched()
								}
							} else {
								l.Lock()
							}
							enter()
							l.Unlock()
						}
						runtime.Gosched()
					}
				}()
			}
			wg.Wait()
			l.Lock()
			defer l.Unlock()
			assert.Zero(t, bad.Load(), "two holders at once")
			assert.Equal(t, total, count, "updates")
			if on {
				// need is set by each revocation, and reset by enter now and then: the last
				// enter may have reset it, so enter's own record counts too.
				assert.True(t, revoked || l.need != 0, "the bias was revoked at least once")
			}
		})
	}
}

// TestSinkProgressScheduleBiased: a Manual engine's Sink calls ProgressSchedule while the caller's
// Process holds the hardware lock (its head lock too), through the bias after the first passes.
// ProgressSchedule must find the lock held and do nothing, as it does without the bias: a nested
// hold would let its Unlock release Process's hold, and Process's own Unlock then move the turn
// past every ticket given out, hanging the next goroutine that takes a ticket (found in review).
// After the rounds a Stop from another goroutine takes a ticket and must return.
func TestSinkProgressScheduleBiased(t *testing.T) {
	var e *Engine
	var nested atomic.Int32
	cs := &captureSink{}
	cs.OnPacket = func(int, []byte) {
		if e.ProgressSchedule() {
			nested.Add(1)
		}
	}
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64, Sink: cs})
	e = dev.Engine(0)
	var c completions
	for range 6 {
		for range 9 { // more than an eighth of the ring in process: ProgressSchedule would run
			tx := new(TxReq)
			engTestBuild(t, dev, tx, 0, make([]byte, 8), &c)
			require.NoError(t, e.Send(nil, tx, false))
		}
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
		require.Equal(t, atomic.LoadUint32(&e.hwMu.next), e.hwMu.turn.Load(), "every ticket released once")
	}
	assert.Zero(t, nested.Load(), "ProgressSchedule ran a pass inside the Sink")
	if e.hwMu.biasable {
		r := e.hwMu.bias.Load()
		assert.True(t, r != nil && r.g == getg(), "the test's goroutine owns the bias")
	}
	done := make(chan error, 1)
	go func() { done <- e.Stop() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("Stop from another goroutine hangs: next %d turn %d", atomic.LoadUint32(&e.hwMu.next), e.hwMu.turn.Load())
	}
}
