package alloc_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestBoundedConcurrentExactlyOnce (review rv3-alloc): bounded allocators (a List, a Slab with
// MaxSlabs, each also with plain mode re-earned often) under goroutines that get with Get and,
// on the List, GetCtx with short deadlines, and put back themselves or through another
// goroutine. Every object is held by one goroutine at a time, the number held never passes the
// bound, Stats never reports more objects than the bound, and at the end gets minus puts is
// InUse (0), every object is free once, and Close wakes the List's waiters with ErrClosed.
func TestBoundedConcurrentExactlyOnce(t *testing.T) {
	const bound = 24 // a Slab of 6 slabs of 4, a List of 24
	rounds := 2000
	if testing.Short() {
		rounds = 400
	}
	type bounded interface {
		alloc.Allocator[obj]
		Stats() alloc.Stats
	}
	mk := map[string]func() bounded{
		"list": func() bounded { l, _ := alloc.NewList[obj](bound, resetObj); return l },
		"list-plain": func() bounded {
			l, _ := alloc.NewList[obj](bound, nil)
			alloc.SetPlainAfter[obj](l, 2)
			return l
		},
		"slab": func() bounded {
			s, _ := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 4, MaxSlabs: bound / 4, Reset: resetObj})
			return s
		},
		"slab-plain": func() bounded {
			s, _ := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 4, MaxSlabs: bound / 4})
			alloc.SetPlainAfter[obj](s, 2)
			return s
		},
	}
	for name, newA := range mk {
		t.Run(name, func(t *testing.T) {
			a := newA()
			l, _ := a.(*alloc.List[obj])
			var held, gets, puts atomic.Int64
			handoff := make(chan *obj, bound)
			var putter sync.WaitGroup
			putter.Add(1)
			go func() {
				defer putter.Done()
				for o := range handoff {
					o.owner.Store(0)
					held.Add(-1)
					if err := a.Put(o); err != nil {
						t.Error(err)
					}
					puts.Add(1)
				}
			}()
			var wg sync.WaitGroup
			for g := range 6 {
				wg.Add(1)
				go func(id int64) {
					defer wg.Done()
					var mine []*obj
					for r := range rounds {
						var o *obj
						var err error
						if l != nil && r%4 == 0 {
							ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r%7)*10*time.Microsecond)
							o, err = l.GetCtx(ctx)
							cancel()
						} else {
							o, err = a.Get()
						}
						switch {
						case err == nil:
						case errors.Is(err, alloc.ErrEmpty), errors.Is(err, context.DeadlineExceeded):
							runtime.Gosched()
							continue
						default:
							t.Error(err)
							return
						}
						gets.Add(1)
						if n := held.Add(1); n > bound {
							t.Errorf("%d objects held at once, bound %d", n, bound)
						}
						if !o.owner.CompareAndSwap(0, id) {
							t.Error("object handed out while held")
							return
						}
						if st := a.Stats(); st.Objects > bound || st.InUse > st.HighWater || st.HighWater > st.Objects {
							t.Errorf("Stats %+v with bound %d", st, bound)
						}
						mine = append(mine, o)
						if len(mine) > int(id)%5 {
							for k, o := range mine {
								if k%2 == 0 {
									handoff <- o
									continue
								}
								o.owner.Store(0)
								held.Add(-1)
								if err := a.Put(o); err != nil {
									t.Error(err)
								}
								puts.Add(1)
							}
							mine = mine[:0]
						}
					}
					for _, o := range mine {
						handoff <- o
					}
				}(int64(g + 1))
			}
			wg.Wait()
			close(handoff)
			putter.Wait()
			if gets.Load() == 0 || gets.Load() != puts.Load() {
				t.Fatalf("gets %d, puts %d", gets.Load(), puts.Load())
			}
			st := a.Stats()
			if st.InUse != 0 || st.Objects > bound {
				t.Fatalf("Stats %+v after every object came back", st)
			}
			seen := map[*obj]bool{}
			for range st.Objects {
				o, err := a.Get()
				if err != nil {
					t.Fatalf("a free object is lost: %v", err)
				}
				if seen[o] {
					t.Fatal("object free twice")
				}
				seen[o] = true
			}
			if l != nil {
				res := make(chan error, 3)
				for range 3 {
					go func() {
						_, err := l.GetCtx(context.Background())
						res <- err
					}()
				}
				time.Sleep(2 * time.Millisecond)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if err := <-res; !errors.Is(err, alloc.ErrClosed) {
						t.Errorf("waiter at Close: %v, want ErrClosed", err)
					}
				}
			}
			for o := range seen {
				if err := a.Put(o); err != nil {
					t.Fatal(err)
				}
			}
			if st := a.Stats(); st.InUse != 0 {
				t.Fatalf("Stats %+v at the end", st)
			}
		})
	}
}
