//go:build linux

package udpsink

import (
	"encoding/binary"
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

// gsoCmsg returns the UDP_SEGMENT control message of wire message i of e's batch, in e.oob
// (grown to hold one for each message if need be): the kernel cuts the message into datagrams
// of size bytes.
func (e *engineState) gsoCmsg(i, size int) []byte {
	space := unix.CmsgSpace(2)
	if need := (i + 1) * space; need > len(e.oob) {
		oob := make([]byte, max(need, 2*len(e.oob), 8*space))
		copy(oob, e.oob)
		// Messages before i point into the old buffer: they keep it alive and stay valid.
		e.oob = oob
	}
	b := e.oob[i*space : (i+1)*space : (i+1)*space]
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
	return b
}
