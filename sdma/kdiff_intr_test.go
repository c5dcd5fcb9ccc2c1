package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCountInterruptRearmsOnEveryInterrupt: the count interrupt comes DescIntr descriptors after
// the last interrupt of any kind, not after the last count interrupt. hfi1's
// sdma_engine_interrupt reloads SendDmaDescCnt (sdma_set_desc_cnt(sde, sdma_desct_intr)) on
// every interrupt it handles, whatever its source (the idle, the progress or the SDMA interrupt:
// INT_REQ and the count): descriptors counted before an INT_REQ or an idle interrupt do not
// count toward the next count interrupt.
func TestCountInterruptRearmsOnEveryInterrupt(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 256, DescIntr: 8})
	e := dev.Engine(0)
	send := func(n int, flags Flags) {
		t.Helper()
		for range n {
			var tx TxReq
			engTestBuild(t, dev, &tx, flags, make([]byte, 4), nil) // 1 descriptor
			require.NoError(t, e.Send(nil, &tx, false))
		}
	}
	pass := func() uint64 {
		t.Helper()
		s0 := e.Stats().Interrupts
		_, err := e.Process()
		require.NoError(t, err)
		return e.Stats().Interrupts - s0
	}

	send(6, 0)
	assert.EqualValues(t, 1, pass(), "6 descriptors: the idle interrupt only")
	send(6, 0)
	assert.EqualValues(t, 1, pass(), "6 more after the idle interrupt reloaded the count: the idle interrupt only")

	send(7, 0)
	send(1, FlagUrgent)
	send(7, 0)
	assert.EqualValues(t, 2, pass(), "INT_REQ at the 8th descriptor reloads the count: 7 more raise none, then the idle interrupt")

	send(20, 0)
	assert.EqualValues(t, 3, pass(), "20 descriptors: count interrupts at 8 and 16, then the idle interrupt")
	assert.Equal(t, 47, e.Poll())
}
