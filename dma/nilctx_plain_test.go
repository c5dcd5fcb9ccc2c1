package dma

import (
	"context"
	"errors"
	"testing"
)

// plainMapper is a Mapper that does not register memory (only Mapper's methods are promoted).
type plainMapper struct{ Mapper }

// TestDeregisterNilContextPlainMapper: Counting and FaultInjector are Registrars whatever they
// wrap, and Registrar.Deregister promises ErrInvalid for a nil ctx "whether or not a use is in
// flight": over a mapper that registers nothing, a nil ctx is ErrInvalid too (it was
// ErrNotMapped, the answer for a registration of another mapper), and a good ctx still gets
// ErrNotMapped.
func TestDeregisterNilContextPlainMapper(t *testing.T) {
	r, err := NewDirect().Register(make([]byte, 64), ToDevice)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Registrar{NewCounting(plainMapper{NewDirect()}), NewFaultInjector(plainMapper{NewDirect()})} {
		//lint:ignore SA1012 the nil context is the bad input under test
		if err := m.Deregister(nil, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%T over a plain mapper: Deregister(nil ctx) = %v, want ErrInvalid", m, err)
		}
		if err := m.Deregister(context.Background(), r); !errors.Is(err, ErrNotMapped) {
			t.Errorf("%T over a plain mapper: Deregister = %v, want ErrNotMapped", m, err)
		}
	}
}
