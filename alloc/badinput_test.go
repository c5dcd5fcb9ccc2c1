package alloc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gosdma/gosdma/alloc"
)

type badObj struct{ _ [2]int }

// TestZeroValueAllocators: the zero value of List and Slab (declared without NewList/NewSlab)
// hands out nothing and takes nothing back, with errors: Get ErrNotMade, GetCtx too, Put
// ErrForeign, Owns false. Get used to crash the process (a fatal SIGSEGV in the free stack's nil
// table, which no recover catches) and Put to panic on nil. The zero Pool is an empty Pool,
// ready to use, as a sync.Pool's zero value is.
func TestZeroValueAllocators(t *testing.T) {
	var l alloc.List[badObj]
	if _, err := l.Get(); !errors.Is(err, alloc.ErrNotMade) {
		t.Errorf("zero List Get: %v, want ErrNotMade", err)
	}
	if _, err := l.GetCtx(context.Background()); !errors.Is(err, alloc.ErrNotMade) {
		t.Errorf("zero List GetCtx: %v, want ErrNotMade", err)
	}
	if err := l.Put(&badObj{}); !errors.Is(err, alloc.ErrForeign) {
		t.Errorf("zero List Put: %v, want ErrForeign", err)
	}
	if l.Owns(&badObj{}) {
		t.Error("zero List owns a heap object")
	}
	var s alloc.Slab[badObj]
	if _, err := s.Get(); !errors.Is(err, alloc.ErrNotMade) {
		t.Errorf("zero Slab Get: %v, want ErrNotMade", err)
	}
	if err := s.Put(&badObj{}); !errors.Is(err, alloc.ErrForeign) {
		t.Errorf("zero Slab Put: %v, want ErrForeign", err)
	}
	if st := l.Stats(); st != (alloc.Stats{}) {
		t.Errorf("zero List Stats: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Errorf("zero List Close: %v", err)
	}
	if st := s.Stats(); st != (alloc.Stats{}) || s.Owns(&badObj{}) {
		t.Errorf("zero Slab Stats %+v, or it owns a heap object", st)
	}
	var p alloc.Pool[badObj]
	_ = p.Stats()
	x, err := p.Get()
	if err != nil || x == nil {
		t.Fatalf("zero Pool Get: %v, %v", x, err)
	}
	if err := p.Put(&badObj{}); !errors.Is(err, alloc.ErrForeign) {
		t.Errorf("zero Pool Put of a heap object: %v, want ErrForeign", err)
	}
	if err := p.Put(x); err != nil {
		t.Errorf("zero Pool Put of its own: %v", err)
	}
	if err := p.Put(x); !errors.Is(err, alloc.ErrDoublePut) {
		t.Errorf("zero Pool second Put: %v, want ErrDoublePut", err)
	}
}

// TestBadInputsAllocators: the bad-input census of the constructed allocators. Bad sizes are
// refused with an error naming them; a nil, foreign or twice-put object is refused with
// ErrForeign or ErrDoublePut and changes nothing (the next Gets and Puts work, the object count
// holds).
func TestBadInputsAllocators(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	for _, n := range []int{-1, 0, maxInt} {
		if l, err := alloc.NewList[badObj](n, nil); l != nil || err == nil {
			t.Errorf("NewList(%d): %v", n, err)
		}
		if s, err := alloc.NewSlab(alloc.SlabConfig[badObj]{ObjectsPerSlab: n}); s != nil || err == nil {
			t.Errorf("NewSlab(ObjectsPerSlab %d): %v", n, err)
		}
	}
	if s, err := alloc.NewSlab(alloc.SlabConfig[badObj]{ObjectsPerSlab: 4, MaxSlabs: -1}); s != nil || err == nil {
		t.Errorf("NewSlab(MaxSlabs -1): %v", err)
	}
	list, err := alloc.NewList[badObj](2, nil)
	if err != nil {
		t.Fatal(err)
	}
	slab, err := alloc.NewSlab(alloc.SlabConfig[badObj]{ObjectsPerSlab: 2, MaxSlabs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]alloc.Allocator[badObj]{"list": list, "slab": slab, "pool": alloc.NewPool[badObj](nil)} {
		t.Run(name, func(t *testing.T) {
			other, err := alloc.NewList[badObj](1, nil)
			if err != nil {
				t.Fatal(err)
			}
			foreign, err := other.Get()
			if err != nil {
				t.Fatal(err)
			}
			x, err := a.Get()
			if err != nil {
				t.Fatal(err)
			}
			for what, c := range map[string]struct {
				p    *badObj
				want error
			}{
				"nil":                        {nil, alloc.ErrForeign},
				"a heap object":              {&badObj{}, alloc.ErrForeign},
				"another allocator's object": {foreign, alloc.ErrForeign},
			} {
				if err := a.Put(c.p); !errors.Is(err, c.want) {
					t.Errorf("Put of %s: %v, want %v", what, err, c.want)
				}
			}
			if err := a.Put(x); err != nil {
				t.Fatal(err)
			}
			if err := a.Put(x); !errors.Is(err, alloc.ErrDoublePut) {
				t.Errorf("second Put: %v, want ErrDoublePut", err)
			}
			// Nothing changed: both objects can be had, and given back, once each.
			y, err := a.Get()
			if err != nil {
				t.Fatal(err)
			}
			z, err := a.Get()
			if err != nil {
				t.Fatal(err)
			}
			if y == z {
				t.Fatal("the same object handed out twice")
			}
			if err := a.Put(y); err != nil {
				t.Error(err)
			}
			if err := a.Put(z); err != nil {
				t.Error(err)
			}
		})
	}
	x, err := list.Get()
	if err != nil {
		t.Fatal(err)
	}
	if err := list.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := list.Get(); !errors.Is(err, alloc.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := list.Put(x); err != nil {
		t.Errorf("Put after Close of an object handed out before: %v", err)
	}
	if err := list.Put(x); !errors.Is(err, alloc.ErrDoublePut) {
		t.Errorf("second Put after Close: %v", err)
	}
}
