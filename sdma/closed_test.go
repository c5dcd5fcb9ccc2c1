package sdma_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestEngineClosed: Closed tells an engine that will never run again (its device closed, or shut
// down) from one that is only stopped or halted and may run again; Running is false for both.
func TestEngineClosed(t *testing.T) {
	for _, down := range []string{"Close", "Shutdown"} {
		t.Run(down, func(t *testing.T) {
			dev, err := sdma.NewDevice(sdma.Config{Engines: 2})
			require.NoError(t, err)
			e := dev.Engine(0)
			require.True(t, e.Running())
			require.False(t, e.Closed())
			require.NoError(t, e.Stop())
			require.False(t, e.Running())
			require.False(t, e.Closed(), "a stopped engine of a live device may run again")
			require.NoError(t, e.Start())
			require.True(t, e.Running())
			if down == "Close" {
				require.NoError(t, dev.Close())
			} else {
				require.NoError(t, dev.Shutdown(context.Background()))
			}
			for i := range dev.NumEngines() {
				require.True(t, dev.Engine(i).Closed(), "engine %d after %s", i, down)
				require.False(t, dev.Engine(i).Running(), "engine %d after %s", i, down)
			}
		})
	}
}

// ExampleEngine_Closed: a sender tells a closed device (give up) from a stopped engine (wait for
// it to run again).
func ExampleEngine_Closed() {
	dev, err := sdma.NewDevice(sdma.Config{})
	if err != nil {
		panic(err)
	}
	e := dev.Engine(0)
	_ = e.Stop()
	fmt.Println("stopped: running", e.Running(), "closed", e.Closed())
	_ = e.Start()
	_ = dev.Close()
	fmt.Println("after Close: running", e.Running(), "closed", e.Closed())
	// Output:
	// stopped: running false closed false
	// after Close: running false closed true
}
