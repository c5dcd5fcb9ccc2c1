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
	fmt.Println(pool.Put(tx))
	fmt.Println(errors.Is(pool.Put(tx), alloc.ErrDoublePut))
	// Output:
	// <nil>
	// true
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
	// ... sdma: tx.Init(...), tx.AddPage(...), engine.Send(&tx.TxReq) ...
	tx.callback(&tx.txreq, 0) // the engine's completion pass calls back with the embedded txreq
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
