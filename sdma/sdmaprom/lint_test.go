package sdmaprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// TestLint: the metrics follow Prometheus's naming conventions as promlint checks them (counters
// end in _total, units spelled out, snake_case, help text on every metric).
func TestLint(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "lint"})
	require.NoError(t, err)
	defer dev.Close()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
