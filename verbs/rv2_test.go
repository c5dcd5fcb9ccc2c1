package verbs

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSendVsCloseConcurrentManualPIO is TestSendVsCloseConcurrent with ManualPIO (the senders
// drive the PIO chips, SDMA sends wait in the PIO drain by yielding): every packet is accepted,
// on the wire once in its flow's order and told once, or refused with ErrClosed and seen
// nowhere; no Send that starts after Close returned is accepted; every Drain returns.
func TestSendVsCloseConcurrentManualPIO(t *testing.T) {
	for round := range 6 {
		sink := newOrderSink()
		d := newDevice(t, sink, nil, Config{ManualPIO: true})
		const flows, perFlow = 3, 150
		var closedAt atomic.Bool
		var started atomic.Int32
		type rec struct {
			accepted, afterClose bool
			c                    countDone
		}
		recs := make([][]rec, flows)
		var wg sync.WaitGroup
		for fl := range flows {
			recs[fl] = make([]rec, perFlow)
			wg.Go(func() {
				f := d.NewFlow(uint32(fl), 0)
				for i := range perFlow {
					r := &recs[fl][i]
					r.afterClose = closedAt.Load()
					started.Add(1)
					n := 64 + (i*97+fl*31)%900
					_, err := f.Send(context.Background(), [][]byte{packet(uint64(fl+1), uint64(i), n)}, &r.c)
					switch {
					case err == nil:
						r.accepted = true
					case !errors.Is(err, ErrClosed):
						t.Errorf("flow %d packet %d: %v, want ErrClosed", fl, i, err)
					}
				}
				if err := f.Drain(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		for started.Load() < int32(round*flows*perFlow/6) {
			runtime.Gosched()
		}
		_ = d.Close()
		closedAt.Store(true)
		wg.Wait()
		sink.mu.Lock()
		for _, b := range sink.bad {
			t.Error(b)
		}
		for fl := range flows {
			var want []uint64
			for i := range recs[fl] {
				r := &recs[fl][i]
				if r.accepted {
					want = append(want, uint64(i))
					if r.afterClose {
						t.Errorf("flow %d packet %d: accepted though Send started after Close returned", fl, i)
					}
				}
				if n, w := r.c.n.Load(), map[bool]int32{true: 1, false: 0}[r.accepted]; n != w {
					t.Errorf("flow %d packet %d (accepted %v): told %d times", fl, i, r.accepted, n)
				}
			}
			var got []uint64
			for _, p := range sink.pkts[uint64(fl+1)] {
				got = append(got, binary.LittleEndian.Uint64(p[8:]))
			}
			if !slices.Equal(got, want) {
				t.Errorf("flow %d: sink saw %v, accepted %v", fl, got, want)
			}
		}
		sink.mu.Unlock()
		if t.Failed() {
			return
		}
	}
}
