package alloc_test

import (
	"errors"
	"testing"

	"github.com/gosdma/gosdma/alloc"
)

// FuzzAllocators drives one allocator with a sequence of gets, puts, double puts and foreign puts
// and checks every result against a model: the set of objects the caller holds and the set it
// has put back (and not got again). The model says when Get must succeed and when it must return
// ErrEmpty, that a handed-out object is never one already held and comes back clean, that a put
// of a freed object is ErrDoublePut and of a foreign one ErrForeign (changing nothing), and what
// Stats and Owns report.
//
// The input's first byte picks the allocator (slab, list, pool; /3 odd: no reset hook; /6 odd:
// plain mode re-earned at once), the second its size; each later byte is one operation: the low
// two bits the kind, the rest an index into the model's sets.
func FuzzAllocators(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 0, 0, 0, 1, 5, 2, 3, 0, 0})
	f.Add([]byte{1, 2, 0, 0, 0, 1, 2, 0, 3, 7, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 1, 2, 3, 0, 1, 6, 10})
	f.Add([]byte{0, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 9, 13, 0, 0, 0, 0})
	f.Add([]byte{3, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 9, 13, 0, 0, 0, 0})
	f.Add([]byte{4, 2, 0, 0, 0, 1, 2, 0, 3, 7, 0, 0})
	f.Add([]byte{9, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 9, 13, 0, 0, 0, 0})
	f.Add([]byte{10, 2, 0, 0, 0, 1, 2, 0, 3, 7, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		kind, size, ops := in[0]%3, in[1], in[2:]
		// in[0]/3 odd: Slab and List without a reset hook (Put's one-pass path); the caller
		// clears what it wrote itself.
		reset, hook := resetObj, in[0]/3%2 == 0 || kind == 2
		if !hook {
			reset = nil
		}
		if len(ops) > 1024 {
			ops = ops[:1024]
		}
		var (
			a, other alloc.Allocator[obj]
			capacity = -1 // -1: no limit
			per      = 0  // Slab's objects per slab
		)
		switch kind {
		case 0:
			per = 1 + int(size&15)
			maxSlabs := int(size >> 4) // 0: no cap
			mk := func() alloc.Allocator[obj] {
				s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: per, MaxSlabs: maxSlabs, Reset: reset})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			a, other = mk(), mk()
			if maxSlabs > 0 {
				capacity = per * maxSlabs
			}
		case 1:
			capacity = 1 + int(size&31)
			mk := func() alloc.Allocator[obj] {
				l, err := alloc.NewList(capacity, reset)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			a, other = mk(), mk()
		case 2:
			a, other = alloc.NewPool(resetObj), alloc.NewPool(resetObj)
		}
		if in[0]/6%2 == 1 && kind != 2 {
			// Plain mode (magazine.go), where available, re-earned after every CAS pop or
			// push: the Gets that drain revoke it.
			alloc.SetPlainAfter(a, 1)
		}
		theirs, err := other.Get()
		if err != nil {
			t.Fatal(err)
		}

		var (
			held  []*obj // the caller's, in Get order
			freed []*obj // put back, not got again
			isOut = map[*obj]bool{}
			seq   int
			high  int
		)
		owns, _ := a.(interface{ Owns(*obj) bool })
		check := func(where string) {
			t.Helper()
			st := a.(interface{ Stats() alloc.Stats }).Stats()
			if kind == 2 {
				if st.Objects < int64(len(held)) || st.Objects != int64(st.Slabs)*8 || st.InUse != 0 {
					t.Fatalf("%s: pool stats %+v with %d held", where, st, len(held))
				}
				return
			}
			want := alloc.Stats{InUse: int64(len(held)), HighWater: int64(high)}
			if kind == 1 {
				want.Objects, want.Slabs = int64(capacity), 1
			} else {
				// A slab grows only when every object is in use, so it has just enough slabs
				// for the high-water mark.
				want.Slabs = (high + per - 1) / per
				want.Objects = int64(want.Slabs * per)
			}
			if st != want {
				t.Fatalf("%s: stats %+v, model %+v", where, st, want)
			}
		}
		for k, op := range ops {
			arg := int(op >> 2)
			switch op & 3 {
			case 0: // get
				o, err := a.Get()
				if capacity >= 0 && len(held) == capacity {
					if !errors.Is(err, alloc.ErrEmpty) || o != nil {
						t.Fatalf("op %d: get with all %d in use: %p, %v", k, capacity, o, err)
					}
					continue
				}
				if err != nil || o == nil {
					t.Fatalf("op %d: get with %d of %d in use: %v", k, len(held), capacity, err)
				}
				if isOut[o] {
					t.Fatalf("op %d: object %p handed out twice", k, o)
				}
				if o.val != 0 || o.buf != [24]byte{} {
					t.Fatalf("op %d: dirty object (val %d)", k, o.val)
				}
				if owns != nil && !owns.Owns(o) {
					t.Fatalf("op %d: allocator does not own what it handed out", k)
				}
				seq++
				o.val, o.buf[seq%24] = seq, byte(seq)
				isOut[o] = true
				held = append(held, o)
				for i, p := range freed {
					if p == o {
						freed = append(freed[:i], freed[i+1:]...)
						break
					}
				}
				high = max(high, len(held))
			case 1: // put a held object
				if len(held) == 0 {
					continue
				}
				i := arg % len(held)
				o := held[i]
				if !hook {
					resetObj(o)
				}
				if err := a.Put(o); err != nil {
					t.Fatalf("op %d: put of a held object: %v", k, err)
				}
				if o.val != 0 || o.buf != [24]byte{} {
					t.Fatalf("op %d: reset did not run on put", k)
				}
				held = append(held[:i], held[i+1:]...)
				delete(isOut, o)
				freed = append(freed, o)
			case 2: // put a freed object again
				if len(freed) == 0 {
					continue
				}
				err := a.Put(freed[arg%len(freed)])
				if !errors.Is(err, alloc.ErrDoublePut) {
					t.Fatalf("op %d: double put: %v", k, err)
				}
			case 3: // put something not ours
				var p *obj
				switch arg % 4 {
				case 1:
					p = new(obj)
				case 2:
					p = theirs
				case 3:
					arr := make([]obj, 2)
					p = &arr[1]
				}
				err := a.Put(p)
				if !errors.Is(err, alloc.ErrForeign) {
					t.Fatalf("op %d: foreign put: %v", k, err)
				}
				if owns != nil && owns.Owns(p) {
					t.Fatalf("op %d: Owns claims a foreign object", k)
				}
			}
			check("op")
		}
		if owns != nil {
			for _, p := range freed {
				if !owns.Owns(p) {
					t.Fatal("a freed object is no longer owned")
				}
			}
		}
		for _, o := range held {
			if err := a.Put(o); err != nil {
				t.Fatal(err)
			}
		}
		held = nil
		check("end")
		if err := other.Put(theirs); err != nil {
			t.Fatal(err)
		}
	})
}
