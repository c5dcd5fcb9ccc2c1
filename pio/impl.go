package pio

import (
	"errors"
	"slices"

	"github.com/gosdma/gosdma/internal/pioimpl"
)

func init() { pioimpl.Set = setImplementation }

// Implementations returns the names of the copy implementations available here, the preferred
// first. On amd64: "asm" (ordinary stores for the model's cached send buffer: aligned 32-byte
// VMOVDQA where klauspost/cpuid/v2 reports AVX, else 8-byte MOVQ), "asm-nt" (non-temporal
// stores, what the real chip's write-combining send buffer wants: 32-byte VMOVNTDQ with AVX, else
// 8-byte MOVNTI, then SFENCE), "asm-movnti" (the MOVNTI writer, forced) and "go" (8-byte stores
// in Go). Elsewhere and with the purego build tag only "go". The slice is a fresh copy.
func Implementations() []string { return slices.Clone(implementations) }

// setImplementation makes every copy use the named implementation until restore is called. It
// is a process-wide switch for tests and benchmarks (the module's benchmarks reach it through
// internal/pioimpl.Set), unexported so that a library user cannot flip it by accident: do not
// call it while copies run. An unknown name gives an error matching errors.ErrUnsupported and
// changes nothing.
func setImplementation(name string) (restore func(), err error) {
	restore, ok := setImpl(name)
	if !ok {
		return func() {}, &Error{Op: "pioimpl.Set", Msg: "unknown implementation " + name, Err: errors.ErrUnsupported}
	}
	return restore, nil
}

// WriteQWords writes len(src)/8 whole quadwords of src to dst with the selected implementation,
// exactly as the send-buffer copy does: 8-byte or wider aligned stores, ordinary (write-back)
// ones with the default writer ("asm" on amd64, "go" elsewhere); the non-temporal writers are
// the alternatives that Implementations lists.
// dst must hold at least that many bytes. It is the copy's building block, exported for the
// benchmarks that compare it with copy.
func WriteQWords(dst, src []byte) {
	n := len(src) &^ 7
	if n == 0 {
		return
	}
	writeQWs(dst[:n], src[:n])
}
