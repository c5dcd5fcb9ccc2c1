//go:build linux

package udpsink

import (
	"net"

	"golang.org/x/sys/unix"
)

// queuedBytes returns the length of the next datagram in conn's receive queue, 0 when none
// (udp_ioctl's SIOCINQ: first_packet_length, never negative). The kernel writes a C int, 4 bytes
// (put_user of an int): IoctlGetInt would read 8 into a Go int on a 64-bit system, the length in
// the upper half on a big-endian one (s390x: 11 << 32 for 11 bytes).
func queuedBytes(conn *net.UDPConn) (int, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n uint32
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetUint32(int(fd), unix.SIOCINQ) }); err != nil {
		return 0, err
	}
	return int(n), ierr
}
