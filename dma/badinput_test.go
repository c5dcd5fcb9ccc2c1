package dma

import (
	"testing"
)

// TestWrapNilMapper: NewCounting(nil) and NewFaultInjector(nil) are taken without a word, and the
// first call through the wrapper dereferences the nil Mapper (runtime error: invalid memory
// address), for instance inside sdma.NewDevice's AllocCoherent when the wrapper is a Config.Mapper.
// The promise is an error, or a documented panic, for a value the caller passed.
//
// Suggested fix (a design call: the constructors return no error): either a nil m means
// NewDirect(), as sdma.Config.Mapper's nil does, or the constructors panic at once with
// "dma: NewCounting of a nil Mapper" and say so in their docs (a programmer error caught where it
// is made, not on the first map call, perhaps on an engine goroutine).
func TestWrapNilMapper(t *testing.T) {
	t.Skip("bug: NewCounting(nil) and NewFaultInjector(nil) panic on first use, undocumented; see the comment")
	for name, m := range map[string]Mapper{"counting": NewCounting(nil), "inject": NewFaultInjector(nil)} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: MapSingle panicked: %v", name, r)
				}
			}()
			if _, err := m.MapSingle(make([]byte, 8), ToDevice); err == nil {
				t.Errorf("%s: MapSingle through a nil mapper: no error", name)
			}
		}()
	}
}
