package sdma

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countTest is a Manual engine in CompletePoll mode (interrupts are only counted) whose sink
// records the engine's interrupt count at each packet it is handed, Deliver or Queue, and may
// run a hook there.
type countTest struct {
	t   *testing.T
	dev *Device
	e   *Engine
	s   *intrSink
}

// intrSink is countTest's sink: a BatchSink when batch >= 2.
type intrSink struct {
	e     *Engine
	batch int
	seen  []uint64         // the engine's interrupt count at each packet, in order
	at    func(packet int) // called at each packet with its index in seen
}

func (s *intrSink) packet() error {
	s.seen = append(s.seen, s.e.Stats().Interrupts)
	if s.at != nil {
		s.at(len(s.seen) - 1)
	}
	return nil
}

func (s *intrSink) Deliver(int, [][]byte) error { return s.packet() }

type intrBatchSink struct{ intrSink }

func (s *intrBatchSink) BatchLimit() (int, int)    { return s.batch, 0 }
func (s *intrBatchSink) Queue(int, [][]byte) error { return s.packet() }
func (s *intrBatchSink) Flush(_ int, errs []error) {}

func newCountTest(t *testing.T, ringSize, batch int) *countTest {
	cs := &intrSink{batch: batch}
	var sink Sink = cs
	if batch >= 2 {
		b := &intrBatchSink{intrSink{batch: batch}}
		cs, sink = &b.intrSink, b
	}
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: ringSize, DescIntr: 8, Sink: sink})
	cs.e = dev.Engine(0)
	return &countTest{t: t, dev: dev, e: cs.e, s: cs}
}

// send publishes n packets of one descriptor each.
func (c *countTest) send(n int) {
	c.t.Helper()
	for range n {
		var tx TxReq
		engTestBuild(c.t, c.dev, &tx, 0, make([]byte, 4), nil)
		require.NoError(c.t, c.e.Send(nil, &tx, false))
	}
}

// pass runs one hardware pass and returns the interrupts it raised and the count each of its
// packets saw, relative to the count before the pass.
func (c *countTest) pass() (uint64, []uint64) {
	c.t.Helper()
	s0 := c.e.Stats().Interrupts
	c.s.seen = c.s.seen[:0]
	_, err := c.e.Process()
	require.NoError(c.t, err)
	seen := make([]uint64, len(c.s.seen))
	for i, v := range c.s.seen {
		seen[i] = v - s0
	}
	return c.e.Stats().Interrupts - s0, seen
}

// steps returns n counts: 0 up to packet a, 1 up to packet b, and so on (a, b, ... ascending).
func steps(n int, at ...int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		for _, a := range at {
			if i >= a {
				out[i]++
			}
		}
	}
	return out
}

// TestCountInterruptOffBeforeFirstInterrupt: hfi1's init_sdma_regs writes 0 to SendDmaDescCnt,
// and only the interrupt handler's sdma_set_desc_cnt loads sdma_desct_intr: before an engine's
// first interrupt a count of 0 raises no count interrupt. The first pass of a new engine raises
// the idle interrupt only, however many descriptors it reads; from then on the count runs, also
// after a halt, whose restart (sdma_hw_start_up) does not write the register. The model counted
// from the start: the first pass of 20 descriptors raised count interrupts at 8 and 16.
func TestCountInterruptOffBeforeFirstInterrupt(t *testing.T) {
	c := newCountTest(t, 256, 0)
	c.send(20)
	n, _ := c.pass()
	assert.EqualValues(t, 1, n, "a new engine's 20 descriptors: the idle interrupt only")
	c.send(20)
	n, seen := c.pass()
	assert.EqualValues(t, 3, n, "after the first interrupt: count interrupts at 8 and 16, then the idle one")
	assert.Equal(t, steps(20, 8, 16), seen)
	assert.Equal(t, 40, c.e.Poll())

	require.NoError(t, c.e.injectHalt(CauseHalt))
	c.send(20)
	n, _ = c.pass()
	assert.EqualValues(t, 3, n, "a restart keeps the register: count interrupts at 8 and 16, then the idle one")
	assert.Equal(t, 20, c.e.Poll())
}

// TestProgressScheduleReloadsCount: ProgressSchedule forces the progress interrupt, whose handler
// (sdma_engine_interrupt) reloads the count as every interrupt does, also when the pass is left
// to one already running. Here a pass is running (the sink calls ProgressSchedule at the 12th
// packet, before the chip counts it): the count interrupt after the 8th descriptor reloaded the
// count, the forced one is counted at once (TestProgressScheduleCountsItsInterrupt), the one due
// after the 16th finds ProgressSchedule's reload in its window and restarts without an
// interrupt, and the count that reload set runs out 8 descriptors after it, after the 19th (the
// handler's register write takes effect at once: TestProgressScheduleReloadTakesEffectAtOnce);
// then the idle interrupt. The reload was missing: count interrupts at 8 and 16; then it landed
// at the window's end: none after the 19th. The next pass takes a reload left pending at its
// start, clearing the bit (the hardware goroutine parks only on a clear word).
func TestProgressScheduleReloadsCount(t *testing.T) {
	c := newCountTest(t, 64, 0)
	c.send(1)
	n, _ := c.pass()
	require.EqualValues(t, 1, n, "the first interrupt arms the count")
	require.Equal(t, 1, c.e.Poll())

	ran := true
	c.s.at = func(i int) {
		if i == 11 {
			ran = c.e.ProgressSchedule() // 20 in process of 64: forced; the pass holds the head lock
		}
	}
	c.send(20)
	n, seen := c.pass()
	c.s.at = nil
	assert.False(t, ran, "ProgressSchedule inside the pass ran no pass of its own")
	assert.Equal(t, steps(20, 8, 12, 19), seen, "the forced interrupt at the 12th, no count interrupt after the 16th descriptor, one after the 19th")
	assert.EqualValues(t, 4, n, "the count interrupts at 8 and 19, the forced one and the idle one")
	assert.Zero(t, c.e.pending.Load()&pendCount, "the window's end took the reload")

	assert.True(t, c.e.ProgressSchedule(), "20 in process: a forced pass, on the caller's goroutine")
	assert.NotZero(t, c.e.pending.Load()&pendCount, "the reload is the hardware pass's")
	c.send(1)
	c.pass()
	assert.Zero(t, c.e.pending.Load()&pendCount, "the next pass took the reload at its start")
	assert.Equal(t, 1, c.e.Poll(), "the forced pass completed the 20")
}

// armCount loads e's count register as the handler of its first interrupt does (reloadCount), for
// tests that count interrupts from an engine's first descriptor on.
func armCount(e *Engine) {
	e.hwMu.Lock()
	e.reloadCount()
	e.hwMu.Unlock()
}

// kernelCount is the interrupts of hfi1's chip and handler over a pass of n one-descriptor
// packets, the count register armed and reloaded at the pass's start (the idle interrupt before
// it), with ProgressSchedule forcing the progress interrupt as packet i is handed over, for each
// i in forced (before the chip counts it): every interrupt reloads SendDmaDescCnt in
// sdma_engine_interrupt (sdma_set_desc_cnt, a register write the chip sees at once), the count
// interrupt comes when descIntr descriptors were read since the last reload, and the pass ends
// in the idle interrupt. It returns what countTest.pass does: the interrupts raised, and the
// count each packet saw as it was handed over (before that packet's forced interrupt).
func kernelCount(descIntr, n int, forced ...int) (uint64, []uint64) {
	var intr uint64
	seen := make([]uint64, n)
	cnt := 0 // descriptors read since the last reload
	for i := range n {
		seen[i] = intr
		for _, f := range forced {
			if f == i {
				intr++ // the progress interrupt, counted by its handler
				cnt = 0
			}
		}
		if cnt++; cnt == descIntr {
			intr++ // the count interrupt; its handler reloads
			cnt = 0
		}
	}
	return intr + 1, seen // and the idle interrupt
}

// TestProgressScheduleReloadTakesEffectAtOnce: the forced progress interrupt's reload of the
// count (sdma_engine_interrupt's sdma_set_desc_cnt, a CSR write) takes effect at the descriptor
// the chip has reached, so the next count interrupt comes DescIntr descriptors after it, whatever
// the forced interrupt's place in the count window, and with two in one window from the later.
// The model applied the reload at the end of the window it came in (the pending test once per
// window), so the count interrupt came up to DescIntr descriptors late (after the 16th packet
// where the kernel's comes after the 11th, for a reload at the 4th). Each case against
// kernelCount, on a pass of 40 packets with DescIntr 8.
func TestProgressScheduleReloadTakesEffectAtOnce(t *testing.T) {
	cases := [][]int{{3, 5}, {3, 9}, {7, 15}, {0, 8, 16}, {6, 7}, {1, 30}}
	for p := range 24 {
		cases = append(cases, []int{p})
	}
	for _, forced := range cases {
		c := newCountTest(t, 64, 0)
		c.send(1)
		n, _ := c.pass()
		require.EqualValues(t, 1, n, "the first interrupt arms the count")
		require.Equal(t, 1, c.e.Poll())
		c.s.at = func(i int) {
			if slices.Contains(forced, i) {
				assert.False(t, c.e.ProgressSchedule(), "forced at %d: the pass holds the head lock", i)
			}
		}
		c.send(40)
		n, seen := c.pass()
		wantN, wantSeen := kernelCount(8, 40, forced...)
		assert.Equal(t, wantSeen, seen, "forced at %v", forced)
		assert.Equal(t, wantN, n, "forced at %v", forced)
		assert.Zero(t, c.e.pending.Load()&pendCount, "forced at %v: taken", forced)
		assert.Equal(t, 40, c.e.Poll())
	}
}

// TestTakeCountReloadPosition: a reload's position that the count cannot have run from (past the
// head: the ring's numbering before a restart; or at least sinceIntr back: read before the
// window's start) is taken as the window's start, sinceIntr unchanged; one inside the window
// counts the descriptors since it. The bit is cleared and the register armed either way.
func TestTakeCountReloadPosition(t *testing.T) {
	c := newCountTest(t, 64, 0)
	e := c.e
	for _, tc := range []struct{ at, want uint64 }{{200, 8}, {92, 8}, {90, 8}, {93, 7}, {95, 5}, {100, 0}} {
		e.hwMu.Lock()
		e.hw.head.Store(100)
		e.hw.sinceIntr, e.hw.countArmed = 8, false
		e.progressAt.Store(tc.at)
		e.pending.Or(pendCount)
		e.takeCountReload()
		assert.EqualValues(t, tc.want, e.hw.sinceIntr, "at %d, head 100, 8 in the window", tc.at)
		assert.True(t, e.hw.countArmed)
		assert.Zero(t, e.pending.Load()&pendCount)
		e.hw.head.Store(0)
		e.hw.sinceIntr = 0
		e.hwMu.Unlock()
	}
}
