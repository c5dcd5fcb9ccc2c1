package sdma

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeviceHotLine pins the Device's per-packet group (see Device) in one cache line: the fields
// that every add, packet and unmap reads lie in the first 64 bytes, the Device is 256 bytes (a
// size class whose objects start on a line), and a real device starts on a line. A mutant that
// moves one of them out of the group, or drops the padding, fails it.
func TestDeviceHotLine(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the line plan is for 64-bit targets")
	}
	var d Device
	hot := map[string][2]uintptr{
		"regs":     {unsafe.Offsetof(d.regs), unsafe.Sizeof(d.regs)},
		"registry": {unsafe.Offsetof(d.registry), unsafe.Sizeof(d.registry)},
		"sole":     {unsafe.Offsetof(d.sole), unsafe.Sizeof(d.sole)},
		"hints":    {unsafe.Offsetof(d.hints), unsafe.Sizeof(d.hints)},
		"state":    {unsafe.Offsetof(d.state), unsafe.Sizeof(d.state)},
	}
	for f, r := range hot {
		assert.LessOrEqual(t, r[0]+r[1], uintptr(lineSize), "%s in the Device's first line", f)
	}
	assert.Equal(t, uintptr(256), unsafe.Sizeof(d), "a Device fills the 256-byte size class")
	for range 4 {
		dev, err := NewDevice(Config{Manual: true})
		require.NoError(t, err)
		assert.Zero(t, uintptr(unsafe.Pointer(dev))%lineSize, "a Device starts on a line")
		require.NoError(t, dev.Close())
	}
}
