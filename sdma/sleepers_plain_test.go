package sdma

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/membarrier"
)

// TestPlainSleepersChosen: an engine's completion pass reads the sleepers' announcements with a
// plain load exactly where the process-wide barrier is available (linux/amd64 outside -race and
// purego, with membarrier(2)); elsewhere it keeps its own fence.
func TestPlainSleepersChosen(t *testing.T) {
	dev, err := NewDevice(Config{Manual: true, Engines: 2})
	require.NoError(t, err)
	defer dev.Close()
	for i := range dev.NumEngines() {
		assert.Equal(t, membarrier.Available(), dev.Engine(i).plainSleepers, "engine %d", i)
	}
}

// TestPlainSleepersStress repeats the sleeper stress (runStress: every kind of sleeper on a
// 64-descriptor ring, each packet completed once, a lost wakeup fails after its timeout) with the
// pass's plain check where it applies: the Dekker pair of descAvail and announceSleeper with the
// barrier on the sleeper's side only. Under -race (and purego) it runs the fenced check, as every
// other sleeper test there does.
func TestPlainSleepersStress(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for r := range rounds {
		for _, mode := range []CompletionMode{CompleteInterrupt, CompletePoll} {
			t.Run(fmt.Sprintf("round=%d/completion=%v", r, mode), func(t *testing.T) {
				runStress(t, 1, mode, []stressKind{kindKernel, kindBlocking, kindList})
			})
		}
	}
}
