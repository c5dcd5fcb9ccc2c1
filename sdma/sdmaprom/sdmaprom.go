// Package sdmaprom exports an sdma.Device's counters to Prometheus: New returns a
// prometheus.Collector to register. It is a package of its own so that only programs that want
// Prometheus pull in its client library; the sdma package itself offers the same counters as an
// expvar value (Device.Vars) with no dependency.
package sdmaprom

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gosdma/gosdma/sdma"
)

// counter is one engine counter exported as a Prometheus counter.
type counter struct {
	desc *prometheus.Desc
	get  func(sdma.EngineStats) uint64
}

// Collector collects one device's engine counters at each scrape: every field of
// sdma.EngineStats, as a counter named sdma_engine_<field>_total (EngineStats.Faults is the sum
// of sdma_engine_halts_total over its causes, so it has no series of its own). Every metric has
// the labels device (Device.Name) and engine (the engine's index); sdma_engine_halts_total also
// has cause (HaltCause.String). The device's own counter, Device.UnmapErrors, is
// sdma_device_unmap_errors_total, with the label device only.
//
// Make one with New: a Collector that New did not make (the zero value) is refused at Register
// with an error saying so, and a scrape of one yields that error, not a crash.
type Collector struct {
	dev         *sdma.Device
	counters    []counter
	halts       *prometheus.Desc
	unmapErrors *prometheus.Desc
}

// New returns a collector of dev's counters. Register it: prometheus.MustRegister(sdmaprom.New(dev)).
//
// Device names (Config.Name) must be unique per registry, and across registries served together
// (prometheus.Gatherers, whose Gather fails on duplicate series). The device label is a constant
// label of every description, so that one registry takes the collectors of several devices and
// refuses a second device of the same name at Register, with a prometheus.AlreadyRegisteredError
// (a name that is not valid UTF-8 is refused there too).
//
// A nil dev is a programmer error: New panics at once, rather than the first scrape crashing the
// process in the registry's collecting goroutine. A device closed while registered still
// scrapes, with its last counts.
func New(dev *sdma.Device) *Collector {
	if dev == nil {
		panic("sdmaprom: New(nil): want the *sdma.Device whose counters to collect")
	}
	device := prometheus.Labels{"device": dev.Name()}
	c := func(name, help string, get func(sdma.EngineStats) uint64) counter {
		return counter{prometheus.NewDesc("sdma_engine_"+name+"_total", help, []string{"engine"}, device), get}
	}
	return &Collector{
		dev: dev,
		counters: []counter{
			c("packets", "Packets the engine delivered to its sink.", func(s sdma.EngineStats) uint64 { return s.Packets }),
			c("descriptors", "Descriptors the engine consumed.", func(s sdma.EngineStats) uint64 { return s.Descs }),
			c("bytes", "Bytes the engine delivered.", func(s sdma.EngineStats) uint64 { return s.Bytes }),
			c("ring_full", "Sends that found the ring full (hfi1: descq_full_count).", func(s sdma.EngineStats) uint64 { return s.RingFull }),
			c("sleeps", "Waiters parked on the engine's wait list.", func(s sdma.EngineStats) uint64 { return s.Sleeps }),
			c("wakeups", "Waiters woken by the completion side.", func(s sdma.EngineStats) uint64 { return s.Wakeups }),
			c("interrupts", "Interrupts raised.", func(s sdma.EngineStats) uint64 { return s.Interrupts }),
			c("completion_passes", "Completion passes.", func(s sdma.EngineStats) uint64 { return s.Passes }),
			c("completed", "Txreqs completed OK.", func(s sdma.EngineStats) uint64 { return s.Completed }),
			c("aborted", "Txreqs completed aborted (flushed by a halt or a close).", func(s sdma.EngineStats) uint64 { return s.Aborted }),
			c("sink_errors", "Deliveries that failed or panicked.", func(s sdma.EngineStats) uint64 { return s.SinkErrors }),
			c("flushes", "BatchSink flushes (0 without a BatchSink).", func(s sdma.EngineStats) uint64 { return s.Flushes }),
			c("callback_panics", "Completion, drained or wakeup callbacks that panicked (each recovered).", func(s sdma.EngineStats) uint64 { return s.CallbackPanics }),
			c("recoveries", "Returns to running after a halt.", func(s sdma.EngineStats) uint64 { return s.Recoveries }),
		},
		halts:       prometheus.NewDesc("sdma_engine_halts_total", "Engine halts, by cause.", []string{"engine", "cause"}, device),
		unmapErrors: prometheus.NewDesc("sdma_device_unmap_errors_total", "Unmaps that failed on a path that promised to undo a mapping (0 in a correct program).", nil, device),
	}
}

// errNotNew is the refusal of a Collector that New did not make.
var errNotNew = errors.New("sdmaprom: a Collector not made by sdmaprom.New (it has no device)")

// notNew describes the refusal: a description that carries errNotNew, which Register returns.
var notNew = prometheus.NewInvalidDesc(errNotNew)

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.dev == nil {
		ch <- notNew
		return
	}
	for _, k := range c.counters {
		ch <- k.desc
	}
	ch <- c.halts
	ch <- c.unmapErrors
}

// Collect reads the device's and every engine's counters (Engine.Stats) and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.dev == nil {
		ch <- prometheus.NewInvalidMetric(notNew, errNotNew)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.unmapErrors, prometheus.CounterValue, float64(c.dev.UnmapErrors()))
	for i := range c.dev.NumEngines() {
		s := c.dev.Engine(i).Stats()
		eng := strconv.Itoa(i)
		for _, k := range c.counters {
			ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.get(s)), eng)
		}
		for cause := sdma.CauseNone + 1; cause < sdma.NumHaltCauses; cause++ {
			ch <- prometheus.MustNewConstMetric(c.halts, prometheus.CounterValue, float64(s.Halts[cause]), eng, cause.String())
		}
	}
}
