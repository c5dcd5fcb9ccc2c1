package sdma

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocHeader is where the runtime puts an Engine in its allocation: after an 8-byte header (an
// object over 512 bytes that holds pointers), so that its field at offset o lies in the cache
// line of o+allocHeader. TestEngineAllocHeader checks it on a real engine.
const allocHeader = 8

// linesOf returns the cache lines (64 bytes) that the byte ranges [o, o+n) of an Engine touch, the
// ranges given as pairs.
func linesOf(ranges ...uintptr) map[uintptr]bool {
	ls := map[uintptr]bool{}
	for i := 0; i < len(ranges); i += 2 {
		o, n := ranges[i]+allocHeader, ranges[i+1]
		for l := o / 64; l <= (o+n-1)/64; l++ {
			ls[l] = true
		}
	}
	return ls
}

// TestEngineAllocHeader checks the engine's placement that the line plan of Engine assumes.
func TestEngineAllocHeader(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the line plan is for 64-bit targets")
	}
	dev, err := NewDevice(Config{Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	assert.Equal(t, uintptr(allocHeader), uintptr(unsafe.Pointer(dev.Engine(0)))%64, "an Engine starts 8 bytes into a line")
}

// TestEngineHotLines pins the cache lines of the engine's fields that each packet touches (see
// Engine): a mutant that moves one of them out of its group touches one line more.
func TestEngineHotLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the line plan is for 64-bit targets")
	}
	var e Engine
	sz := func(n uintptr) uintptr { return n }
	send := []uintptr{ // Send's reads
		unsafe.Offsetof(e.gate), 4, unsafe.Offsetof(e.parks), 1, unsafe.Offsetof(e.dev), 8,
		unsafe.Offsetof(e.ring), 8, unsafe.Offsetof(e.mask), 8, unsafe.Offsetof(e.test), 8,
		unsafe.Offsetof(e.txRing), 16, // its pointer and length
	}
	assert.Len(t, linesOf(send...), 1, "Send's fields")
	pass := append(send, // a hardware pass's and a packet's reads
		unsafe.Offsetof(e.manual), 1, unsafe.Offsetof(e.batching), 1, unsafe.Offsetof(e.pending), 4,
		unsafe.Offsetof(e.stopping), 4, unsafe.Offsetof(e.descIntr), 8, unsafe.Offsetof(e.mode), 8,
		unsafe.Offsetof(e.sink), 16, unsafe.Offsetof(e.idx), 8)
	assert.Len(t, linesOf(pass...), 2, "the read group")
	h := unsafe.Offsetof(e.hw)
	hw := []uintptr{ // written per packet under hwMu
		unsafe.Offsetof(e.hwStats), unsafe.Sizeof(e.hwStats),
		unsafe.Offsetof(e.hwMu), unsafe.Offsetof(e.hwMu.bias) + 8, // a hold's words
		h + unsafe.Offsetof(e.hw.head), 8, h + unsafe.Offsetof(e.hw.waitTail), 8,
		h + unsafe.Offsetof(e.hw.sinceIntr), 8, h + unsafe.Offsetof(e.hw.passes), 8,
		h + unsafe.Offsetof(e.hw.completed), 8, h + unsafe.Offsetof(e.hw.idle), 1,
		h + unsafe.Offsetof(e.hw.headToHost), 1, h + unsafe.Offsetof(e.hw.intrPass), 1,
		h + unsafe.Offsetof(e.hw.faults) + unsafe.Offsetof(e.hw.faults.active), 1,
		h + unsafe.Offsetof(e.hw.segs), sz(2 * unsafe.Sizeof(e.hw.segs[0])), // a packet of two segments
	}
	assert.Len(t, linesOf(hw...), 4, "the hardware group")
	for l := range linesOf(hw...) {
		assert.False(t, linesOf(pass...)[l], "the hardware group off the read group's lines")
	}
	compl := []uintptr{ // a completion pass's reads and writes
		unsafe.Offsetof(e.dmawait) + unsafe.Offsetof(e.dmawait.count), 4,
		unsafe.Offsetof(e.sleepers), 4, unsafe.Offsetof(e.passStats), unsafe.Sizeof(e.passStats),
	}
	assert.Len(t, linesOf(compl...), 1, "the completion group")
}
