//go:build linux

package udpsink

import (
	"net"

	"golang.org/x/sys/unix"
)

// setReadBuffer sets conn's receive buffer to n bytes: past net.core.rmem_max with
// SO_RCVBUFFORCE when the process may (CAP_NET_ADMIN), else with SO_RCVBUF, which the kernel caps
// at rmem_max. Best effort.
func setReadBuffer(conn *net.UDPConn, n int) {
	rc, err := conn.SyscallConn()
	if err == nil {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		}); err == nil && serr == nil {
			return
		}
	}
	_ = conn.SetReadBuffer(n)
}
