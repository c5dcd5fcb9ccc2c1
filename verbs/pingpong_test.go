package verbs

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// seqSink checks that every flow's packets arrive exactly once and in order (a flow id and a
// sequence number from 1 in the first 16 bytes), and counts them per flow.
type seqSink struct {
	n   [4]atomic.Uint64 // packets delivered, per flow: the next one expected is n+1
	bad atomic.Pointer[string]
}

func (s *seqSink) Deliver(_ int, segs [][]byte) error {
	var hdr [16]byte
	k := 0
	for _, b := range segs {
		k += copy(hdr[k:], b)
	}
	flow, seq := binary.LittleEndian.Uint64(hdr[:]), binary.LittleEndian.Uint64(hdr[8:])
	if got := s.n[flow].Add(1); got != seq {
		msg := fmt.Sprintf("flow %d: packet %d delivered as the %dth", flow, seq, got)
		s.bad.CompareAndSwap(nil, &msg)
	}
	return nil
}

// TestPingPongStress is sdmaperf's latency mode over both paths (the shape of the -path sweep that
// hung once in CI): each flow sends a packet and waits for the sink to have it before the next,
// the chip goroutine and the engine's goroutine parking between packets (every wake-up goes through the doorbells and, for a packet
// that has to wait for the PIO drain or for credits, the forced credit returns). Sizes are
// random around the PIO threshold, so flows switch paths (an SDMA packet after PIO ones drains
// them first). Each wait is bounded: a lost wake-up fails with what was in flight instead of
// hanging. Every packet arrives exactly once, in order.
func TestPingPongStress(t *testing.T) {
	rounds, pkts := 12, 300
	if testing.Short() {
		rounds, pkts = 6, 200
	}
	sizes := []int{16, 64, 200, 256, 257, 512, 1024}
	for round := range rounds {
		sink := &seqSink{}
		sd, err := sdma.NewDevice(sdma.Config{Sink: sink, Engines: 1})
		if err != nil {
			t.Fatal(err)
		}
		// Small contexts (threshold 1..): credits run out while the chip is between packets.
		d, err := New(Config{SDMA: sd, Contexts: 1 + (round/2)%2, Credits: []int{0, 15, 18}[round%3]})
		if err != nil {
			sd.Close()
			t.Fatal(err)
		}
		flows := 1 + round%2
		var wg sync.WaitGroup
		errs := make([]error, flows)
		for fi := range flows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[fi] = pingPong(d.NewFlow(uint32(fi), 0), sink, uint64(fi), pkts, sizes, rand.New(rand.NewPCG(uint64(round), uint64(fi))))
			}()
		}
		wg.Wait()
		d.Close()
		sd.Close()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if b := sink.bad.Load(); b != nil {
			t.Fatalf("round %d: %s", round, *b)
		}
	}
}

// pingPongWait bounds each wait of pingPong: far above any delivery, it only turns a hang into a
// failure.
const pingPongWait = 30 * time.Second

func pingPong(f *Flow, sink *seqSink, id uint64, pkts int, sizes []int, rng *rand.Rand) error {
	buf := make([]byte, 1024)
	for seq := uint64(1); seq <= uint64(pkts); seq++ {
		n := sizes[rng.IntN(len(sizes))]
		binary.LittleEndian.PutUint64(buf, id)
		binary.LittleEndian.PutUint64(buf[8:], seq)
		ctx, cancel := context.WithTimeout(context.Background(), pingPongWait)
		path, err := f.Send(ctx, [][]byte{buf[:n]}, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("flow %d packet %d (%d bytes): send: %w; %s", id, seq, n, err, flowState(f))
		}
		deadline := time.Now().Add(pingPongWait)
		for spin := 1; sink.n[id].Load() < seq; spin++ {
			if spin&63 == 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("flow %d packet %d (%d bytes, by %v) not delivered; %s", id, seq, n, path, flowState(f))
				}
				runtime.Gosched()
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingPongWait)
	defer cancel()
	if err := f.Drain(ctx); err != nil {
		return fmt.Errorf("flow %d: drain: %w; %s", id, err, flowState(f))
	}
	return nil
}

func flowState(f *Flow) string {
	pb, sb := f.Busy()
	cs, es := f.sc.Stats(), f.engine.Stats()
	return fmt.Sprintf("busy pio %d sdma %d; context %+v waiting %d in flight %d avail %d; engine running %v empty %v %+v",
		pb, sb, cs, f.sc.Waiting(), f.sc.InFlight(), f.sc.Avail(), f.engine.Running(), f.engine.Empty(), es)
}
