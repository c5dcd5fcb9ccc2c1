package dma

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmapAligned maps size bytes (a multiple of PageSize) of zeroed anonymous memory whose first
// byte is aligned to align (a power of two, at least PageSize). To align beyond the OS's own
// alignment it maps size+align-PageSize bytes and unmaps the head before the aligned start and the
// tail after its end at once, so nothing but the returned bytes stays mapped (munmapBytes
// releases them all).
func mmapAligned(size, align int) ([]byte, error) {
	extra := 0
	if align > PageSize {
		extra = align - PageSize
	}
	total := uintptr(size + extra)
	p, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	base := uintptr(p)
	start, end, top := alignWithin(base, total, uintptr(size), uintptr(align), uintptr(unix.Getpagesize()))
	if start > base {
		_ = unix.MunmapPtr(p, start-base) // unmapping part of our own fresh mapping cannot fail
	}
	if end < top {
		_ = unix.MunmapPtr(unsafe.Add(p, end-base), top-end)
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, start-base)), size), nil
}

// alignWithin returns, for a mapping of total bytes at base (aligned to the OS page pg), where
// the aligned bytes start, where what stays mapped ends (size bytes from start rounded up to the
// OS page, as the kernel rounds munmapBytes' unmap) and where the mapping ends (total rounded up
// likewise). [base, start) and [end, top) are the over-allocation to unmap, all on OS page
// boundaries: start is base unless align is a multiple of pg.
func alignWithin(base, total, size, align, pg uintptr) (start, end, top uintptr) {
	start = (base + align - 1) &^ (align - 1)
	end = (start + size + pg - 1) &^ (pg - 1)
	top = (base + total + pg - 1) &^ (pg - 1)
	return start, end, top
}

// munmapBytes unmaps memory from mmapAligned: what it left mapped, b's bytes rounded up to the
// OS page (unmapLen).
func munmapBytes(b []byte) error {
	return unmapRounded(b, uintptr(unix.Getpagesize()), unix.MunmapPtr)
}

// unmapRounded is munmapBytes on an OS page of pg bytes, unmapping with munmap.
func unmapRounded(b []byte, pg uintptr, munmap func(unsafe.Pointer, uintptr) error) error {
	if err := munmap(unsafe.Pointer(unsafe.SliceData(b)), unmapLen(len(b), pg)); err != nil {
		return fmt.Errorf("dma: munmap: %w", err)
	}
	return nil
}

// unmapLen is the length munmapBytes unmaps for n bytes from mmapAligned: n rounded up to the OS
// page pg, where mmapAligned's mapping ends (alignWithin's end: its start is on an OS page, as
// base is, or a multiple of an align above the OS page). The kernel's munmap rounds a length up
// to its page itself, but qemu-user emulating a page larger than the host's (-p 65536 on a 4 KiB
// host) does not: a 4 KiB Region's munmap left its 64 KiB guest page mapped.
func unmapLen(n int, pg uintptr) uintptr {
	return (uintptr(n) + pg - 1) &^ (pg - 1)
}
