package sdma

import (
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type stateStep struct {
	ev   sm.Event
	want sm.State
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
		{sm.E30GoRunning, sm.S10HwStartUpHaltWait, 0},
		{sm.E15HwHaltDone, sm.S15HwStartUpCleanWait, actHwCleanUp},
		{sm.E25HwCleanUpDone, sm.S99Running, actHwStartUp},
	})
	assert.True(t, m.goRunning)

	m = &stateMachine{}
	runSteps(t, m, []stateStep{
		{sm.E10GoHwStart, sm.S10HwStartUpHaltWait, 0},
		{sm.E15HwHaltDone, sm.S15HwStartUpCleanWait, actHwCleanUp},
		{sm.E25HwCleanUpDone, sm.S20Idle, actHwStartUp},
		{sm.E30GoRunning, sm.S99Running, 0},
	})
}

func TestStateHaltRecovers(t *testing.T) {
	m := &stateMachine{cur: sm.S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{sm.E60HwHalted, sm.S50HwHaltWait, actErrHaltWorker | actProgress},
		{sm.E15HwHaltDone, sm.S30SwCleanUpWait, actSwCleanUp},
		{sm.E40SwCleaned, sm.S40HwCleanUpWait, actHwCleanUp},
		{sm.E25HwCleanUpDone, sm.S99Running, actHwStartUp},
	})
	m = &stateMachine{cur: sm.S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{sm.E90SwHalted, sm.S50HwHaltWait, actErrHaltWorker},
		{sm.E15HwHaltDone, sm.S30SwCleanUpWait, actSwCleanUp},
		{sm.E40SwCleaned, sm.S40HwCleanUpWait, actHwCleanUp},
		{sm.E25HwCleanUpDone, sm.S99Running, actHwStartUp},
	})
}

func TestStateIdleHaltGoesToIdle(t *testing.T) {
	m := &stateMachine{cur: sm.S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{sm.E70GoIdle, sm.S60IdleHaltWait, 0},
		{sm.E15HwHaltDone, sm.S30SwCleanUpWait, actSwCleanUp},
		{sm.E40SwCleaned, sm.S40HwCleanUpWait, actHwCleanUp},
		{sm.E25HwCleanUpDone, sm.S20Idle, actHwStartUp},
	})
	assert.False(t, m.goRunning, "entering s60 clears go_s99_running")
}

func TestStateFreezeAndLinkDown(t *testing.T) {
	m := &stateMachine{cur: sm.S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{sm.E80HwFreeze, sm.S80HwFreeze, actFreezeNotify},
		{sm.E81HwFrozen, sm.S82FreezeSwClean, actSwCleanUp},
		{sm.E40SwCleaned, sm.S82FreezeSwClean, actUnfreezeDone},
		{sm.E82HwUnfreeze, sm.S99Running, actHwStartUp},
	})
	m = &stateMachine{cur: sm.S99Running, goRunning: true}
	runSteps(t, m, []stateStep{
		{sm.E85LinkDown, sm.S80HwFreeze, actFreezeNotify},
		{sm.E81HwFrozen, sm.S82FreezeSwClean, actSwCleanUp},
		{sm.E82HwUnfreeze, sm.S20Idle, actHwStartUp},
	})
}

func TestStateDownFromEverywhere(t *testing.T) {
	for s := sm.S00HwDown; s < sm.NumStates; s++ {
		m := &stateMachine{cur: s, goRunning: true}
		m.step(sm.E00GoHwDown, "test")
		assert.Equal(t, sm.S00HwDown, m.cur, "from %v", s)
		if s != sm.S00HwDown {
			assert.False(t, m.goRunning, "entering s00 clears go_s99_running (from %v)", s)
		}
	}
}

func TestStateIgnoredEventsKeepState(t *testing.T) {
	// Running ignores start-up events; hw_down ignores halts.
	for _, c := range []struct {
		s  sm.State
		ev sm.Event
	}{
		{sm.S99Running, sm.E10GoHwStart}, {sm.S99Running, sm.E25HwCleanUpDone}, {sm.S99Running, sm.E40SwCleaned},
		{sm.S00HwDown, sm.E60HwHalted}, {sm.S00HwDown, sm.E90SwHalted}, {sm.S20Idle, sm.E90SwHalted},
	} {
		m := &stateMachine{cur: c.s, goRunning: c.s == sm.S99Running}
		_, entered := m.step(c.ev, "")
		assert.Equal(t, c.s, m.cur, "%v + %v", c.s, c.ev)
		assert.False(t, entered)
		assert.Zero(t, m.nhist, "no transition recorded")
	}
}

func TestStateEnteredRunningAndHistory(t *testing.T) {
	m := &stateMachine{}
	_, entered := m.step(sm.E30GoRunning, "user")
	assert.False(t, entered)
	m.step(sm.E15HwHaltDone, "")
	_, entered = m.step(sm.E25HwCleanUpDone, "")
	assert.True(t, entered, "entering s99 from another state asks for sdma_flush")
	h := m.history(nil)
	require.Len(t, h, 3)
	assert.Equal(t, "s00_hw_down -e30_go_running-> s10_hw_start_up_halt_wait (user)", h[0].String())
	assert.Equal(t, sm.S99Running, h[2].To)

	for i := 0; i < 2*historyLen; i++ {
		m.step(sm.E90SwHalted, "")
		m.step(sm.E15HwHaltDone, "")
		m.step(sm.E40SwCleaned, "")
		m.step(sm.E25HwCleanUpDone, "")
	}
	h = m.history(nil)
	require.Len(t, h, historyLen)
	assert.Equal(t, sm.S99Running, h[len(h)-1].To)
	assert.Equal(t, "s99_running", sm.S99Running.String())
	assert.Equal(t, "e90_sw_halted", sm.E90SwHalted.String())
	assert.Equal(t, "State(200)", sm.State(200).String())
}

func TestStateTableHasNoAccidentalCells(t *testing.T) {
	// Every cell that moves to s00 is an e00 (go_hw_down) cell: a forgotten initialisation would
	// show up as a zero cell moving the engine down.
	for s := sm.S00HwDown; s < sm.NumStates; s++ {
		for e := sm.E00GoHwDown; e < sm.NumEvents; e++ {
			c := stateTable[s][e]
			if c.to == sm.S00HwDown {
				assert.Equal(t, sm.E00GoHwDown, e, "%v + %v moves to s00", s, e)
			}
		}
	}
}

// renderStateTable renders stateTable as the package documentation shows it: one row per
// state, one column per event. A cell is the next state (sNN, or "up" for s99 if go_s99_running
// else s20), "+g"/"-g" if it sets/clears go_s99_running, and after a colon the actions: H
// err_halt_worker, S sw clean, C hw clean, U hw start-up, T sw tear-down, F freeze notify, D
// unfreeze done, P a final progress pass. "." is a cell that does nothing.
func renderStateTable() string {
	letters := []struct {
		a stateAction
		c byte
	}{{actErrHaltWorker, 'H'}, {actSwCleanUp, 'S'}, {actHwCleanUp, 'C'}, {actHwStartUp, 'U'},
		{actSwTearDown, 'T'}, {actFreezeNotify, 'F'}, {actUnfreezeDone, 'D'}, {actProgress, 'P'}}
	cell := func(c transition) string {
		s := ""
		switch c.to {
		case stay:
		case startUp:
			s = "up"
		default:
			s = c.to.String()[:3]
		}
		switch c.run {
		case runSet:
			s += "+g"
		case runClear:
			s += "-g"
		}
		if c.act != 0 {
			s += ":"
			for _, l := range letters {
				if c.act&l.a != 0 {
					s += string(l.c)
				}
			}
		}
		if s == "" {
			s = "."
		}
		return s
	}
	const w = 8
	pad := func(s string) string {
		for len(s) < w {
			s += " "
		}
		return s
	}
	out := pad("")[:4]
	for ev := sm.E00GoHwDown; ev < sm.NumEvents; ev++ {
		out += pad(ev.String()[:3])
	}
	out = trimRight(out) + "\n"
	for st := sm.S00HwDown; st < sm.NumStates; st++ {
		line := st.String()[:3] + " "
		for ev := sm.E00GoHwDown; ev < sm.NumEvents; ev++ {
			line += pad(cell(stateTable[st][ev]))
		}
		out += trimRight(line) + "\n"
	}
	return out
}

func trimRight(s string) string {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// TestDocStateTable checks that the table in the package documentation (doc.go) is stateTable.
func TestDocStateTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var doc strings.Builder
	for _, l := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(l, "//\t"); ok {
			doc.WriteString(rest + "\n")
		}
	}
	want := renderStateTable()
	if !strings.Contains(doc.String(), want) {
		t.Errorf("doc.go's state table is not stateTable; the table is:\n%s", want)
	}
}
