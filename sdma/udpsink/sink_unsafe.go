//go:build linux

package udpsink

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendmsg is the RawConn write callback: one sendmsg(2) of e.msg on fd. It reports false (wait
// for the socket to be writable and call again) on EAGAIN, and leaves any other errno in e.errno.
// MSG_NOSIGNAL is moot for UDP but states the intent.
func (e *engineState) sendmsg(fd uintptr) bool {
	_, _, errno := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&e.msg)), unix.MSG_NOSIGNAL)
	if errno == unix.EAGAIN {
		return false
	}
	e.errno = errno
	return true
}
