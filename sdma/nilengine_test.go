package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProgressScheduleNilEngine: the kernel's sdma_engine_progress_schedule returns at once for
// a NULL engine ("if (!sde || ...) return"); ProgressSchedule on a nil *Engine panicked with a nil
// dereference. It reports false (no pass ran).
func TestProgressScheduleNilEngine(t *testing.T) {
	var e *Engine
	assert.NotPanics(t, func() { assert.False(t, e.ProgressSchedule()) })
}
