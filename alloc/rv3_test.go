package alloc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/alloc"
)

// A megabyte object: 2^28 of them (2^48 bytes) are past what the runtime can allocate at once.
type hugeObj [1 << 20]byte

// TestSizePastOneAllocation (review rv3-alloc): a size whose objects do not fit one allocation is
// refused with an error naming it. NewList and the Slab's first Get used to panic in the runtime
// ("allocation size out of range"); on 32-bit platforms NewList(math.MaxInt) did so too, failing
// TestBadInputsAllocators there.
func TestSizePastOneAllocation(t *testing.T) {
	const n = 1 << 28
	l, err := alloc.NewList[hugeObj](n, nil)
	if l != nil || err == nil || !strings.Contains(err.Error(), "268435456") {
		t.Errorf("NewList(2^28 objects of 1 MiB): %v, %v; want an error naming the size", l, err)
	}
	s, err := alloc.NewSlab(alloc.SlabConfig[hugeObj]{ObjectsPerSlab: n})
	if s != nil || err == nil || !strings.Contains(err.Error(), "268435456") {
		t.Errorf("NewSlab(ObjectsPerSlab 2^28 of 1 MiB): %v; want an error naming the size", err)
	}
	// A size that fits is still taken.
	small, err := alloc.NewList[hugeObj](2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Get(); err != nil {
		t.Fatal(err)
	}
}

// TestGetCtxNilContext (review rv3-alloc): GetCtx with a nil context is refused with an error and
// changes nothing. It used to queue the caller as a waiter and then panic on ctx.Done(); after a
// recover the dead waiter stayed queued, so the next Put handed it the object, which was lost for
// good (the List's Get then reported ErrEmpty with the object free).
func TestGetCtxNilContext(t *testing.T) {
	var nilCtx context.Context // the bad input under test
	l, err := alloc.NewList[obj](1, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := l.Get()
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("GetCtx(nil) on an empty List panicked: %v", r)
			}
		}()
		if o, err := l.GetCtx(nilCtx); o != nil || err == nil || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("GetCtx(nil) on an empty List: %v, %v; want an error naming the nil context", o, err)
		}
	}()
	if err := l.Put(x); err != nil {
		t.Fatal(err)
	}
	if o, err := l.GetCtx(nilCtx); o != nil || err == nil {
		t.Errorf("GetCtx(nil) with a free object: %v, %v; want the same error", o, err)
	}
	y, err := l.Get()
	if err != nil {
		t.Fatalf("the object is lost after GetCtx(nil): Get: %v", err)
	}
	if y != x {
		t.Fatal("a List of one handed out another object")
	}
	if s := l.Stats(); s.InUse != 1 {
		t.Errorf("Stats %+v, want one in use", s)
	}
}
