package verbs

// Fault-schedule soak of flows in order across both paths (review rvsoak): the soak before it
// (rvsoak_test.go) sends into a discarding sink, so it checks each packet's Done but not the
// promise Send exists for: each flow's packets reach the sink in order, whichever path each
// took. Here every packet names its flow and its place in it, sizes straddle the PIO threshold
// so that flows switch paths often, and the sink checks order, bytes and counts while SDMA
// engines and PIO contexts halt (planned and injected), engines stop, freeze and go idle, Drain
// comes now and then, and the Device and the SDMA device close in a random order. The ledger: no
// flow's packet overtakes an earlier one (halts may drop packets, never reorder them), none
// arrives twice or with other bytes; an SDMA packet is told Done(nil) exactly when it reached
// the sink and ErrAborted otherwise; every accepted packet is told Done once; no goroutine left.

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

	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// rv2Pkt is one packet of the order soak.
type rv2Pkt struct {
	flow, seq uint32
	n         int // bytes, the 8-byte name included
	accepted  bool
	path      Path
	dones     atomic.Int32
	doneErr   atomic.Value // error of the last Done, as a string
	seen      atomic.Int32 // times the sink saw it
}

func (p *rv2Pkt) Done(path Path, err error) {
	p.dones.Add(1)
	p.doneErr.Store(fmt.Sprint(err))
}

// rv2Payload is the bytes of flow's seq-th packet of n bytes: its name, then bytes both ends
// compute.
func rv2Payload(flow, seq uint32, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, flow)
	binary.LittleEndian.PutUint32(b[4:], seq)
	for i := 8; i < n; i++ {
		b[i] = byte(flow*29 + seq*11 + uint32(i)*3)
	}
	return b
}

type rv2OrderSink struct {
	mu   sync.Mutex
	pkts map[[2]uint32]*rv2Pkt
	next map[uint32]uint32 // per flow: the least sequence the next packet may have
	bad  []string
}

func (s *rv2OrderSink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, sg := range segs {
		p = append(p, sg...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	badf := func(format string, args ...any) {
		if len(s.bad) < 20 {
			s.bad = append(s.bad, fmt.Sprintf(format, args...))
		}
	}
	if len(p) < 8 {
		badf("runt packet of %d bytes", len(p))
		return nil
	}
	flow, seq := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])
	k := s.pkts[[2]uint32{flow, seq}]
	if k == nil {
		badf("unknown packet %d/%d", flow, seq)
		return nil
	}
	want := rv2Payload(flow, seq, k.n)
	for len(want)%4 != 0 {
		want = append(want, 0)
	}
	if string(p) != string(want) {
		badf("packet %d/%d: %d bytes differ from the %d sent", flow, seq, len(p), len(want))
	}
	if seq < s.next[flow] {
		badf("flow %d: packet %d (path %v) after packet %d", flow, seq, k.path, s.next[flow]-1)
	}
	s.next[flow] = seq + 1
	if k.seen.Add(1) != 1 {
		badf("packet %d/%d arrived twice", flow, seq)
	}
	return nil
}

// rv2Ledger is what an order soak sent and what it checks at the end: the sink that checks the
// order, every packet Send was given (accepted or not), and the test's failure report.
type rv2Ledger struct {
	sink *rv2OrderSink
	fail func(format string, args ...any)
	mu   sync.Mutex
	all  []*rv2Pkt // every packet Send was given, under mu
}

// send sends flow fl's packet seq of n bytes on f, cut in two at a random byte, under a timeout
// of 1 to maxWait µs (both drawn from r) within parent: the packet is named to the sink before
// and recorded after, with its path and whether Send accepted it (nil, or sdma.ErrNotRunning on
// the SDMA path); an error Send may not return fails the test. It returns Send's error.
func (l *rv2Ledger) send(parent context.Context, f *Flow, fl int, seq uint32, n, maxWait int, r *rand.Rand) error {
	pk := &rv2Pkt{flow: uint32(fl), seq: seq, n: n}
	l.sink.mu.Lock()
	l.sink.pkts[[2]uint32{pk.flow, seq}] = pk
	l.sink.mu.Unlock()
	b := rv2Payload(pk.flow, seq, n)
	k := r.IntN(n)
	ctx, cancel := context.WithTimeout(parent, time.Duration(1+r.IntN(maxWait))*time.Microsecond)
	p, err := f.Send(ctx, [][]byte{b[:k], b[k:]}, pk)
	cancel()
	pk.path = p
	pk.accepted = err == nil || (p == PathSDMA && errors.Is(err, sdma.ErrNotRunning))
	if !pk.accepted && !errors.Is(err, ErrClosed) && !errors.Is(err, sdma.ErrClosed) &&
		!errors.Is(err, sdma.ErrNotRunning) && !errors.Is(err, pio.ErrNotRunning) &&
		!errors.Is(err, context.DeadlineExceeded) {
		l.fail("flow %d: Send: %v (path %v)", fl, err, p)
	}
	l.mu.Lock()
	l.all = append(l.all, pk)
	l.mu.Unlock()
	return err
}

// closed reports whether err is a Send refused because a device closed: the flow stops there.
func closed(err error) bool { return errors.Is(err, ErrClosed) || errors.Is(err, sdma.ErrClosed) }

// check fails on what the sink found wrong, then on each packet whose outcome breaks the ledger
// (the first 10): a refused packet told Done or seen by the sink; an accepted one not told Done
// exactly once; an SDMA one told Done(nil) when it did not reach the sink, or an error when it
// did. It returns the packets accepted and those of them sent by SDMA.
func (l *rv2Ledger) check() (accepted, bySDMA int) {
	l.sink.mu.Lock()
	defer l.sink.mu.Unlock()
	for _, m := range l.sink.bad {
		l.fail("%s", m)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	nbad := 0
	for _, pk := range l.all {
		if nbad >= 10 {
			break
		}
		if !pk.accepted {
			if pk.dones.Load() != 0 || pk.seen.Load() != 0 {
				nbad++
				l.fail("packet %d/%d refused, but told Done %d times, arrived %d times", pk.flow, pk.seq, pk.dones.Load(), pk.seen.Load())
			}
			continue
		}
		accepted++
		if pk.dones.Load() != 1 {
			nbad++
			l.fail("packet %d/%d (path %v): told Done %d times", pk.flow, pk.seq, pk.path, pk.dones.Load())
			continue
		}
		if pk.path != PathSDMA {
			continue
		}
		bySDMA++
		if ok, arrived := pk.doneErr.Load() == "<nil>", pk.seen.Load() == 1; ok != arrived {
			nbad++
			l.fail("SDMA packet %d/%d: Done(%v), arrived %v", pk.flow, pk.seq, pk.doneErr.Load(), arrived)
		}
	}
	return accepted, bySDMA
}

func runRVVerbsOrderSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x0d3e))
	sink := &rv2OrderSink{pkts: map[[2]uint32]*rv2Pkt{}, next: map[uint32]uint32{}}
	cfg := sdma.Config{Engines: 1 + rng.IntN(2), RingSize: []int{64, 256}[rng.IntN(2)], Sink: sink}
	switch rng.IntN(3) {
	case 1:
		cfg.Completion = sdma.CompletePoll
	case 2:
		cfg.Manual = true
	}
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sd.NumEngines() {
		if rng.IntN(2) == 0 {
			_ = sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{HaltRate: 0.01, Seed: seed})
		}
	}
	threshold := []int{64, 256, 1024}[rng.IntN(3)]
	vc := Config{SDMA: sd, Contexts: 1 + rng.IntN(2), PIOThreshold: threshold, ManualPIO: cfg.Manual}
	if rng.IntN(2) == 0 {
		vc.PIOFaults = pio.FaultPlan{HaltRate: 0.01, Seed: seed}
	}
	d, err := New(vc)
	if err != nil {
		t.Fatal(err)
	}
	how := rng.IntN(2)
	desc := fmt.Sprintf("seed %d: engines %d ring %d completion %v manual %v threshold %d end %d", seed, cfg.Engines, cfg.RingSize, cfg.Completion, cfg.Manual, threshold, how)
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }
	led := &rv2Ledger{sink: sink, fail: fail}

	var stopFlows, stopped atomic.Bool
	var wg, bg sync.WaitGroup
	nflows := 2 + rng.IntN(3)
	for fl := range nflows {
		f := d.NewFlow(uint32(fl), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(fl)+1))
			for seq := uint32(0); !stopFlows.Load(); seq++ {
				if r.IntN(40) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(500))*time.Microsecond)
					_ = f.Drain(ctx)
					cancel()
				}
				// Mostly PIO-sized, one in six above the threshold: the flow switches paths often.
				n := 8 + r.IntN(threshold-7)
				if r.IntN(6) == 0 {
					n = threshold + 1 + r.IntN(threshold)
				}
				if closed(led.send(context.Background(), f, fl, seq, n, 2000, r)) {
					return
				}
			}
		}()
	}
	if cfg.Manual {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for !stopped.Load() {
				if d.Process() == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
	}
	if cfg.Manual || cfg.Completion == sdma.CompletePoll {
		sdmatest.DriveEngines(sd, cfg.Manual, &stopped, &bg)
	}
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 78)), Memory: func(r *rand.Rand) {
		_ = d.Context(r.IntN(d.NumContexts())).InjectHalt()
	}}
	if err := chaos.Run(sd, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dur)
	if how == 0 { // the Device, then the SDMA device
		_ = d.Close()
		stopFlows.Store(true)
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
		if err := sd.Close(); err != nil {
			fail("sdma Close: %v", err)
		}
	} else { // the SDMA device under the flows, then the Device
		stopped.Store(true)
		bg.Wait()
		if err := sd.Close(); err != nil {
			fail("sdma Close: %v", err)
		}
		stopFlows.Store(true)
		wg.Wait()
		_ = d.Close()
	}

	accepted, bySDMA := led.check()
	if testing.Verbose() {
		t.Logf("%s: %d packets, %d accepted, %d by SDMA", desc, len(led.all), accepted, bySDMA)
	}
}

// TestRVSoakVerbsOrderAcrossPaths: see runRVVerbsOrderSoak. RVSOAK_SEED picks another seed range.
func TestRVSoakVerbsOrderAcrossPaths(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runRVVerbsOrderSoak)
}
