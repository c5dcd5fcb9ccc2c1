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

// TestProgressScheduleCountsItsInterrupt: hfi1's sdma_engine_progress_schedule forces the progress
// interrupt (a write of CCE_INT_FORCE) unless the engine is NULL or less than an eighth of its
// ring is in process, and sdma_engine_interrupt counts the forced interrupt (progress_int_cnt) as
// it counts the others. ProgressSchedule counts it in Stats().Interrupts once per forced
// interrupt, whether its pass runs on the caller's goroutine or is left to a running one, and
// none when it returns early. It counted none.
func TestProgressScheduleCountsItsInterrupt(t *testing.T) {
	c := newCountTest(t, 64, 0)
	intrs := func() uint64 { return c.e.Stats().Interrupts }
	c.send(6)
	s0 := intrs()
	assert.False(t, c.e.ProgressSchedule(), "7 in process (6 slots used, as sdma_descq_inprocess counts) < 64/8")
	assert.Equal(t, s0, intrs(), "below an eighth: no interrupt forced, none counted")

	c.send(1)
	assert.True(t, c.e.ProgressSchedule(), "8 of 64: forced, its pass on the caller's goroutine")
	assert.Equal(t, s0+1, intrs(), "the forced interrupt")
	assert.True(t, c.e.ProgressSchedule())
	assert.Equal(t, s0+2, intrs(), "each forced interrupt counts once")
	n, _ := c.pass()
	assert.EqualValues(t, 1, n, "the hardware pass: the idle interrupt only (7 descriptors after the forced reload)")
	assert.Equal(t, 7, c.e.Poll())
	s1 := intrs()
	assert.False(t, c.e.ProgressSchedule(), "nothing used")
	assert.Equal(t, s1, intrs())

	// Left to a running pass (the sink's, which holds the head lock): still forced, and counted.
	ran := true
	c.s.at = func(i int) {
		if i == 2 {
			ran = c.e.ProgressSchedule() // 11 in process
		}
	}
	c.send(10)
	n, seen := c.pass()
	c.s.at = nil
	assert.False(t, ran, "the running pass does the forced one's work")
	assert.Equal(t, steps(10, 3), seen, "the forced interrupt at the 3rd packet; its reload restarts the count window that ends at the 8th")
	assert.EqualValues(t, 3, n, "the forced interrupt, the count's 8 descriptors after its reload (after the 10th packet), the idle one")
	assert.Equal(t, 10, c.e.Poll())
}
