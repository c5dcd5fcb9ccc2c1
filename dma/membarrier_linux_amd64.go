//go:build linux && amd64 && gc && !purego && !race

package dma

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The asymmetric barrier of Registration's plain use counts (see Registration): membarrier(2)
// with MEMBARRIER_CMD_PRIVATE_EXPEDITED makes every running thread of the process execute a full
// memory barrier before the call returns (threads not running pass through the scheduler, which
// is one), so that Deregister, the rare side, pays for the fence the per-packet Acquire leaves
// out. The process registers its intent once (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED), as the
// kernel requires before the command may be used. Only on amd64 outside -race and purego, where
// the owner's adds are plain instructions (store_amd64.go); elsewhere every count is atomic.
const (
	membarrierCmdQuery                    = 0
	membarrierCmdPrivateExpedited         = 1 << 3
	membarrierCmdRegisterPrivateExpedited = 1 << 4
)

var (
	membarrierOnce sync.Once
	membarrierOK   bool // written once under membarrierOnce, read after it
)

// plainCounts reports whether registrations may count their uses with plain adds: membarrier's
// private expedited command is supported and registered (probed once, at the first Register).
func plainCounts() bool {
	membarrierOnce.Do(func() {
		mask, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdQuery, 0, 0)
		if errno != 0 || mask&membarrierCmdPrivateExpedited == 0 || mask&membarrierCmdRegisterPrivateExpedited == 0 {
			return
		}
		_, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdRegisterPrivateExpedited, 0, 0)
		membarrierOK = errno == 0
	})
	return membarrierOK
}

// processBarrier runs a full memory barrier on every thread of the process (membarrier's
// private expedited command). Only called once plainCounts reported true.
func processBarrier() {
	for {
		_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdPrivateExpedited, 0, 0)
		switch errno {
		case 0:
			return
		case syscall.EINTR, syscall.EAGAIN:
			continue
		}
		// Registered and probed: the kernel does not fail it. Going on would let Deregister
		// unmap memory a use may still hold.
		panic("dma: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): " + errno.Error())
	}
}
