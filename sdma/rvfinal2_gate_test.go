package sdma

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// rvf2Sink checks, at every delivery (hwMu held by the pass), that the state machine is in
// s99: process reads the gate's running bit instead of sm.cur, and a stale bit would let a
// packet be read in another state.
type rvf2Sink struct {
	e      atomic.Pointer[Engine]
	n      atomic.Int64
	bad    atomic.Int64
	badSt  atomic.Int32
	seen   sync.Map
	double atomic.Int64
}

func (s *rvf2Sink) Deliver(_ int, segs [][]byte) error {
	if e := s.e.Load(); e != nil {
		if st := e.sm.cur; st != sm.S99Running {
			s.bad.Add(1)
			s.badSt.Store(int32(st))
		}
	}
	s.n.Add(1)
	if len(segs) > 0 && len(segs[0]) >= 8 {
		id := uint64(segs[0][0]) | uint64(segs[0][1])<<8 | uint64(segs[0][2])<<16 | uint64(segs[0][3])<<24
		if _, dup := s.seen.LoadOrStore(id, true); dup {
			s.double.Add(1)
		}
	}
	return nil
}

// TestRVF2GateUnderConcurrentEvents: producers send, Process runs (Manual) or the engine's
// goroutine runs, while another goroutine raises random events (Stop, Start, halts, every event)
// and InjectHalt. Every delivery happens in s99; every accepted txreq completes exactly once;
// Process never returns nil error while the gate says not running.
func TestRVF2GateUnderConcurrentEvents(t *testing.T) {
	for _, manual := range []bool{true, false} {
		name := "goroutine"
		if manual {
			name = "manual"
		}
		t.Run(name, func(t *testing.T) { rvf2Gate(t, manual) })
	}
}

func rvf2Gate(t *testing.T, manual bool) {
	sink := &rvf2Sink{}
	dev, err := NewDevice(Config{Manual: manual, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	e := dev.Engine(0)
	sink.e.Store(e)
	const producers, per = 2, 1500
	var done [producers * per]atomic.Int32
	var accepted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := p*per + i
				tx := new(TxReq)
				buf := make([]byte, 64)
				buf[0], buf[1], buf[2], buf[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
				if err := tx.Init(0, len(buf), CompleterFunc(func(_ *TxReq, _ Status) { done[id].Add(1) })); err != nil {
					t.Error(err)
					return
				}
				if err := tx.AddKVAddr(dev, buf); err != nil {
					t.Error(err)
					return
				}
				if err := e.Send(nil, tx, false); err == nil || errors.Is(err, ErrNotRunning) {
					accepted.Add(1)
				} else {
					done[id].Add(100) // not accepted: must never complete
					_ = tx.Clean()
				}
			}
		}(p)
	}
	var pw sync.WaitGroup
	if manual {
		engTestLoop(stop, &pw, func(int) {
			_, _ = e.Process()
			e.Poll()
		})
	}
	rng := rand.New(rand.NewPCG(7, 9))
	engTestLoop(stop, &pw, func(int) {
		switch rng.IntN(6) {
		case 0:
			_ = e.Stop()
		case 1, 2:
			_ = e.Start()
		case 3:
			_ = e.injectHalt(CauseHalt)
		default:
			_ = e.event(sm.Event(rng.IntN(int(sm.NumEvents))), "rvf2")
		}
		_ = e.Start()
	})
	wg.Wait()
	close(stop)
	pw.Wait()
	_ = e.Start()
	if manual {
		for i := 0; i < 100; i++ {
			_, _ = e.Process()
			e.Poll()
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if b := sink.bad.Load(); b != 0 {
		t.Errorf("%d packets delivered outside s99 (last in %v)", b, sm.State(sink.badSt.Load()))
	}
	if d := sink.double.Load(); d != 0 {
		t.Errorf("%d packets delivered twice", d)
	}
	for id := range done {
		if v := done[id].Load(); v != 1 && v != 100 {
			t.Errorf("txreq %d: completion record %d", id, v)
		}
	}
	t.Logf("accepted %d, delivered %d", accepted.Load(), sink.n.Load())
}
