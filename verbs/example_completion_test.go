package verbs_test

import (
	"context"
	"fmt"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/verbs"
)

// done is a Completion that says when each packet's memory came back; a pointer type, so that
// Send does not allocate for it.
type done struct{ name string }

func (d *done) Done(path verbs.Path, err error) { fmt.Println(d.name, "done by", path, err) }

// A Completion is told once per packet when its memory is the caller's again: a PIO packet's
// before Send returns (the bytes were copied), an SDMA packet's when its engine completes it
// (here inside Drain). Sent and Busy count each flow's packets by path.
func ExampleCompletion() {
	sd, err := sdma.NewDevice(sdma.Config{Sink: &sdmatest.DiscardSink{}})
	if err != nil {
		panic(err)
	}
	defer sd.Close()
	dev, err := verbs.New(verbs.Config{SDMA: sd})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	f := dev.NewFlow(0, 0)
	ctx := context.Background()

	small, large := &done{"small"}, &done{"large"}
	if _, err := f.Send(ctx, [][]byte{make([]byte, 64)}, small); err != nil {
		panic(err)
	}
	fmt.Println("small sent")
	if err := f.Drain(ctx); err != nil { // the small packet's credits come back
		panic(err)
	}
	if _, err := f.Send(ctx, [][]byte{make([]byte, 4096)}, large); err != nil {
		panic(err)
	}
	if err := f.Drain(ctx); err != nil {
		panic(err)
	}
	pioBusy, sdmaBusy := f.Busy()
	fmt.Println(f.Sent(verbs.PathPIO), f.Sent(verbs.PathSDMA), pioBusy, sdmaBusy)
	// Output:
	// small done by pio <nil>
	// small sent
	// large done by sdma <nil>
	// 1 1 0 0
}
