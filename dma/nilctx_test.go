package dma

import (
	"context"
	"errors"
	"testing"
)

// TestDeregisterNilContext: a nil ctx is refused with ErrInvalid, whether or not a use is in
// flight, and changes nothing: before, Deregister with a use in flight waited on ctx.Done() of
// the nil ctx and panicked (a nil pointer dereference), only when it had to wait.
func TestDeregisterNilContext(t *testing.T) {
	for _, mk := range []struct {
		name string
		m    func() Registrar
	}{
		{"direct", func() Registrar { return NewDirect() }},
		{"iommu", func() Registrar {
			m, err := NewIOMMU(IOMMUConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"counting", func() Registrar { return NewCounting(NewDirect()) }},
		{"inject", func() Registrar { return NewFaultInjector(NewDirect()) }},
	} {
		for _, busy := range []bool{false, true} {
			m := mk.m()
			buf := make([]byte, 4096)
			r, err := m.Register(buf, ToDevice)
			if err != nil {
				t.Fatal(err)
			}
			if busy && !r.Acquire() {
				t.Fatal("Acquire of a live registration failed")
			}
			//lint:ignore SA1012 the nil context is the bad input under test
			err = m.Deregister(nil, r)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s busy=%v: Deregister(nil ctx) = %v, want ErrInvalid", mk.name, busy, err)
			}
			if m.Registered(buf) != r {
				t.Fatalf("%s busy=%v: the refused Deregister changed the registration", mk.name, busy)
			}
			if busy {
				r.Release()
			}
			if err := m.Deregister(context.Background(), r); err != nil {
				t.Fatalf("%s busy=%v: Deregister after the refusal: %v", mk.name, busy, err)
			}
		}
	}
}
