package sdmaprom

import (
	"testing"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/sdma"
	"github.com/prometheus/client_golang/prometheus"
)

// TestCensusZeroDevice: the bad-input census of package sdmaprom past badinput_test.go (nil
// device, closed device, the zero Collector): a collector of a zero sdma.Device (no engines)
// registers and gathers, with no engine's series, under census.Timeout.
func TestCensusZeroDevice(t *testing.T) {
	r := census.Call(func() error {
		var d sdma.Device
		reg := prometheus.NewRegistry()
		if err := reg.Register(New(&d)); err != nil {
			return err
		}
		_, err := reg.Gather()
		return err
	})
	if r.Hung || r.Panicked || r.Err != nil {
		t.Errorf("a zero Device's collector: %v", r)
	}
}
