package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCountReloadWithBatchSink: with a BatchSink the interrupts of held packets are raised when
// the batch is flushed, and the count restarts at that interrupt (its handler's reload), not at
// the descriptor that ran the count out: with batches of 6, the count runs out at the 8th
// descriptor, its interrupt comes at the flush after the 12th, and the next count runs out at the
// 20th, its interrupt at the flush after the 24th (a count restarted at the 8th would run out at
// the 16th, its interrupt at the flush after the 18th); then the idle interrupt. Before the
// engine's first interrupt a batch raises no count interrupt either.
func TestCountReloadWithBatchSink(t *testing.T) {
	c := newCountTest(t, 64, 6)
	c.send(12)
	n, seen := c.pass()
	assert.EqualValues(t, 1, n, "a new engine: the idle interrupt only")
	assert.Len(t, seen, 12, "every packet queued to the batch")
	assert.Equal(t, 12, c.e.Poll())

	c.send(24)
	n, seen = c.pass()
	assert.Equal(t, steps(24, 12), seen, "the count's interrupt at the flush after the 12th packet, none at the 18th")
	assert.EqualValues(t, 3, n, "the count interrupts at the flushes after 12 and 24, the idle one")
	assert.Equal(t, 24, c.e.Poll())
}
