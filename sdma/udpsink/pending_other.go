//go:build !linux

package udpsink

import "net"

// queuedBytes returns ErrLinuxOnly: Pending asks Linux's SIOCINQ.
func queuedBytes(*net.UDPConn) (int, error) { return 0, ErrLinuxOnly }
