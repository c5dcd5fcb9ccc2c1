package ring

import (
	"errors"
	"slices"

	"github.com/gosdma/gosdma/internal/ringimpl"
)

// Implementations returns the names of the Write implementations available on this platform,
// the preferred one first: on amd64 "asm" (AVX 16-byte stores if the CPU has AVX, else two 8-byte
// stores), "asm-movq" (the 8-byte-store assembly, forced) and "go"; elsewhere, and with the
// purego build tag, only "go". The returned slice is a fresh copy.
func Implementations() []string { return slices.Clone(implementations) }

// setImplementation makes every Ring use the named Write implementation until restore is called,
// which reinstates the previous one. It exists for tests and benchmarks and is process-wide, so
// it is not exported: the package's own tests call it, the module's other tests reach it as
// internal/ringimpl.Set. Do not call it while another goroutine may be calling Write or Enqueue,
// or tests running in parallel may observe either implementation (both write identical bytes).
// An unknown name gives an error matching errors.ErrUnsupported and changes nothing.
func setImplementation(name string) (restore func(), err error) {
	restore, ok := setImpl(name)
	if !ok {
		return func() {}, &Error{Op: "SetImplementation", Msg: "unknown implementation " + name, Err: errors.ErrUnsupported}
	}
	return restore, nil
}

func init() { ringimpl.Set = setImplementation }
