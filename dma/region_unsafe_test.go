package dma

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMmapAlignedTrims checks that aligning by over-allocation keeps nothing but the bytes asked
// for: alignWithin, over bases at every OS page of an align's window and OS pages of 4 and 64 KiB,
// leaves the aligned start, at least size bytes to the end rounded to the OS page, and the head and
// tail around them (what mmapAligned unmaps) on OS page boundaries within the mapping; and that
// mmapAligned's bytes are aligned and mapped until munmapBytes.
func TestMmapAlignedTrims(t *testing.T) {
	for _, pg := range []uintptr{4 << 10, 64 << 10} {
		for _, c := range []struct{ size, align uintptr }{{PageSize, PageSize}, {PageSize, 1 << 16}, {5 * PageSize, 8 * PageSize}, {3 << 20, 4 << 20}, {64 << 10, 64 << 10}} {
			total := c.size + c.align - min(c.align, PageSize) // mmapAligned's
			for base := uintptr(1 << 30); base < 1<<30+max(c.align, pg)*2; base += pg {
				start, end, top := alignWithin(base, total, c.size, c.align, pg)
				where := fmt.Sprintf("pg %d %+v base %#x: [%#x, %#x) of [%#x, %#x)", pg, c, base, start, end, base, top)
				require.Zero(t, start%c.align, where)
				require.GreaterOrEqual(t, start, base, where)
				require.Zero(t, (start-base)%pg, where)
				require.GreaterOrEqual(t, end-start, c.size, where)
				require.Less(t, end-start, c.size+pg, where)
				require.Zero(t, end%pg, where)
				require.LessOrEqual(t, end, top, where)
				require.Zero(t, top%pg, where)
				require.GreaterOrEqual(t, top, base+total, where)
			}
		}
	}
	pg := unix.Getpagesize()
	// mapped asks the kernel whether the OS page at b's first byte is mapped (b is never read).
	mapped := func(b []byte) bool {
		p := unsafe.SliceData(b)
		p = (*byte)(unsafe.Add(unsafe.Pointer(p), -int(uintptr(unsafe.Pointer(p))%uintptr(pg))))
		err := unix.Msync(unsafe.Slice(p, pg), unix.MS_ASYNC)
		if errors.Is(err, unix.ENOMEM) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	for _, c := range []struct{ size, align int }{{PageSize, PageSize}, {PageSize, 1 << 16}, {5 * PageSize, 8 * PageSize}, {3 << 20, 4 << 20}} {
		b, err := mmapAligned(c.size, c.align)
		require.NoError(t, err)
		a := sliceAddr(b)
		require.Zero(t, a%uintptr(c.align), "%+v at %#x", c, a)
		require.True(t, mapped(b))
		require.True(t, mapped(b[c.size-1:]))
		require.NoError(t, munmapBytes(b))
		require.False(t, mapped(b), "%+v: munmapBytes unmapped it", c)
	}
}
