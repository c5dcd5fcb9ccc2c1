package sdma

import (
	"context"
	"encoding/json"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
)

// Vars returns the device's counters as an expvar.Var: its String is
// {"device":"sdma0","engines":[{"engine":0,"Packets":...,"halts_by_cause":{...}},...],"unmap_errors":0},
// each engine's Stats with its halts by cause name, and the device's UnmapErrors, so expvar.Publish("sdma", dev.Vars()) shows them
// on /debug/vars without sdma importing expvar (or net/http); inside an expvar.Func it encodes
// the same way (MarshalJSON). Each call to String reads the counters afresh.
func (dev *Device) Vars() interface{ String() string } { return deviceVars{dev} }

// deviceVars is Vars' value.
type deviceVars struct{ dev *Device }

// engineVars is one engine's entry in deviceVars: its index, its counters, and its halts by
// cause name.
type engineVars struct {
	Engine int `json:"engine"`
	EngineStats
	HaltsBy map[string]uint64 `json:"halts_by_cause,omitempty"`
}

// engines snapshots every engine's counters.
func (v deviceVars) engines() []engineVars {
	out := make([]engineVars, v.dev.NumEngines())
	for i := range out {
		s := v.dev.Engine(i).Stats()
		out[i] = engineVars{Engine: i, EngineStats: s}
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

// String returns {"device":"sdma0","engines":[{"engine":0,"Packets":...},...],"unmap_errors":0}.
func (v deviceVars) String() string {
	b, err := json.Marshal(struct {
		Device      string       `json:"device"`
		Engines     []engineVars `json:"engines"`
		UnmapErrors uint64       `json:"unmap_errors"`
	}{v.dev.name, v.engines(), v.dev.UnmapErrors()})
	if err != nil { // cannot happen: the counters are numbers
		return "{}"
	}
	return string(b)
}

// MarshalJSON makes a deviceVars inside an expvar.Func encode as its counters.
func (v deviceVars) MarshalJSON() ([]byte, error) { return []byte(v.String()), nil }

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
