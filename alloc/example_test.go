package alloc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gosdma/gosdma/alloc"
)

// txreq stands in for sdma.TxReq in these examples: alloc does not import sdma.
type txreq struct {
	callback func(tx *txreq, status int)
}

// myTx is a caller's txreq: sdma.TxReq first ("the txreq must be declared with the sdma_txreq
// first"), then the caller's own fields.
type myTx struct {
	txreq
	seq  int
	done chan int
}

func ExampleSlab() {
	slab, err := alloc.NewSlab(alloc.SlabConfig[myTx]{
		ObjectsPerSlab: 64,
		MaxSlabs:       16,
		Init:           func(tx *myTx) { tx.done = make(chan int, 1) },    // once per object
		Reset:          func(tx *myTx) { tx.txreq = txreq{}; tx.seq = 0 }, // on every Put
	})
	if err != nil {
		panic(err)
	}
	tx, err := slab.Get()
	if err != nil {
		panic(err) // ErrEmpty once 16 slabs are in use
	}
	tx.seq = 1
	fmt.Println(slab.Stats().InUse, slab.Stats().Slabs)
	_ = slab.Put(tx)
	fmt.Println(slab.Stats().InUse, slab.Stats().HighWater)
	err = slab.Put(tx)
	fmt.Println(errors.Is(err, alloc.ErrDoublePut))
	// Output:
	// 1 1
	// 0 1
	// true
}

func ExampleList() {
	list, err := alloc.NewList(2, func(tx *myTx) { *tx = myTx{} })
	if err != nil {
		panic(err)
	}
	a, _ := list.Get()
	b, _ := list.Get()
	_, err = list.Get()
	fmt.Println(err) // all objects in use: a clear error, no allocation

	// Or wait for a Put, bounded by a context.
	go func() {
		time.Sleep(time.Millisecond)
		_ = list.Put(a)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := list.GetCtx(ctx)
	fmt.Println(c == a, err)

	fmt.Println(list.Put(new(myTx)) != nil) // not from this list: refused
	_ = list.Put(b)
	_ = list.Put(c)
	// Output:
	// alloc: no free object
	// true <nil>
	// true
}

func ExamplePool() {
	pool := alloc.NewPool(func(tx *myTx) { *tx = myTx{} })
	tx, _ := pool.Get() // never ErrEmpty: allocates when no idle object is left
	tx.seq = 7
	// Pool counts the objects it made (in chunks of 8), not those in use: InUse reads 0.
	st := pool.Stats()
	fmt.Println(st.Objects, st.InUse)
	fmt.Println(pool.Put(tx))
	fmt.Println(errors.Is(pool.Put(tx), alloc.ErrDoublePut))
	fmt.Println(errors.Is(pool.Put(new(myTx)), alloc.ErrForeign))
	// Output:
	// 8 0
	// <nil>
	// true
	// true
}

// Code written against Allocator works with any of the three; Traits says how each behaves.
func ExampleAllocator() {
	slab, _ := alloc.NewSlab(alloc.SlabConfig[myTx]{ObjectsPerSlab: 64})
	list, _ := alloc.NewList[myTx](64, nil)
	pool := alloc.NewPool[myTx](nil)
	for _, a := range []alloc.Allocator[myTx]{slab, list, pool} {
		tx, err := a.Get()
		if err != nil {
			panic(err)
		}
		tx.seq = 1
		if err := a.Put(tx); err != nil {
			panic(err)
		}
		tr := a.Traits()
		fmt.Printf("concurrent=%v on empty=%v wait=%v capacity=%d shrinks=%v\n",
			tr.Concurrent, tr.OnEmpty, tr.CanWait, tr.Capacity, tr.Shrinks)
	}
	// Output:
	// concurrent=true on empty=grow wait=false capacity=0 shrinks=false
	// concurrent=true on empty=fail wait=true capacity=64 shrinks=false
	// concurrent=true on empty=grow wait=false capacity=0 shrinks=true
}

// Owns tells a Slab's (or a List's) own objects, free or in use, from any other pointer.
func ExampleSlab_Owns() {
	slab, _ := alloc.NewSlab(alloc.SlabConfig[myTx]{ObjectsPerSlab: 4})
	tx, _ := slab.Get()
	fmt.Println(slab.Owns(tx), slab.Owns(new(myTx)))
	_ = slab.Put(tx)
	fmt.Println(slab.Owns(tx)) // free, still the slab's
	// Output:
	// true false
	// true
}

// Close ends a List: waiting GetCtx calls return ErrClosed, and objects still out may be put back.
func ExampleList_Close() {
	list, _ := alloc.NewList[myTx](1, nil)
	tx, _ := list.Get()
	waiting := make(chan error)
	go func() {
		_, err := list.GetCtx(context.Background()) // waits: the only object is out
		waiting <- err
	}()
	_ = list.Close()
	fmt.Println(<-waiting)
	fmt.Println(list.Put(tx))
	_, err := list.Get()
	fmt.Println(err)
	// Output:
	// alloc: allocator closed
	// <nil>
	// alloc: allocator closed
}

// A completion callback receives the *sdma.TxReq; Outer gets back to the caller's type, which
// embeds it first. It checks the types once and does not allocate.
func ExampleOuter() {
	list, _ := alloc.NewList[myTx](8, nil)

	complete := func(tx *txreq, status int) {
		mine := alloc.Outer[myTx](tx) // *txreq (sdma.TxReq) -> *myTx
		fmt.Println("seq", mine.seq, "status", status)
		_ = list.Put(mine)
	}

	tx, _ := list.Get()
	tx.seq = 42
	tx.callback = complete
	// With gosdma a completion needs no Outer: implement sdma.Completer on *myTx and pass the
	// *myTx itself, tx.TxReq.Init(flags, tlen, tx). Outer serves code holding only the field.
	tx.callback(&tx.txreq, 0) // here the example calls back itself, with the embedded txreq
	// Output:
	// seq 42 status 0
}

// OuterFunc checks once, up front, and returns a converter with no check left.
func ExampleOuterFunc() {
	myTxOf := alloc.OuterFunc[myTx, txreq]() // in real code: alloc.OuterFunc[myTx, sdma.TxReq]()
	tx := &myTx{seq: 3}
	fmt.Println(myTxOf(&tx.txreq).seq)
	// Output: 3
}
