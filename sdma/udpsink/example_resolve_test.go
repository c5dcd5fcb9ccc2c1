package udpsink_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// ResolveLoopback is the check Listen and New (on Linux) make on ReceiverConfig.Addr and
// Config.Addr, and sdmaperf on its -udp-addr flag: an empty host is 127.0.0.1, any loopback
// address is taken, and anything else is refused before a socket is opened, so the sink never
// sends off the host.
func ExampleResolveLoopback() {
	for _, addr := range []string{":9000", "127.0.0.2:9000", "[::1]:9000", "192.0.2.1:9000", "9000"} {
		ua, err := udpsink.ResolveLoopback(addr)
		switch {
		case errors.Is(err, udpsink.ErrNotLoopback):
			fmt.Printf("%-15s refused: not loopback\n", addr)
		case errors.Is(err, udpsink.ErrInvalid):
			fmt.Printf("%-15s refused: invalid\n", addr)
		default:
			fmt.Printf("%-15s %v\n", addr, ua)
		}
	}
	// Output:
	// :9000           127.0.0.1:9000
	// 127.0.0.2:9000  127.0.0.2:9000
	// [::1]:9000      [::1]:9000
	// 192.0.2.1:9000  refused: not loopback
	// 9000            refused: invalid
}
