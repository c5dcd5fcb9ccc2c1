//go:build linux

package udpsink

import (
	"net"

	"golang.org/x/sys/unix"
)

// queuedBytes returns the length of the next datagram in conn's receive queue, 0 when none
// (udp_ioctl's SIOCINQ: first_packet_length).
func queuedBytes(conn *net.UDPConn) (int, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}
