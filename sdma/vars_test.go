package sdma_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"reflect"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
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

// deviceVar names the Vars key of every counter of Device itself (a method that takes nothing
// and returns a uint64). UnmapErrors was left out.
var deviceVar = map[string]string{
	"UnmapErrors": "unmap_errors",
}

// failUnmap is a mapper whose single unmaps undo the mapping but report a failure, so that the
// device counts each in UnmapErrors.
type failUnmap struct{ dma.Mapper }

func (m failUnmap) UnmapSingle(addr dma.Addr, size int, dir dma.Direction) error {
	_ = m.Mapper.UnmapSingle(addr, size, dir)
	return errors.New("unmap refused")
}

// TestDeviceVarsDeviceCounters: every counter of Device is in Vars, beside the engines, with the
// device's value.
func TestDeviceVarsDeviceCounters(t *testing.T) {
	typ := reflect.TypeFor[*sdma.Device]()
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		if m.Type.NumIn() == 1 && m.Type.NumOut() == 1 && m.Type.Out(0).Kind() == reflect.Uint64 {
			_, ok := deviceVar[m.Name]
			assert.True(t, ok, "Device.%s has no Vars key in this test's map", m.Name)
		}
	}
	dev, err := sdma.NewDevice(sdma.Config{Mapper: failUnmap{dma.NewDirect()}, Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	var tx sdma.TxReq
	require.NoError(t, tx.Init(0, 4096, nil))
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4096)))
	require.NoError(t, e.Send(nil, &tx, true))
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	require.EqualValues(t, 1, dev.UnmapErrors())

	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(dev.Vars().String()), &got))
	v := reflect.ValueOf(dev)
	for name, key := range deviceVar {
		want := v.MethodByName(name).Call(nil)[0].Uint()
		raw, ok := got[key]
		require.True(t, ok, "Vars has no %q (Device.%s): %s", key, name, dev.Vars().String())
		assert.Equal(t, strconv.FormatUint(want, 10), string(raw), "%s (Device.%s)", key, name)
	}
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
