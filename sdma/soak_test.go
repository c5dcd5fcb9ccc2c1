package sdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
)

// The soak: producers on every engine send packets of random shapes while mapping faults, sink
// failures and stalls, planned random halts, and a chaos goroutine (InjectHalt of random causes,
// Translate faults, Stop/Start, idle, freeze, link down) hit the engines. At the end the ledger
// must balance: every txreq accepted completed exactly once; every OK packet arrived byte-identical
// and in order, except the ones the sink failed on purpose; no aborted packet arrived; no mapping
// and no goroutine is left; the engines' counters agree with the ledger.

// soakRec is one txreq of the soak and its ledger line.
type soakRec struct {
	tx        TxReq
	pid, seq  uint32
	n         int          // payload length
	nd        int          // descriptors, as built (written by the producer before Send)
	accepted  bool         // Send returned nil or ErrNotRunning (written by the producer)
	done      atomic.Int32 // completions seen (must end at 1 if accepted, 0 if not)
	st        atomic.Int32 // the status of the last completion
	delivered atomic.Int32 // times the sink saw the packet
}

// soakPayload is the packet of producer pid's seq-th send: a 8-byte id, then bytes both ends can
// compute (the same-generator trick: no shared oracle).
func soakPayload(pid, seq uint32, n int) []byte {
	b := make([]byte, n)
	var id [8]byte
	binary.LittleEndian.PutUint32(id[:], pid)
	binary.LittleEndian.PutUint32(id[4:], seq)
	copy(b, id[:])
	for i := 8; i < n; i++ {
		b[i] = byte(pid*131 + seq*17 + uint32(i)*7)
	}
	return b
}

// soakSink checks every delivered packet against the ledger as it arrives.
type soakSink struct {
	mu      sync.Mutex
	recs    map[[2]uint32]*soakRec
	lastSeq map[uint32]uint32 // per producer: the last sequence delivered, for the order check
	bad     []string
}

func (s *soakSink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) < 8 {
		s.bad = append(s.bad, fmt.Sprintf("runt packet of %d bytes", len(p)))
		return nil
	}
	pid, seq := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])
	r := s.recs[[2]uint32{pid, seq}]
	if r == nil {
		s.bad = append(s.bad, fmt.Sprintf("unknown packet %d/%d", pid, seq))
		return nil
	}
	want := padded(soakPayload(pid, seq, r.n))
	if string(p) != string(want) {
		s.bad = append(s.bad, fmt.Sprintf("packet %d/%d: %d bytes differ from the %d sent", pid, seq, len(p), len(want)))
	}
	if last, ok := s.lastSeq[pid]; ok && seq <= last {
		s.bad = append(s.bad, fmt.Sprintf("producer %d: packet %d after %d", pid, seq, last))
	}
	s.lastSeq[pid] = seq
	r.delivered.Add(1)
	return nil
}

func (s *soakSink) add(r *soakRec) {
	s.mu.Lock()
	s.recs[[2]uint32{r.pid, r.seq}] = r
	s.mu.Unlock()
}

func TestSoakLedgerBalances(t *testing.T) {
	if testing.Short() {
		runSoak(t, 2, 1000, 2)
		return
	}
	runSoak(t, 4, 5000, 2)
}

func runSoak(t *testing.T, engines, perProducer, producersPerEngine int) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	iommu := engTestIOMMU(t)
	fi := dma.NewFaultInjector(iommu)
	ss := &soakSink{recs: make(map[[2]uint32]*soakRec), lastSeq: make(map[uint32]uint32)}
	fs := &faultSink{Sink: ss, FailRate: 0.01, StallRate: 0.002, Stall: 50 * time.Microsecond, Seed: 5}
	dev, err := NewDevice(Config{
		Mapper: fi, Engines: engines, RingSize: 128, DescIntr: 16, Sink: fs,
		faults: faultPlan{HaltRate: 0.003, Seed: 11},
	})
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = dev.Close()
		}
	}()
	require.NoError(t, fi.FailFraction(0.01, 3)) // after NewDevice: the pad is mapped

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	nprod := engines * producersPerEngine
	recs := make([][]*soakRec, nprod)
	var wg sync.WaitGroup
	var refusedAdd, refusedCtx atomic.Int64
	for pid := 0; pid < nprod; pid++ {
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			e := dev.Engine(pid % engines)
			rng := rand.New(rand.NewPCG(uint64(pid), 77))
			for seq := 0; seq < perProducer; seq++ {
				r := &soakRec{pid: uint32(pid), seq: uint32(seq)}
				recs[pid] = append(recs[pid], r)
				// Shapes: one fragment, a few, or very many small ones (coalesced past 63).
				var frags []int
				switch k := rng.IntN(10); {
				case k < 5:
					frags = []int{8 + rng.IntN(3000)}
				case k < 9:
					for j := 1 + rng.IntN(5); j > 0; j-- {
						frags = append(frags, 1+rng.IntN(700))
					}
					frags[0] += 8
				default:
					for j := 64 + rng.IntN(20); j > 0; j-- {
						frags = append(frags, 1+rng.IntN(9))
					}
					frags[0] += 8
				}
				for _, f := range frags {
					r.n += f
				}
				payload := soakPayload(r.pid, r.seq, r.n)
				var flags Flags
				if rng.IntN(8) == 0 {
					flags = FlagUrgent
				}
				rec := r
				if err := r.tx.Init(flags, r.n, CompleterFunc(func(_ *TxReq, st Status) {
					rec.st.Store(int32(st))
					rec.done.Add(1)
				})); err != nil {
					t.Errorf("Init: %v", err)
					return
				}
				ss.add(r)
				off, addErr := 0, error(nil)
				for _, f := range frags {
					if addErr = r.tx.AddKVAddr(dev, payload[off:off+f]); addErr != nil {
						break
					}
					off += f
				}
				if addErr != nil {
					if !errors.Is(addErr, ErrMapping) {
						t.Errorf("Add: %v", addErr)
						return
					}
					refusedAdd.Add(1) // the failed add cleaned the txreq
					continue
				}
				r.nd = r.tx.NumDesc()
				switch err := e.SendWait(ctx, &r.tx); {
				case err == nil, errors.Is(err, ErrNotRunning):
					r.accepted = true
				case ctx.Err() != nil:
					refusedCtx.Add(1)
					_ = r.tx.Clean()
				default:
					t.Errorf("SendWait: %v", err)
					_ = r.tx.Clean()
					return
				}
			}
		}(pid)
	}

	// Chaos until the producers are done.
	stop := make(chan struct{})
	var chaosWG sync.WaitGroup
	var actions [8]atomic.Int64
	chaosWG.Add(1)
	go func() {
		defer chaosWG.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(50+rng.IntN(250)) * time.Microsecond):
			}
			e := dev.Engine(rng.IntN(engines))
			k := rng.IntN(len(actions))
			actions[k].Add(1)
			var err error
			switch k {
			case 0, 1, 2:
				err = e.injectHalt(CauseNone + 1 + HaltCause(rng.IntN(int(NumHaltCauses)-1)))
				if errors.Is(err, ErrNotRunning) {
					err = nil
				}
			case 3:
				fi.FailTranslate(true) // the next packet read faults: CauseMemRead
				time.Sleep(100 * time.Microsecond)
				fi.FailTranslate(false)
			case 4:
				err = e.Stop()
				time.Sleep(100 * time.Microsecond)
				err = errors.Join(err, e.Start())
			case 5:
				err = errors.Join(e.event(sm.E70GoIdle, "chaos"), e.Start())
			case 6:
				err = errors.Join(e.event(sm.E80HwFreeze, "chaos"), e.event(sm.E81HwFrozen, "chaos"),
					e.event(sm.E82HwUnfreeze, "chaos"))
			case 7:
				err = errors.Join(e.event(sm.E85LinkDown, "chaos"), e.event(sm.E81HwFrozen, "chaos"),
					e.event(sm.E82HwUnfreeze, "chaos"), e.Start())
			}
			if err != nil {
				t.Errorf("chaos %d: %v", k, err)
			}
			// Every action but 3 (whose halt the engine's goroutine meets and recovers from on its
			// own, maybe while we look) returns with the engine running again.
			if s := e.state(); s != sm.S99Running && k != 3 {
				t.Errorf("chaos %d left engine %d in %v", k, e.Index(), s)
			}
		}
	}()
	wg.Wait()
	close(stop)
	chaosWG.Wait()
	fi.FailTranslate(false)
	require.NoError(t, fi.FailFraction(0, 0))
	require.NoError(t, ctx.Err(), "the producers took too long")

	// Everything accepted completes on its own (the engines run); then Close.
	accepted := 0
	for _, rs := range recs {
		for _, r := range rs {
			if r.accepted {
				accepted++
			}
		}
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, rs := range recs {
			for _, r := range rs {
				if r.accepted && r.done.Load() > 0 {
					n++
				}
			}
		}
		return n == accepted
	}, 30*time.Second, time.Millisecond, "accepted txreqs did not all complete")
	// A halt's clean completes its txreqs (aborted) before the engine's goroutine restarts the
	// engine and counts the recovery: the last halt may still be recovering when the last txreq
	// completes. Every halt must recover; wait for it, then read the counters.
	require.Eventually(t, func() bool {
		for i := 0; i < engines; i++ {
			e := dev.Engine(i)
			if s := e.Stats(); e.state() != sm.S99Running || s.Faults != s.Recoveries {
				return false
			}
		}
		return true
	}, 30*time.Second, time.Millisecond, "every halt of a running engine recovered")
	var stats []EngineStats
	for i := 0; i < engines; i++ {
		stats = append(stats, dev.Engine(i).Stats())
	}
	require.NoError(t, dev.Close())
	closed = true

	// The ledger.
	var ok, aborted, okNotDelivered, okBytes, okDescs uint64
	for _, rs := range recs {
		for _, r := range rs {
			d := r.done.Load()
			if !r.accepted {
				assert.Zero(t, d, "txreq %d/%d was not accepted but completed", r.pid, r.seq)
				assert.Zero(t, r.delivered.Load(), "txreq %d/%d was not accepted but arrived", r.pid, r.seq)
				continue
			}
			if !assert.EqualValues(t, 1, d, "txreq %d/%d completions", r.pid, r.seq) {
				continue
			}
			switch Status(r.st.Load()) {
			case StatusOK:
				ok++
				okBytes += uint64(len(padded(make([]byte, r.n))))
				okDescs += uint64(r.nd)
				if r.delivered.Load() == 0 {
					okNotDelivered++
				}
				assert.LessOrEqual(t, r.delivered.Load(), int32(1))
			case StatusAborted:
				aborted++
				assert.Zero(t, r.delivered.Load(), "txreq %d/%d aborted but arrived", r.pid, r.seq)
			default:
				t.Errorf("txreq %d/%d: status %v", r.pid, r.seq, Status(r.st.Load()))
			}
		}
	}
	ss.mu.Lock()
	assert.Empty(t, ss.bad)
	ss.mu.Unlock()
	assert.Equal(t, fs.Failed(), okNotDelivered, "every OK packet arrived, except those the sink failed")
	assert.Empty(t, iommu.Live(), "IOMMU leak report")

	var sum EngineStats
	for _, s := range stats {
		sum.Completed += s.Completed
		sum.Aborted += s.Aborted
		sum.Faults += s.Faults
		sum.Recoveries += s.Recoveries
		sum.SinkErrors += s.SinkErrors
		sum.Packets += s.Packets
		sum.Bytes += s.Bytes
		sum.Descs += s.Descs
		var byCause uint64
		for _, h := range s.Halts {
			byCause += h
		}
		assert.Equal(t, s.Faults, byCause, "halts by cause add up")
	}
	assert.Equal(t, ok, sum.Completed, "Completed counters = OK in the ledger")
	assert.Equal(t, aborted, sum.Aborted, "Aborted counters = aborted in the ledger (before Close, none was left)")
	assert.Equal(t, fs.Failed(), sum.SinkErrors)
	assert.Equal(t, ok, sum.Packets, "every packet the hardware sent completed OK")
	assert.Equal(t, okBytes, sum.Bytes, "Bytes counters = the padded lengths of the OK packets")
	assert.Equal(t, okDescs, sum.Descs, "Descs counters = the descriptors of the OK packets")
	assert.Equal(t, sum.Faults, sum.Recoveries, "every halt of a running engine recovered")
	assert.NotZero(t, sum.Faults)
	t.Logf("accepted %d (ok %d, aborted %d), refused at add %d, ctx %d; halts %d, sink failures %d, chaos %v",
		accepted, ok, aborted, refusedAdd.Load(), refusedCtx.Load(), sum.Faults, fs.Failed(), func() (a [8]int64) {
			for i := range actions {
				a[i] = actions[i].Load()
			}
			return
		}())
}
