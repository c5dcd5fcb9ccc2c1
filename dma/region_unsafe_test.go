package dma

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// vmSize returns the process's mapped address space in bytes (VmSize of /proc/self/status).
func vmSize(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmSize:" {
			kb, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// TestMmapAlignedUnmapsSlack checks that mmapAligned gives back the over-allocation it aligns
// with, head and tail, in the process's own accounting (the address space is only reserved:
// nothing here is touched): 32 mappings of 8 MiB aligned to 16 MiB map 256 MiB, not the 512 MiB of
// the windows they were cut from, and munmapBytes gives all of it back. Half the align, so that
// head and tail are both large whatever the kernel's placement (top-down below the last one: a
// head of 8 MiB less a page, a tail of 8 MiB), and either left mapped shows. TestMmapAlignedTrims
// checks the arithmetic; this, that the unmaps happen.
func TestMmapAlignedUnmapsSlack(t *testing.T) {
	const n, size, align = 32, 8 << 20, 16 << 20
	before := vmSize(t)
	var bufs [][]byte
	for range n {
		b, err := mmapAligned(size, align)
		require.NoError(t, err)
		require.Zero(t, sliceAddr(b)%align)
		bufs = append(bufs, b)
	}
	// Slack for the runtime's own mappings (a heap arena is 64 MiB): below the ~256 MiB that the
	// head or the tail alone would leave.
	grown := vmSize(t) - before
	require.Less(t, grown, n*size+96<<20, "mapped %d MiB for %d MiB", grown>>20, n*size>>20)
	for _, b := range bufs {
		require.NoError(t, munmapBytes(b))
	}
	require.Less(t, vmSize(t)-before, 96<<20, "munmapBytes gave the memory back")
}

// TestMunmapBytesRoundsToPage: munmapBytes unmaps what mmapAligned left mapped, the bytes
// rounded up to the OS page (alignWithin's end), on OS pages of 4 and 64 KiB: on a 64 KiB page
// (arm64, ppc64le kernels; qemu-user -p 65536) a Region of 4 KiB is the whole page. It unmapped
// len(b) bytes, which the kernel rounds up itself but qemu-user with a page larger than its
// host's does not: TestMmapAlignedTrims failed under qemu-aarch64 -p 65536 ("munmapBytes
// unmapped it": the page stayed mapped). Nothing is unmapped here: munmap is a stand-in.
func TestMunmapBytesRoundsToPage(t *testing.T) {
	for _, pg := range []uintptr{4 << 10, 64 << 10} {
		for _, c := range []struct{ size, align uintptr }{{PageSize, PageSize}, {PageSize, 1 << 16}, {5 * PageSize, 8 * PageSize}, {3 << 20, 4 << 20}, {64 << 10, 64 << 10}, {68 << 10, PageSize}} {
			total := c.size + c.align - min(c.align, PageSize) // mmapAligned's
			base := uintptr(1 << 30)
			start, end, _ := alignWithin(base, total, c.size, c.align, pg)
			b := make([]byte, c.size) // stands for the mapping at start: only its length matters
			var gotP unsafe.Pointer
			var gotN uintptr
			require.NoError(t, unmapRounded(b, pg, func(p unsafe.Pointer, n uintptr) error { gotP, gotN = p, n; return nil }))
			require.Equal(t, unsafe.Pointer(unsafe.SliceData(b)), gotP, "pg %d %+v", pg, c)
			require.Equal(t, end-start, gotN, "pg %d %+v: the unmap covers what mmapAligned left mapped", pg, c)
		}
	}
	err := unmapRounded(make([]byte, PageSize), PageSize, func(unsafe.Pointer, uintptr) error { return unix.EINVAL })
	require.ErrorIs(t, err, unix.EINVAL)
}
