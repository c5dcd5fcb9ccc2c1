package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// sendingSink is a Sink that sends the next packet from its Deliver, while sends lasts: each
// delivery Inits one of txs (round robin) for a packet of buf and sends it on e.
type sendingSink struct {
	t     *testing.T
	e     *Engine
	dev   *Device
	txs   []TxReq
	buf   []byte
	next  int
	sends int
	got   int
}

func (s *sendingSink) Deliver(_ int, _ [][]byte) error {
	s.got++
	if s.sends > 0 {
		s.sends--
		s.send()
	}
	return nil
}

func (s *sendingSink) send() {
	tx := &s.txs[s.next%len(s.txs)]
	s.next++
	require.NoError(s.t, tx.Init(0, len(s.buf), nil))
	require.NoError(s.t, tx.AddKVAddr(s.dev, s.buf))
	require.NoError(s.t, s.e.Send(nil, tx, false))
}

// TestPassLoopEnds pins where a hardware pass (process) stops, the loop's tests at its end: a
// packet published during the pass (by the sink of the packet before it) is delivered by the
// same pass, which looks at the tail again when it caught up; and a pass reads at most a ring's
// worth of descriptors, however long the producers keep it fed (a Manual engine with a count
// interrupt every descriptor completes each packet in the pass, so the ring never fills).
func TestPassLoopEnds(t *testing.T) {
	newDev := func(t *testing.T, s *sendingSink, descIntr int) {
		dev, err := NewDevice(Config{Manual: true, Sink: s, RingSize: 64, DescIntr: descIntr})
		require.NoError(t, err)
		t.Cleanup(func() { _ = dev.Close() })
		s.t, s.dev, s.e = t, dev, dev.Engine(0)
		s.buf = txTestPattern(64, 9)
	}
	t.Run("tail moved", func(t *testing.T) {
		s := &sendingSink{txs: make([]TxReq, 2), sends: 1}
		newDev(t, s, 0)
		s.send()
		n, err := s.e.Process()
		require.NoError(t, err)
		require.Equal(t, 2, n, "the packet sent during the pass, in the same pass")
		require.Equal(t, 2, s.got)
		n, err = s.e.Process()
		require.NoError(t, err)
		require.Zero(t, n)
	})
	t.Run("a ring's worth", func(t *testing.T) {
		s := &sendingSink{txs: make([]TxReq, 4), sends: 3 * 64}
		newDev(t, s, 1)
		armCount(s.e) // as after a first interrupt: a new engine's count register is 0
		s.send()
		for _, want := range []int{64, 64, 64, 1, 0} {
			n, err := s.e.Process()
			require.NoError(t, err)
			require.Equal(t, want, n, "one pass: a ring's worth of descriptors while the tail moves")
		}
		require.Equal(t, 3*64+1, s.got)
	})
}
