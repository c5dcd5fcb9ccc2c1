package sdmaprom_test

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// TestNewNil: New(nil) is refused at the call, with a panic that says so. It used to return a
// collector that registered fine and then crashed the process at the first scrape, in the
// registry's collecting goroutine, where the caller cannot recover it.
func TestNewNil(t *testing.T) {
	assert.PanicsWithValue(t, "sdmaprom: New(nil): want the *sdma.Device whose counters to collect", func() { sdmaprom.New(nil) })
}

// TestCollectClosedDevice: a device closed while registered still scrapes (its last counts).
func TestCollectClosedDevice(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Name: "closed"})
	require.NoError(t, err)
	require.NoError(t, sendOne(dev.Engine(0)))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	require.NoError(t, dev.Close())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
}

// TestConcurrentScrapes: scrapes running at once, while packets flow, each gather without error
// and see every counter go only up (run under -race).
func TestConcurrentScrapes(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "conc"})
	require.NoError(t, err)
	defer dev.Close()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			last := map[string]float64{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				mfs, err := reg.Gather()
				if !assert.NoError(t, err) {
					return
				}
				for _, mf := range mfs {
					for _, m := range mf.GetMetric() {
						key := mf.GetName()
						for _, l := range m.GetLabel() {
							key += "," + l.GetValue()
						}
						v := m.GetCounter().GetValue()
						assert.GreaterOrEqual(t, v, last[key], key)
						last[key] = v
					}
				}
			}
		})
	}
	for i := range 200 {
		require.NoError(t, sendOne(dev.Engine(i%2)))
	}
	close(stop)
	wg.Wait()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "sdma_engine_packets_total" {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			assert.Equal(t, 200.0, sum)
		}
	}
}

// TestDeviceNamesPerRegistry: devices of distinct names share a registry, each its own series; a
// second device of the same name is refused at Register with an AlreadyRegisteredError, and a
// name that is not valid UTF-8 is refused there too, the registry gathering on without them. A
// second device, of any name, used to be refused as a duplicate collector (every description was
// the same), and a bad name to panic at the first scrape, in the registry's goroutine.
func TestDeviceNamesPerRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	newDev := func(name string) *sdma.Device {
		dev, err := sdma.NewDevice(sdma.Config{Name: name})
		require.NoError(t, err)
		t.Cleanup(func() { dev.Close() })
		return dev
	}
	for _, name := range []string{"twin0", "twin1"} {
		require.NoError(t, reg.Register(sdmaprom.New(newDev(name))), name)
	}
	var dup prometheus.AlreadyRegisteredError
	require.ErrorAs(t, reg.Register(sdmaprom.New(newDev("twin0"))), &dup)
	require.Error(t, reg.Register(sdmaprom.New(newDev("bad\xff"))))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	devices := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "sdma_engine_packets_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "device" {
					devices[l.GetValue()] = true
				}
			}
		}
	}
	assert.Equal(t, map[string]bool{"twin0": true, "twin1": true}, devices)
}

// TestZeroCollector: a Collector not made by New is refused at Register with an error that says
// to use New, and the registry gathers on; a scrape of one (registered where nothing checks it)
// yields an error, not a crash. Register used to panic with a nil dereference (on a nil
// description, leaving Describe's goroutine blocked), and Collect to crash the scraping
// goroutine.
func TestZeroCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var err error
	require.NotPanics(t, func() { err = reg.Register(&sdmaprom.Collector{}) })
	require.ErrorContains(t, err, "sdmaprom.New")
	_, err = reg.Gather()
	require.NoError(t, err)

	ch := make(chan prometheus.Metric, 64)
	require.NotPanics(t, func() { (&sdmaprom.Collector{}).Collect(ch) })
	close(ch)
	n := 0
	for m := range ch {
		n++
		require.ErrorContains(t, m.Write(nil), "sdmaprom.New")
	}
	require.Equal(t, 1, n)
}
