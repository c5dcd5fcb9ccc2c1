package sdma_test

import (
	"bytes"
	"encoding/json"
	"expvar"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestDeviceVars: Vars is an expvar.Var whose JSON is the engines' Stats.
func TestDeviceVars(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "varstest"})
	require.NoError(t, err)
	defer dev.Close()
	var v expvar.Var = dev.Vars()
	var got struct {
		Device  string
		Engines []struct {
			Engine   int
			Packets  uint64
			RingFull uint64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(v.String()), &got), v.String())
	assert.Equal(t, "varstest", got.Device)
	require.Len(t, got.Engines, 2)
	assert.Equal(t, 1, got.Engines[1].Engine)
	assert.Equal(t, "varstest", dev.Name())

	other, err := sdma.NewDevice(sdma.Config{})
	require.NoError(t, err)
	defer other.Close()
	assert.Regexp(t, `^sdma[0-9]+$`, other.Name(), "an unnamed device is sdmaN")
}

// TestEngineGoroutinesArePprofLabelled: the engine goroutines carry the device and engine labels.
func TestEngineGoroutinesArePprofLabelled(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "labeltest"})
	require.NoError(t, err)
	defer dev.Close()
	// The engine goroutines may not have been scheduled yet (either may start first, and a
	// goroutine takes its labels only once it runs): wait until both show.
	var buf bytes.Buffer
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		buf.Reset()
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&buf, 1))
		if strings.Contains(buf.String(), `"engine":"1"`) && strings.Contains(buf.String(), `"engine":"0"`) {
			break
		}
	}
	assert.Contains(t, buf.String(), `"device":"labeltest"`)
	assert.Contains(t, buf.String(), `"engine":"1"`)
	assert.Contains(t, buf.String(), `"engine":"0"`)
}

// Publish a device's counters on /debug/vars (expvar's handler, or net/http/pprof's server).
func ExampleDevice_Vars() {
	dev, err := sdma.NewDevice(sdma.Config{Name: "hfi1_0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	expvar.Publish("sdma_example", dev.Vars())
	fmt.Println(expvar.Get("sdma_example").String()[:26])
	// Output: {"device":"hfi1_0","engine
}
