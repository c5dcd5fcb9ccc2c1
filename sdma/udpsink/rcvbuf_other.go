//go:build !linux

package udpsink

import "net"

// setReadBuffer sets conn's receive buffer to n bytes, best effort.
func setReadBuffer(conn *net.UDPConn, n int) { _ = conn.SetReadBuffer(n) }
