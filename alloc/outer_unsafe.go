package alloc

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Outer returns the *T whose first field *f is: the Go way back from the *sdma.TxReq a completion
// callback receives to the caller's own txreq type, which embeds sdma.TxReq first (the kernel's
// container_of, for the one layout the hfi1 API prescribes: "the txreq must be declared with the
// sdma_txreq first"). It does not allocate.
//
// For completions, prefer sdma.Completer implemented on the caller's pointer type: the txreq's
// completer is then the caller's own *T, with no unsafe and no allocation. Outer remains for code
// that holds only the embedded field.
//
// Outer checks the types, once per (T, F) pair: T must be a struct whose first field has type F
// (embedded or named; at offset 0). If not, Outer panics: that is a programmer error, found by the
// first call. Outer returns nil for a nil f.
//
// Outer cannot check the value: f must point to the first field of a T (as it does when the
// sdma.TxReq came from a T the caller allocated, with any allocator of this package or new(T)).
// Passing a free-standing F is undefined, as is container_of on the wrong pointer; under -race, Go's
// checkptr instrumentation usually reports it.
//
// [OuterFunc] does the check up front and returns a converter that skips even the cached check.
func Outer[T, F any](f *F) *T {
	if f == nil {
		return nil
	}
	checkOuter[T, F]()
	return (*T)(unsafe.Pointer(f))
}

// OuterFunc checks, once, that T is a struct whose first field has type F (panicking if not, as
// [Outer] would), and returns a function that converts a *F to its enclosing *T with no check at
// all. Keep it in a package-level variable:
//
//	var myTxOf = alloc.OuterFunc[myTx, sdma.TxReq]()
func OuterFunc[T, F any]() func(*F) *T {
	checkOuter[T, F]()
	return func(f *F) *T {
		if f == nil {
			return nil
		}
		return (*T)(unsafe.Pointer(f))
	}
}

type outerKey struct{ t, f reflect.Type }

// outerOK is the set of (T, F) pairs found good: a map replaced on insertion (copy on write,
// under outerMu), so lookups take no lock and allocate nothing.
var (
	outerOK atomic.Pointer[map[outerKey]struct{}]
	outerMu sync.Mutex
)

func checkOuter[T, F any]() {
	k := outerKey{reflect.TypeFor[T](), reflect.TypeFor[F]()}
	if m := outerOK.Load(); m != nil {
		if _, ok := (*m)[k]; ok {
			return
		}
	}
	if msg := outerMismatch(k.t, k.f); msg != "" {
		panic(msg)
	}
	outerMu.Lock()
	defer outerMu.Unlock()
	old := outerOK.Load()
	m := make(map[outerKey]struct{}, 1)
	if old != nil {
		for kk := range *old {
			m[kk] = struct{}{}
		}
	}
	m[k] = struct{}{}
	outerOK.Store(&m)
}

func outerMismatch(t, f reflect.Type) string {
	if t.Kind() != reflect.Struct {
		return fmt.Sprintf("alloc.Outer: %v is not a struct, so it cannot start with a %v", t, f)
	}
	if t.NumField() == 0 {
		return fmt.Sprintf("alloc.Outer: %v has no fields; its first field must be a %v", t, f)
	}
	first := t.Field(0)
	if first.Type != f || first.Offset != 0 {
		return fmt.Sprintf("alloc.Outer: the first field of %v is %s %v, not a %v", t, first.Name, first.Type, f)
	}
	return ""
}
