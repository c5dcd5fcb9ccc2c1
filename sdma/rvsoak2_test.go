package sdma_test

// Fault-schedule soak of two devices sharing one mapper (review rvsoak): the soaks so far run
// one device. Here two devices, each of a random completion mode (interrupt, poll, Manual),
// share one IOMMU and one txreq slab; producers send lists to an engine of each (parking with
// DeferOrRetry), a txreq completed on one device is built for the other next; packet memory is
// registered with both and a chaos goroutine deregisters and registers it on either with
// packets in flight, while each device has its own chaos (halts, Stop/Start, freezes) and
// planned halts. One device closes (Close or Shutdown) at a random point while the other goes
// on; then the other closes. The sink fails some packets on purpose and records every packet it
// is handed, so the ledger can ask more than exactly-once: a txreq completes StatusOK if and
// only if its packet reached the sink (Close's and the sw clean's promise), no packet is read
// after its txreq completed, the device that went on is untouched by the other's Close, every
// Deregister returns, nothing stays mapped, no unmap fails, no goroutine is left.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// rv2Sink records every packet it is handed in the ledger (sent), and fails every failP-th id.
type rv2Sink struct {
	l     *rvLedger
	failP int64
}

func (s *rv2Sink) Deliver(_ int, segs [][]byte) error {
	s.l.see(segs, "Deliver", true)
	if id := int64(binary.LittleEndian.Uint64(segs[0][:8])); s.failP != 0 && id%s.failP == 0 {
		return errors.New("rvsoak: sink failure")
	}
	return nil
}

func runRVTwoDeviceSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x2de5))
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := &rvLedger{done: map[int64]int{}, taken: map[int64]bool{}, status: map[int64]sdma.Status{}, sent: map[int64]bool{}}
	slab, err := alloc.NewSlab(alloc.SlabConfig[rvTx]{ObjectsPerSlab: 64})
	if err != nil {
		t.Fatal(err)
	}
	l.slab = slab
	desc := fmt.Sprintf("seed %d:", seed)
	var devs [2]*sdma.Device
	var selfDriven [2]bool
	var manual [2]bool
	var planned [2][]bool // HaltRate draws every cause, CauseMemRead too
	// One seed in two maps through a FaultInjector: map failures, and Translate faults
	// (CauseMemRead halts) from device 1's chaos.
	var mapper dma.Mapper = iommu
	var fi *dma.FaultInjector
	if rng.IntN(2) == 0 {
		fi = dma.NewFaultInjector(iommu)
		mapper = fi
		desc += " injector"
	}
	for d := range devs {
		cfg := sdma.Config{
			Engines:  1 + rng.IntN(2),
			RingSize: []int{64, 128, 512}[rng.IntN(3)],
			Mapper:   mapper,
			Sink:     &rv2Sink{l: l, failP: []int64{0, 17}[rng.IntN(2)]},
		}
		switch rng.IntN(3) {
		case 1:
			cfg.Completion = sdma.CompletePoll
			selfDriven[d] = true
		case 2:
			cfg.Manual = true
			manual[d], selfDriven[d] = true, true
			if rng.IntN(2) == 0 {
				cfg.Completion = sdma.CompletePoll
			}
		}
		devs[d], err = sdma.NewDevice(cfg)
		if err != nil {
			t.Fatal(err)
		}
		planned[d] = make([]bool, devs[d].NumEngines())
		for i := range devs[d].NumEngines() {
			if rng.IntN(2) == 0 {
				planned[d][i] = true
				_ = sdmatest.SetFaults(devs[d].Engine(i), sdmatest.FaultPlan{HaltRate: 0.005, Seed: seed + uint64(d)})
			}
		}
		desc += fmt.Sprintf(" dev%d{engines %d ring %d completion %v manual %v}", d, cfg.Engines, cfg.RingSize, cfg.Completion, cfg.Manual)
	}
	if fi != nil {
		if err := fi.FailFraction(0.01, int64(seed)); err != nil { // after NewDevice: the pads are mapped
			t.Fatal(err)
		}
	}
	first := rng.IntN(2) // the device that closes first
	// Close (0), Shutdown (1), or both at once (2: a Shutdown with a short deadline racing a Close).
	how := [2]int{rng.IntN(3), rng.IntN(3)}
	desc += fmt.Sprintf(" first %d how %v", first, how)
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }

	bufs := newRVBufs(4)
	for _, bf := range bufs {
		for d := range devs {
			if rng.IntN(3) != 0 {
				bf.reg[d], _ = devs[d].Register(bf.b)
			}
		}
	}
	var stopped atomic.Bool
	var lateWakeups atomic.Int64 // wakeups and drained callbacks after their device's Close returned
	var pw, bg sync.WaitGroup
	nprod := 2 + rng.IntN(3)
	for p := range nprod {
		pw.Add(1)
		go func() {
			defer pw.Done()
			r := rand.New(rand.NewPCG(seed, uint64(p)+10))
			var eng [2]*sdma.Engine
			var ws [2]sdma.IOWait
			woke := make(chan struct{}, 1)
			for d := range devs {
				eng[d] = devs[d].Engine(p % devs[d].NumEngines())
				ws[d].Init(func(e *sdma.Engine, w *sdma.IOWait, tx *sdma.TxReq, seq uint32, pktsSent bool) error {
					return e.DeferOrRetry(w, tx, seq, pktsSent)
				}, func(*sdma.IOWait, int) {
					if l.closedDev[d].Load() {
						lateWakeups.Add(1) // Close wakes every parked waiter before it returns
					}
					select {
					case woke <- struct{}{}:
					default:
					}
				}, func(*sdma.IOWait) {
					if l.closedDev[d].Load() {
						lateWakeups.Add(1)
					}
				})
			}
			var gone [2]bool // the device refused with ErrClosed
			for !stopped.Load() && !(gone[0] && gone[1]) {
				d := r.IntN(2)
				if gone[d] {
					d = 1 - d
				}
				dev, e, w := devs[d], eng[d], &ws[d]
				if r.IntN(30) == 0 { // the device's Close ends it too
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					if err := w.Drain(ctx); err != nil {
						fail("producer %d: Drain on device %d: %v (busy %d)", p, d, err, w.Busy())
					}
					cancel()
				}
				var list sdma.TxList
				for range 1 + r.IntN(24) {
					tx, err := l.build(dev, r, bufs, false, 3, 200, fail)
					if tx == nil && err == nil {
						return
					}
					if tx != nil {
						tx.dev = d
					}
					if err != nil { // the add cleaned tx
						if !errors.Is(err, sdma.ErrClosed) && !errors.Is(err, sdma.ErrMapping) {
							fail("AddKVAddr: %v", err)
						}
						break
					}
					list.PushBack(&tx.TxReq)
				}
				l.take(&list, true)
				for list.Len() > 0 {
					_, err := e.SendList(w, &list)
					if err == nil && list.Len() > 0 {
						continue
					}
					if err == nil || errors.Is(err, sdma.ErrNotRunning) {
						break
					}
					if errors.Is(err, sdma.ErrBusy) {
						select {
						case <-woke:
						case <-time.After(20 * time.Second):
							fail("producer %d: parked on device %d and never woken (waiting %v, state %v)", p, d, e.Waiting(w), sdmatest.EngineState(e))
							w.Unqueue()
							l.take(&list, false)
							l.giveBack(&list)
							return
						}
						continue
					}
					if !errors.Is(err, sdma.ErrClosed) {
						fail("producer %d: SendList: %v", p, err)
					}
					gone[d] = true
					break
				}
				l.take(&list, false) // what is left was refused: ours again
				l.giveBack(&list)
			}
		}()
	}
	for d := range devs {
		if selfDriven[d] {
			sdmatest.DriveEngines(devs[d], manual[d], &stopped, &bg)
		}
	}
	for d := range devs {
		ch := sdmatest.Chaos{
			Rand: rand.New(rand.NewPCG(seed, 1234+uint64(d))),
			Cause: func(c sdma.HaltCause) sdma.HaltCause {
				if c == sdma.CauseMemRead || c == sdma.CauseLengthMismatch {
					c = sdma.CauseHalt
				}
				return c
			},
		}
		if d == 0 {
			ch.Memory = func(r *rand.Rand) {
				d := r.IntN(2)
				bufs[r.IntN(len(bufs))].churn(devs[d], d, r, fail)
			}
		}
		if d == 1 && fi != nil {
			ch.Memory = func(r *rand.Rand) { // the next packet read faults: CauseMemRead
				fi.FailTranslate(true)
				time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
				fi.FailTranslate(false)
			}
		}
		if err := ch.Run(devs[d], &stopped, &bg); err != nil {
			t.Fatal(err)
		}
	}
	closeDev := func(d int) {
		done := make(chan error, 2)
		calls := 1
		if how[d] != 1 {
			go func() { done <- devs[d].Close() }()
		}
		if how[d] != 0 {
			wait := 30 * time.Second
			if how[d] == 2 {
				calls, wait = 2, time.Duration(1+rng.IntN(500))*time.Microsecond
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				err := devs[d].Shutdown(ctx)
				if how[d] == 2 && errors.Is(err, context.DeadlineExceeded) {
					err = nil // cut short: it ran Close
				}
				done <- err
			}()
		}
		for range calls {
			select {
			case err := <-done:
				if err != nil {
					fail("device %d: Close/Shutdown: %v", d, err)
				}
			case <-time.After(40 * time.Second):
				t.Fatalf("%s: device %d: Close/Shutdown did not return", desc, d)
			}
		}
		l.closedDev[d].Store(true)
	}
	time.Sleep(dur)
	closeDev(first)
	// The other device goes on: its packets still complete and arrive.
	before := devs[1-first].Engine(0).Stats().Completed
	deadline := time.Now().Add(20 * time.Second)
	for devs[1-first].Engine(0).Stats().Completed == before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if devs[1-first].Engine(0).Stats().Completed == before {
		fail("device %d completed nothing after device %d closed", 1-first, first)
	}
	time.Sleep(dur / 2)
	closeDev(1 - first)
	l.closed.Store(true)
	stopped.Store(true)
	pw.Wait()
	bg.Wait()
	for d := range devs {
		if err := devs[d].Close(); err != nil {
			fail("device %d: Close again: %v", d, err)
		}
	}
	for _, bf := range bufs {
		for d := range devs {
			bf.deregister(devs[d], d, fail)
		}
	}
	if fi != nil {
		fi.FailTranslate(false)
	}
	for d := range devs {
		for i := range devs[d].NumEngines() {
			st := devs[d].Engine(i).Stats()
			if n := st.Halts[sdma.CauseMemRead] + st.Halts[sdma.CauseLengthMismatch]; n != 0 && !planned[d][i] && fi == nil {
				fail("device %d engine %d: %d halts reading memory: %v", d, i, n, devs[d].Engine(i).HaltCause())
			}
		}
	}
	l.verify(iommu, true, fail)
	if n := lateWakeups.Load(); n != 0 {
		fail("%d wakeups or drained callbacks after their device's Close or Shutdown returned", n)
	}
	for d := range devs {
		if n := devs[d].UnmapErrors(); n != 0 {
			fail("device %d: %d unmap errors", d, n)
		}
	}
	if testing.Verbose() {
		for d := range devs {
			for i := range devs[d].NumEngines() {
				t.Logf("device %d engine %d: %+v", d, i, devs[d].Engine(i).Stats())
			}
		}
		t.Logf("%s: %d txreqs, %d taken", desc, l.nextID.Load(), len(l.taken))
	}
}

// TestRVSoakTwoDevicesSharedMapper: see runRVTwoDeviceSoak.
func TestRVSoakTwoDevicesSharedMapper(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runRVTwoDeviceSoak)
}
