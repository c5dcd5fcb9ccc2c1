package sdma_test

// Close and Shutdown against senders (issue "Exactly once, even through Close"): every txreq an
// engine accepted (Send/SendList returned nil or ErrNotRunning, or SendList counted it) completes
// exactly once before Close returns, and nothing it mapped stays mapped.

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// closeLedger counts the completions of a set of txreqs by index.
type closeLedger struct {
	done      []atomic.Int32
	built     atomic.Int64 // txreqs built, offered to a send
	completed atomic.Int64
	aborted   atomic.Int64 // completions with StatusAborted
	afterEnd  atomic.Int64 // completions after the test declared the device closed
	closed    atomic.Bool
}

func newCloseLedger(n int) *closeLedger { return &closeLedger{done: make([]atomic.Int32, n)} }

// build initialises tx as txreq i of the ledger, with one KV fragment of buf. An add refused
// because the device closed is returned (tx is then clean); any other error fails the test.
func (l *closeLedger) build(t testing.TB, dev *sdma.Device, tx *sdma.TxReq, i int, buf []byte) error {
	err := tx.Init(0, len(buf), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
		if l.closed.Load() {
			l.afterEnd.Add(1)
		}
		if st == sdma.StatusAborted {
			l.aborted.Add(1)
		}
		l.done[i].Add(1)
		l.completed.Add(1)
	}))
	if err == nil {
		err = tx.AddKVAddr(dev, buf)
	}
	if err == nil {
		l.built.Add(1)
	}
	if err != nil {
		_ = tx.Clean()
		if !errors.Is(err, sdma.ErrClosed) {
			t.Errorf("build txreq %d: %v", i, err)
		}
	}
	return err
}

// TestCloseCompletesSendListFlush: a stopped engine takes a long SendList onto its flush list;
// Close comes from another goroutine after the first callbacks. Every txreq SendList counted
// completes exactly once before Close returns, the rest are untouched, and once the caller cleans
// the untaken ones nothing stays mapped.
func TestCloseCompletesSendListFlush(t *testing.T) {
	promNoLeak(t)
	n := 50000
	if testing.Short() {
		n = 5000
	}
	for round := 0; round < 3; round++ {
		iommu := promIOMMU(t)
		dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, RingSize: 64})
		require.NoError(t, err)
		e := dev.Engine(0)
		require.NoError(t, e.Stop())
		led := newCloseLedger(n)
		txs := make([]sdma.TxReq, n)
		buf := make([]byte, 64)
		var l sdma.TxList
		for i := range txs {
			require.NoError(t, led.build(t, dev, &txs[i], i, buf))
			l.PushBack(&txs[i])
		}
		closed := make(chan error, 1)
		go func() {
			for led.completed.Load() < 100 {
				time.Sleep(10 * time.Microsecond)
			}
			closed <- dev.Close()
		}()
		taken, serr := e.SendList(nil, &l)
		require.NoError(t, <-closed)
		led.closed.Store(true)
		if taken < n {
			require.ErrorIs(t, serr, sdma.ErrClosed, "SendList stopped early: the device closed")
		} else {
			require.ErrorIs(t, serr, sdma.ErrNotRunning)
		}
		require.Equal(t, n-taken, l.Len(), "SendList's count and the list agree")
		for i := range txs {
			want := int32(0)
			if i < taken {
				want = 1
			}
			require.Equal(t, want, led.done[i].Load(), "round %d: txreq %d of %d (SendList took %d): completions", round, i, n, taken)
		}
		for tx := l.Front(); tx != nil; tx = l.Next(tx) {
			require.NoError(t, tx.Clean())
		}
		require.Zero(t, iommu.LiveCount(), "mappings left after Close")
		require.Zero(t, led.afterEnd.Load(), "completions after Close returned")
	}
}

// TestCloseConcurrentSendsOnStoppedEngine: goroutines Send in a loop to a stopped engine
// (ErrNotRunning: onto the flush list) while Close comes; every accepted txreq completes once
// before Close returns.
func TestCloseConcurrentSendsOnStoppedEngine(t *testing.T) {
	promNoLeak(t)
	rounds := 400
	if testing.Short() {
		rounds = 60
	}
	const senders, per = 4, 200
	for round := 0; round < rounds; round++ {
		iommu := promIOMMU(t)
		dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, RingSize: 64})
		require.NoError(t, err)
		e := dev.Engine(0)
		require.NoError(t, e.Stop())
		led := newCloseLedger(senders * per)
		accepted := make([]bool, senders*per)
		txs := make([]sdma.TxReq, senders*per)
		buf := make([]byte, 64)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				<-start
				for k := 0; k < per; k++ {
					i := s*per + k
					if led.build(t, dev, &txs[i], i, buf) != nil {
						return
					}
					err := e.Send(nil, &txs[i], false)
					switch {
					case errors.Is(err, sdma.ErrNotRunning):
						accepted[i] = true
					case errors.Is(err, sdma.ErrClosed):
						_ = txs[i].Clean()
					default:
						t.Errorf("Send: %v", err)
						return
					}
				}
			}(s)
		}
		close(start)
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		require.NoError(t, dev.Close())
		led.closed.Store(true)
		wg.Wait()
		for i, acc := range accepted {
			want := int32(0)
			if acc {
				want = 1
			}
			require.Equal(t, want, led.done[i].Load(), "round %d: txreq %d (accepted %v): completions", round, i, acc)
		}
		require.Zero(t, iommu.LiveCount(), "mappings left after Close")
	}
}

// TestCloseShutdownStress: thousands of short-lived devices; on each, senders drive engines that
// are running, stopped, frozen and halting (a fault plan, InjectHalt) through Send, SendList and
// SendWait, and Close (or Shutdown with a short deadline) comes at a random moment. Every
// accepted txreq completes exactly once before Close returns, no refused one completes, and
// nothing stays mapped. Runs under -race in CI (short), and in the -cpu=1,2,4 line.
func TestCloseShutdownStress(t *testing.T) {
	promNoLeak(t)
	devices := 2000
	if testing.Short() {
		devices = 150
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var sum closeStormCounts
	for d := 0; d < devices; d++ {
		c := closeStormDevice(t, rng.Uint64(), d)
		sum.offered += c.offered
		sum.accepted += c.accepted
		sum.aborted += c.aborted
		if t.Failed() {
			return
		}
	}
	t.Logf("%d devices: %d txreqs offered, %d accepted (%d completed aborted), %d refused",
		devices, sum.offered, sum.accepted, sum.aborted, sum.offered-sum.accepted)
	// The storm reached what it is for: closes that refused sends in progress, and closes and
	// halts that aborted accepted ones, beside packets that went out.
	assert.Positive(t, sum.offered-sum.accepted, "no send was refused: Close never came mid-traffic")
	assert.Positive(t, sum.aborted, "nothing completed aborted")
	assert.Positive(t, sum.accepted-sum.aborted, "nothing completed OK")
}

// closeStormCounts are one device's (or the storm's) txreq counts.
type closeStormCounts struct{ offered, accepted, aborted int64 }

// closeStormDevice runs one device of the storm and returns its counts.
func closeStormDevice(t *testing.T, seed uint64, d int) (c closeStormCounts) {
	rng := rand.New(rand.NewPCG(seed, 2))
	iommu := promIOMMU(t)
	const engines = 4
	cfg := sdma.Config{Mapper: iommu, Engines: engines, RingSize: 64, DescIntr: 1 + rng.IntN(16)}
	if rng.IntN(4) == 0 {
		cfg.Completion = sdma.CompletePoll
	}
	plan := sdmatest.FaultPlan{HaltRate: 0.002 * float64(rng.IntN(3)), Seed: seed}
	dev, err := sdma.NewDevice(cfg)
	require.NoError(t, err)
	for i := range engines {
		require.NoError(t, sdmatest.SetFaults(dev.Engine(i), plan))
	}
	// Engine roles: 0 running, 1 stopped, 2 frozen (all frozen by FreezeNotify below if chosen), 3 halting.
	require.NoError(t, dev.Engine(1).Stop())
	frozen := rng.IntN(2) == 0
	if frozen {
		require.NoError(t, sdmatest.RaiseEvent(dev.Engine(2), sdmatest.E80HwFreeze, "storm"))
	}
	const senders, per = 6, 40
	led := newCloseLedger(senders * per)
	acc := make([]atomic.Bool, senders*per)
	txs := make([]sdma.TxReq, senders*per)
	buf := make([]byte, 96)
	ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
	defer cancel()
	var wg sync.WaitGroup
	var stop atomic.Bool
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int, seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(s)))
			e := dev.Engine(s % engines)
			mode := r.IntN(3) // 0 Send, 1 SendList, 2 SendWait
			for k := 0; k < per && !stop.Load(); {
				if mode == 1 {
					k += closeStormList(t, dev, e, led, acc, txs, buf, s*per+k, min(per-k, 1+r.IntN(8)))
					continue
				}
				i := s*per + k
				k++
				if led.build(t, dev, &txs[i], i, buf) != nil {
					return
				}
				var err error
				if mode == 2 {
					err = e.SendWait(ctx, &txs[i])
				} else {
					for err = sdma.ErrBusy; errors.Is(err, sdma.ErrBusy); {
						if err = e.Send(nil, &txs[i], false); errors.Is(err, sdma.ErrBusy) {
							if cfg.Completion == sdma.CompletePoll {
								e.Poll()
							}
							time.Sleep(time.Microsecond)
						}
					}
				}
				closeStormResult(t, &txs[i], i, err, acc)
			}
		}(s, rng.Uint64())
	}
	// The halting engine halts while the others are sent to.
	wg.Add(1)
	go func(r *rand.Rand) {
		defer wg.Done()
		for i := 0; i < 3 && !stop.Load(); i++ {
			err := sdmatest.InjectHalt(dev.Engine(3), sdma.CauseHalt)
			if err != nil && !errors.Is(err, sdma.ErrClosed) && !errors.Is(err, sdma.ErrNotRunning) {
				t.Errorf("InjectHalt: %v", err)
			}
			if cfg.Completion == sdma.CompletePoll {
				for j := 0; j < engines; j++ {
					dev.Engine(j).Poll()
				}
			}
			time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
		}
	}(rand.New(rand.NewPCG(seed, 3)))
	time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
	if rng.IntN(2) == 0 {
		sctx, scancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(300))*time.Microsecond)
		err = dev.Shutdown(sctx)
		scancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown: %v", err)
		}
	} else {
		require.NoError(t, dev.Close())
	}
	led.closed.Store(true)
	atEnd := led.completed.Load()
	stop.Store(true)
	wg.Wait()
	for i := range acc {
		want := int32(0)
		if acc[i].Load() {
			want = 1
			c.accepted++
		}
		if got := led.done[i].Load(); got != want {
			t.Errorf("device %d (seed %d): txreq %d accepted %v: %d completions", d, seed, i, want == 1, got)
			return c
		}
	}
	c.offered, c.aborted = led.built.Load(), led.aborted.Load()
	assert.Equal(t, atEnd, led.completed.Load(), "device %d: completions after Close returned", d)
	assert.Zero(t, dev.UnmapErrors(), "device %d: unmaps failed", d)
	if n := iommu.LiveCount(); n != 0 {
		t.Errorf("device %d (seed %d): %d mappings left after Close: %v", d, seed, n, iommu.Live())
	}
	return c
}

// closeStormList sends txreqs [first, first+n) with SendList and records which it took.
func closeStormList(t *testing.T, dev *sdma.Device, e *sdma.Engine, led *closeLedger, acc []atomic.Bool, txs []sdma.TxReq, buf []byte, first, n int) int {
	var l sdma.TxList
	end := first
	for ; end < first+n; end++ {
		if led.build(t, dev, &txs[end], end, buf) != nil {
			break
		}
		l.PushBack(&txs[end])
	}
	for l.Len() > 0 {
		took, err := e.SendList(nil, &l)
		for i := end - l.Len() - took; i < end-l.Len(); i++ {
			acc[i].Store(true)
		}
		if err == nil || errors.Is(err, sdma.ErrNotRunning) {
			continue
		}
		if errors.Is(err, sdma.ErrBusy) {
			e.Poll()
			time.Sleep(time.Microsecond)
			continue
		}
		assert.ErrorIs(t, err, sdma.ErrClosed) // not require: this runs on a sender goroutine
		break
	}
	for tx := l.Front(); tx != nil; tx = l.Next(tx) {
		_ = tx.Clean()
	}
	return n
}

// closeStormResult records Send's or SendWait's answer for txreq i: accepted, or refused (and
// then cleaned by the caller, as its owner).
func closeStormResult(t *testing.T, tx *sdma.TxReq, i int, err error, acc []atomic.Bool) {
	switch {
	case err == nil, errors.Is(err, sdma.ErrNotRunning):
		acc[i].Store(true)
	case errors.Is(err, sdma.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		_ = tx.Clean()
	default:
		t.Errorf("send txreq %d: %v", i, err)
	}
}
