package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type stateStep struct {
	ev   Event
	want State
	acts stateAction
}

func runSteps(t *testing.T, m *stateMachine, steps []stateStep) {
	t.Helper()
	for i, s := range steps {
		acts, _ := m.step(s.ev, "test")
		require.Equal(t, s.want, m.cur, "step %d: %v", i, s.ev)
		assert.Equal(t, s.acts, acts, "step %d: %v actions", i, s.ev)
	}
}

func TestStateStartUp(t *testing.T) {
	m := &stateMachine{}
	runSteps(t, m, []stateStep{
		{E30GoRunning, S10HwStartUpHaltWait, 0},
		{E15HwHaltDone, S15HwStartUpCleanWait, actHwCleanUp},
		{E25HwCleanUpDone, S99Running, actHwStartUp},
	})
	assert.True(t, m.goRunning)

	m = &stateMachine{}
	runSteps(t, m, []stateStep{
		{E10GoHwStart, S10HwStartUpHaltWait, 0},
		{E15HwHaltDone, S15HwStartUpCleanWait, actHwCleanUp},
		{E25HwCleanUpDone, S20Idle, actHwStartUp},
		{E30GoRunning, S99Running, 0},
	})
}

func TestStateHaltRecovers(t *testing.T) {
	m := &stateMachine{cur: S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{E60HwHalted, S50HwHaltWait, actErrHaltWorker | actProgress},
		{E15HwHaltDone, S30SwCleanUpWait, actSwCleanUp},
		{E40SwCleaned, S40HwCleanUpWait, actHwCleanUp},
		{E25HwCleanUpDone, S99Running, actHwStartUp},
	})
	m = &stateMachine{cur: S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{E90SwHalted, S50HwHaltWait, actErrHaltWorker},
		{E15HwHaltDone, S30SwCleanUpWait, actSwCleanUp},
		{E40SwCleaned, S40HwCleanUpWait, actHwCleanUp},
		{E25HwCleanUpDone, S99Running, actHwStartUp},
	})
}

func TestStateIdleHaltGoesToIdle(t *testing.T) {
	m := &stateMachine{cur: S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{E70GoIdle, S60IdleHaltWait, 0},
		{E15HwHaltDone, S30SwCleanUpWait, actSwCleanUp},
		{E40SwCleaned, S40HwCleanUpWait, actHwCleanUp},
		{E25HwCleanUpDone, S20Idle, actHwStartUp},
	})
	assert.False(t, m.goRunning, "entering s60 clears go_s99_running")
}

func TestStateFreezeAndLinkDown(t *testing.T) {
	m := &stateMachine{cur: S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{E80HwFreeze, S80HwFreeze, actFreezeNotify},
		{E81HwFrozen, S82FreezeSwClean, actSwCleanUp},
		{E40SwCleaned, S82FreezeSwClean, actUnfreezeDone},
		{E82HwUnfreeze, S99Running, actHwStartUp},
	})
	m = &stateMachine{cur: S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{E85LinkDown, S80HwFreeze, actFreezeNotify},
		{E81HwFrozen, S82FreezeSwClean, actSwCleanUp},
		{E82HwUnfreeze, S20Idle, actHwStartUp},
	})
}

func TestStateDownFromEverywhere(t *testing.T) {
	for s := S00HwDown; s < numStates; s++ {
		m := &stateMachine{cur: s, goRunning: true}
		m.step(E00GoHwDown, "test")
		assert.Equal(t, S00HwDown, m.cur, "from %v", s)
		if s != S00HwDown {
			assert.False(t, m.goRunning, "entering s00 clears go_s99_running (from %v)", s)
		}
	}
}

func TestStateIgnoredEventsKeepState(t *testing.T) {
	// Running ignores start-up events; hw_down ignores halts.
	for _, c := range []struct {
		s  State
		ev Event
	}{
		{S99Running, E10GoHwStart}, {S99Running, E25HwCleanUpDone}, {S99Running, E40SwCleaned},
		{S00HwDown, E60HwHalted}, {S00HwDown, E90SwHalted}, {S20Idle, E90SwHalted},
	} {
		m := &stateMachine{cur: c.s, goRunning: c.s == S99Running}
		_, entered := m.step(c.ev, "")
		assert.Equal(t, c.s, m.cur, "%v + %v", c.s, c.ev)
		assert.False(t, entered)
		assert.Zero(t, m.nhist, "no transition recorded")
	}
}

func TestStateEnteredRunningAndHistory(t *testing.T) {
	m := &stateMachine{}
	_, entered := m.step(E30GoRunning, "user")
	assert.False(t, entered)
	m.step(E15HwHaltDone, "")
	_, entered = m.step(E25HwCleanUpDone, "")
	assert.True(t, entered, "entering s99 from another state asks for sdma_flush")
	h := m.history(nil)
	require.Len(t, h, 3)
	assert.Equal(t, "s00_hw_down -e30_go_running-> s10_hw_start_up_halt_wait (user)", h[0].String())
	assert.Equal(t, S99Running, h[2].To)

	for i := 0; i < 2*historyLen; i++ {
		m.step(E90SwHalted, "")
		m.step(E15HwHaltDone, "")
		m.step(E40SwCleaned, "")
		m.step(E25HwCleanUpDone, "")
	}
	h = m.history(nil)
	require.Len(t, h, historyLen)
	assert.Equal(t, S99Running, h[len(h)-1].To)
	assert.Equal(t, "s99_running", S99Running.String())
	assert.Equal(t, "e90_sw_halted", E90SwHalted.String())
	assert.Equal(t, "State(200)", State(200).String())
}

func TestStateTableHasNoAccidentalCells(t *testing.T) {
	// Every cell that moves to s00 is an e00 (go_hw_down) cell: a forgotten initialisation would
	// show up as a zero cell moving the engine down.
	for s := S00HwDown; s < numStates; s++ {
		for e := E00GoHwDown; e < numEvents; e++ {
			c := stateTable[s][e]
			if c.to == S00HwDown {
				assert.Equal(t, E00GoHwDown, e, "%v + %v moves to s00", s, e)
			}
		}
	}
}
