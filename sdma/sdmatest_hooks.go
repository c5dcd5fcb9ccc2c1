package sdma

import (
	"github.com/gosdma/gosdma/sdma/internal/hooks"
	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// The doors package sdmatest goes through (see package hooks): fault injection and the state
// machine's events and history live there, so that this package's documentation is the
// everyday API.
func init() {
	hooks.SetFaults = func(e any, p hooks.FaultPlan) error {
		return e.(*Engine).setFaults(faultPlan{HaltAt: p.HaltAt, HaltCause: HaltCause(p.HaltCause), HaltRate: p.HaltRate, Seed: p.Seed})
	}
	hooks.InjectHalt = func(e any, c int) error { return e.(*Engine).injectHalt(HaltCause(c)) }
	hooks.Event = func(e any, ev uint8, cause string) error { return e.(*Engine).event(sm.Event(ev), cause) }
	hooks.State = func(e any) uint8 { return uint8(e.(*Engine).state()) }
	hooks.History = func(e any) []hooks.Transition {
		h := e.(*Engine).history()
		out := make([]hooks.Transition, len(h))
		for i, t := range h {
			out[i] = hooks.Transition{From: uint8(t.From), To: uint8(t.To), Event: uint8(t.Event), Cause: t.Cause, At: t.At}
		}
		return out
	}
	hooks.DeviceEvent = func(d any, step string) error {
		dev := d.(*Device)
		switch step {
		case "notify":
			return dev.freezeNotify(false)
		case "notify-linkdown":
			return dev.freezeNotify(true)
		case "freeze":
			return dev.freeze()
		case "unfreeze":
			return dev.unfreeze()
		}
		panic("sdma: unknown device event " + step)
	}
}
