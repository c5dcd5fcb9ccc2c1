package sdmaprom_test

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// TestRegisterUnregisterCycle: a device's collector unregistered frees its name: a new
// collector of the same name (the same device, or a new device of that name) registers again;
// registering the same collector twice, or a second collector of the same device, is refused.
func TestRegisterUnregisterCycle(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	dev, err := sdma.NewDevice(sdma.Config{Name: "cycle"})
	require.NoError(t, err)
	defer dev.Close()
	c1 := sdmaprom.New(dev)
	require.NoError(t, reg.Register(c1))
	var dup prometheus.AlreadyRegisteredError
	require.ErrorAs(t, reg.Register(c1), &dup)
	require.ErrorAs(t, reg.Register(sdmaprom.New(dev)), &dup)
	require.True(t, reg.Unregister(c1))
	require.False(t, reg.Unregister(c1))
	c2 := sdmaprom.New(dev)
	require.NoError(t, reg.Register(c2))
	require.True(t, reg.Unregister(c2))
	dev2, err := sdma.NewDevice(sdma.Config{Name: "cycle"})
	require.NoError(t, err)
	defer dev2.Close()
	require.NoError(t, reg.Register(sdmaprom.New(dev2)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
}

// TestScrapesWhileDevicesClose: several devices in one registry, scraped concurrently while
// they send and close one by one: every gather succeeds, lints clean, and sees each series once.
func TestScrapesWhileDevicesClose(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var devs []*sdma.Device
	for _, name := range []string{"c0", "c1", "c2"} {
		dev, err := sdma.NewDevice(sdma.Config{Name: name, Engines: 2})
		require.NoError(t, err)
		devs = append(devs, dev)
		require.NoError(t, reg.Register(sdmaprom.New(dev)))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
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
					if mf.GetName() == "sdma_device_unmap_errors_total" {
						assert.Len(t, mf.GetMetric(), 3)
					}
				}
			}
		})
	}
	for i, dev := range devs {
		for j := range 20 {
			require.NoError(t, sendOne(dev.Engine(j%2)))
		}
		require.NoError(t, dev.Close(), "device %d", i)
	}
	close(stop)
	wg.Wait()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}
