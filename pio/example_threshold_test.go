package pio_test

import (
	"fmt"

	"github.com/gosdma/gosdma/pio"
)

// The credit-return threshold a context is made with, by type, for a context of 128 blocks (64
// bytes each) and a 4096-byte MTU with 32-dword header queue entries: the kernel context's
// returns credits once an MTU and a header's blocks, DIV_ROUND_UP(4096+128, 64) = 66, are
// left to use (128-66 = 62, under half); the ACK context's at half; the user context's at 33%.
// A context too small for one MTU returns at every block (threshold 1).
func ExampleDefaultCreditThreshold() {
	const credits, mtu, hdrqentsize = 128, 4096, 32
	fmt.Println(pio.MTUToThreshold(credits, mtu, hdrqentsize), pio.PercentToThreshold(credits, 50))
	for _, t := range []pio.Type{pio.Kernel, pio.VL15, pio.ACK, pio.User} {
		fmt.Println(t, pio.DefaultCreditThreshold(t, credits, mtu, hdrqentsize))
	}
	fmt.Println(pio.MTUToThreshold(40, mtu, hdrqentsize))
	// Output:
	// 62 64
	// kernel 62
	// vl15 62
	// ack 64
	// user 42
	// 1
}
