package verbs_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/verbs"
)

type lenSink struct {
	mu sync.Mutex
	n  []int
}

func (s *lenSink) Deliver(_ int, segs [][]byte) error {
	n := 0
	for _, b := range segs {
		n += len(b)
	}
	s.mu.Lock()
	s.n = append(s.n, n)
	s.mu.Unlock()
	return nil
}

// One flow, packets on both sides of the threshold: each goes its way, the sink sees them all
// in order.
func Example() {
	sink := &lenSink{}
	sd, err := sdma.NewDevice(sdma.Config{Sink: sink})
	if err != nil {
		panic(err)
	}
	defer sd.Close()
	dev, err := verbs.New(verbs.Config{SDMA: sd}) // PIOThreshold 256, the kernel's default
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	f := dev.NewFlow(0, 0)
	ctx := context.Background()
	for _, n := range []int{64, 256, 1024, 100} {
		path, err := f.Send(ctx, [][]byte{make([]byte, n)}, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(n, "bytes by", path)
		f.Drain(ctx)
	}
	fmt.Println("sink saw", sink.n)
	// Output:
	// 64 bytes by pio
	// 256 bytes by pio
	// 1024 bytes by sdma
	// 100 bytes by pio
	// sink saw [64 256 1024 100]
}
