package sdma

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestTxReqCompletionGroup checks that every field a completion touches for a txreq that mapped
// nothing lies in the TxReq's first 64 bytes (see TxReq), and that the descriptors, read only
// when something was mapped, come after them.
func TestTxReqCompletionGroup(t *testing.T) {
	var tx TxReq
	group := map[string]uintptr{
		"state":      unsafe.Offsetof(tx.state),
		"numDesc":    unsafe.Offsetof(tx.numDesc),
		"descLimit":  unsafe.Offsetof(tx.descLimit),
		"nregs":      unsafe.Offsetof(tx.nregs),
		"coalescing": unsafe.Offsetof(tx.coalescing),
		"nmaps":      unsafe.Offsetof(tx.nmaps),
		"wait":       unsafe.Offsetof(tx.wait),
		"complete":   unsafe.Offsetof(tx.complete),
	}
	sizes := map[string]uintptr{"wait": unsafe.Sizeof(tx.wait), "complete": unsafe.Sizeof(tx.complete)}
	for f, o := range group {
		assert.LessOrEqual(t, o+max(sizes[f], 1), uintptr(64), "%s in the completion group", f)
	}
	if unsafe.Sizeof(uintptr(0)) == 8 { // two registrations fit beside them on 64-bit targets
		assert.LessOrEqual(t, unsafe.Offsetof(tx.regs)+unsafe.Sizeof(tx.regs), uintptr(64), "regs in the completion group")
	}
	assert.GreaterOrEqual(t, unsafe.Offsetof(tx.descs), unsafe.Offsetof(tx.regs)+unsafe.Sizeof(tx.regs), "descriptors after the group")
}

// TestEngineCounterLines checks that the engine's counters are a line away from everything a
// producer reads or writes per send, and that the producers' fields are off the engine-written
// lines.
func TestEngineCounterLines(t *testing.T) {
	var e Engine
	perSend := map[string]uintptr{ // read or written by a producer on every send
		"test":     unsafe.Offsetof(e.test),
		"txRing":   unsafe.Offsetof(e.txRing),
		"gate":     unsafe.Offsetof(e.gate),
		"inflight": unsafe.Offsetof(e.inflight),
	}
	written := map[string]uintptr{ // the first words written per packet or pass by the engine
		"hwStats":   unsafe.Offsetof(e.hwStats),
		"passStats": unsafe.Offsetof(e.waitMu), // the completion group's line
		"stats":     unsafe.Offsetof(e.stats),
	}
	for f, o := range perSend {
		for g, w := range written {
			assert.GreaterOrEqual(t, w-o, uintptr(lineSize), "%s a line before %s", f, g)
		}
	}
	end := unsafe.Offsetof(e.stats.sleeps) + unsafe.Sizeof(e.stats.sleeps)
	assert.GreaterOrEqual(t, unsafe.Sizeof(e)-end, uintptr(lineSize), "tail padding after the counters")
	hwSide := unsafe.Offsetof(e.stats.recoveries)
	completion := unsafe.Offsetof(e.stats.aborted)
	assert.GreaterOrEqual(t, completion-hwSide, uintptr(lineSize), "hardware and completion counters apart")
	assert.GreaterOrEqual(t, unsafe.Offsetof(e.stats.ringFull)-completion, uintptr(lineSize), "completion and producer counters apart")
	hwEnd := unsafe.Offsetof(e.hw) + unsafe.Sizeof(e.hw)
	assert.GreaterOrEqual(t, unsafe.Offsetof(e.waitMu)-hwEnd, uintptr(lineSize), "hardware and completion groups apart")
}

// TestTxReqSolesLine checks that the descriptors' Sole handles, which every add writes and every
// unmap of a kvaddr fragment reads, share the cache line of coalesceIdx and next (written by Init
// and the lists) instead of taking a line of their own, and come after the descriptors.
func TestTxReqSolesLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the line plan is for 64-bit targets")
	}
	var tx TxReq
	line := func(o uintptr) uintptr { return o / lineSize }
	soles := unsafe.Offsetof(tx.soles)
	last := soles + unsafe.Sizeof(tx.soles) - 1
	assert.Equal(t, line(unsafe.Offsetof(tx.next)), line(soles), "soles on next's line")
	assert.Equal(t, line(soles), line(last), "soles on one line")
	assert.Equal(t, line(unsafe.Offsetof(tx.coalesceIdx)), line(soles), "soles on coalesceIdx's line")
	assert.Greater(t, soles, unsafe.Offsetof(tx.descs), "soles after the descriptors")
}
