package sdmaprom_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// Register a device's counters; a Prometheus handler (promhttp.Handler) then serves them.
func Example() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "hfi1_0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(sdmaprom.New(dev))
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs[:2] {
		fmt.Println(mf.GetName(), len(mf.GetMetric()), "series")
	}
	// Output:
	// sdma_device_unmap_errors_total 1 series
	// sdma_engine_aborted_total 2 series
}
