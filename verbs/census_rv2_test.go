package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/internal/census"
)

// TestCensusZeroFlowAndDevice: a Flow not made by NewFlow is refused by Send with ErrInvalid
// saying so, and NewFlow of a Device not made by New panics with a message saying so (it returns
// no error); the zero Device's other methods answer as a device with no contexts. Send of a zero
// Flow dereferenced its nil device, and NewFlow of a zero Device indexed its empty context table
// ("index out of range [0] with length 0"): panics no doc mentioned.
func TestCensusZeroFlowAndDevice(t *testing.T) {
	cases := []census.Case{
		{"Send of a zero Flow", func() error {
			var f Flow
			_, err := f.Send(context.Background(), [][]byte{make([]byte, 64)}, nil)
			return err
		}, func(r census.Result) bool {
			return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), "not made by Device.NewFlow")
		}},
		{"Drain and Busy of a zero Flow", func() error {
			var f Flow
			if p, s := f.Busy(); p != 0 || s != 0 {
				return errors.New("busy")
			}
			return f.Drain(context.Background())
		}, census.OK},
		{"NewFlow of a zero Device", func() error { var d Device; d.NewFlow(0, 0); return nil }, func(r census.Result) bool {
			return r.Panicked && strings.Contains(r.String(), "not made by New")
		}},
		{"the zero Device's other methods", func() error {
			var d Device
			if d.NumContexts() != 0 || d.Context(0) != nil || d.SDMA() != nil || d.Process() != 0 {
				return errors.New("a context")
			}
			return d.Close()
		}, census.OK},
	}
	census.Run(t, cases)
}
