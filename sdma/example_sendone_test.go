package sdma_test

import (
	"context"
	"fmt"

	"github.com/gosdma/gosdma/sdma"
)

// Send one packet: the README's first program. The sink is the wire; the engine gathers the
// packet's fragments, delivers them, then completes the txreq.
func Example_sendOnePacket() {
	wire := sdma.SinkFunc(func(engine int, segs [][]byte) error {
		fmt.Printf("engine %d sent %q\n", engine, segs)
		return nil
	})
	dev, err := sdma.NewDevice(sdma.Config{Sink: wire})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()

	done := make(chan sdma.Status, 1)
	var tx sdma.TxReq
	payload := []byte("hello")
	if err := tx.Init(0, len(payload), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { done <- st })); err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.AddBytes(dev, payload); err != nil { // mapped now, unmapped at completion
		fmt.Println(err)
		return
	}
	if err := dev.Engine(0).SendWait(context.Background(), &tx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("completed:", <-done)
	// Output:
	// engine 0 sent ["hello" "\x00\x00\x00"]
	// completed: ok
}
