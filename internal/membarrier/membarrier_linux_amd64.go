//go:build linux && amd64 && gc && !purego && !race

package membarrier

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	cmdQuery                    = 0
	cmdPrivateExpedited         = 1 << 3
	cmdRegisterPrivateExpedited = 1 << 4
)

var (
	once sync.Once
	ok   bool // written once under once, read after it
)

// Available reports whether Barrier may be used: membarrier's private expedited command is
// supported and this process registered its intent (the kernel requires it before the command),
// probed and registered once, at the first call.
func Available() bool {
	once.Do(func() {
		mask, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdQuery, 0, 0)
		if errno != 0 || mask&cmdPrivateExpedited == 0 || mask&cmdRegisterPrivateExpedited == 0 {
			return
		}
		_, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, cmdRegisterPrivateExpedited, 0, 0)
		ok = errno == 0
	})
	return ok
}

// Barrier runs a full memory barrier on every running thread of the process. Only call it once
// Available reported true.
func Barrier() {
	for {
		_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdPrivateExpedited, 0, 0)
		switch errno {
		case 0:
			return
		case syscall.EINTR, syscall.EAGAIN:
			continue
		}
		// Registered and probed: the kernel does not fail it. Going on would break the pairing
		// the caller relies on.
		panic("membarrier: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): " + errno.Error())
	}
}
