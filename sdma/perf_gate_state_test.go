package sdma

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gosdma/gosdma/sdma/internal/sm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProcessGateIsState checks what process relies on when it reads the gate's running bit as
// the state machine's "state == s99": after every event of a random walk over all events
// (halts, stops, freezes, link changes), with hwMu held, the bit is set exactly in s99, and
// Process answers accordingly: ErrNotRunning outside s99 (a pass that ignored the bit would
// find the empty ring and return nil), and a packet sent in s99 is delivered.
func TestProcessGateIsState(t *testing.T) {
	sink := &countSink{}
	dev, err := NewDevice(Config{Manual: true, Sink: sink})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64)
	inS99 := 0
	for i := 0; i < 3000; i++ {
		ev := sm.Event(rng.IntN(int(sm.NumEvents)))
		_ = e.event(ev, "test")
		e.hwMu.Lock()
		running, s99 := e.gate.Load()&gateRunning != 0, e.sm.cur == sm.S99Running
		e.hwMu.Unlock()
		require.Equal(t, s99, running, "after %v: the gate's running bit against s99", ev)
		n, err := e.Process()
		if !s99 {
			assert.True(t, errors.Is(err, ErrNotRunning), "after %v, in %v: Process %v", ev, e.state(), err)
			assert.Zero(t, n)
			continue
		}
		inS99++
		require.NoError(t, err)
		var tx TxReq
		require.NoError(t, tx.Init(0, len(buf), nil))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, e.Send(nil, &tx, false))
		before := sink.n
		n, err = e.Process()
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Equal(t, before+1, sink.n)
	}
	assert.Greater(t, inS99, 100, "the walk spends time in s99")
}

// countSink counts the packets delivered to it.
type countSink struct{ n int }

func (s *countSink) Deliver(int, [][]byte) error { s.n++; return nil }
