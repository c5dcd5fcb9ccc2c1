package sdma

import (
	"context"
	"encoding/json"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
)

// DeviceVars is a device's counters as an expvar.Var: String returns them as JSON, so
// expvar.Publish("sdma", dev.Vars()) shows them on /debug/vars without sdma importing expvar
// (or net/http). Each call reads the counters afresh.
type DeviceVars struct{ dev *Device }

// Vars returns the device's counters as an expvar-compatible value.
func (dev *Device) Vars() DeviceVars { return DeviceVars{dev} }

// EngineVars is one engine's entry in DeviceVars: its index, its counters, and its halts by
// cause name.
type EngineVars struct {
	Engine int `json:"engine"`
	EngineStats
	HaltsBy map[string]uint64 `json:"halts_by_cause,omitempty"`
}

// Engines snapshots every engine's counters.
func (v DeviceVars) Engines() []EngineVars {
	out := make([]EngineVars, v.dev.NumEngines())
	for i := range out {
		s := v.dev.Engine(i).Stats()
		out[i] = EngineVars{Engine: i, EngineStats: s}
		for c, n := range s.Halts {
			if n > 0 {
				if out[i].HaltsBy == nil {
					out[i].HaltsBy = map[string]uint64{}
				}
				out[i].HaltsBy[HaltCause(c).String()] = n
			}
		}
	}
	return out
}

// String returns {"device":"sdma0","engines":[{"engine":0,"Packets":...},...]}.
func (v DeviceVars) String() string {
	b, err := json.Marshal(struct {
		Device  string       `json:"device"`
		Engines []EngineVars `json:"engines"`
	}{v.dev.name, v.Engines()})
	if err != nil { // cannot happen: the counters are numbers
		return "{}"
	}
	return string(b)
}

// MarshalJSON makes a DeviceVars inside an expvar.Func encode as its counters.
func (v DeviceVars) MarshalJSON() ([]byte, error) { return []byte(v.String()), nil }

// deviceSeq numbers the devices a process makes, for their default names.
var deviceSeq atomic.Uint64

// deviceName is Config.Name, or sdmaN for the process's Nth unnamed device.
func deviceName(name string) string {
	if name != "" {
		return name
	}
	return "sdma" + strconv.FormatUint(deviceSeq.Add(1)-1, 10)
}

// Name returns the device's name (Config.Name, or the sdmaN given to an unnamed device).
func (dev *Device) Name() string { return dev.name }

// runLabelled runs the engine's goroutine with the pprof labels device and engine, so that
// CPU and goroutine profiles show whose time it is (go tool pprof -tagfocus engine=3).
func (e *Engine) runLabelled() {
	labels := pprof.Labels("device", e.dev.name, "engine", strconv.Itoa(e.idx))
	pprof.Do(context.Background(), labels, func(context.Context) { e.run() })
}
