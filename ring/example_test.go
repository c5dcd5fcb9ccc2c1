package ring_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/ring"
)

// A producer reserves room, writes its descriptors (generation stamped per slot) and publishes
// them; the hardware model reads the published slots; the completion pass frees them.
func Example() {
	r, err := ring.New(64)
	if err != nil {
		panic(err)
	}
	ds := []desc.Desc{{Qw0: 1}, {Qw0: 2}, {Qw0: 3}}

	// Producer (any number may run at once).
	res, err := r.Reserve(len(ds))
	if err != nil {
		panic(err)
	}
	res.Write(0, ds, 0) // offsets within the reservation: nothing else can be written
	res.Publish()       // in reservation order; the store-release of the tail

	// Hardware model (one goroutine).
	head, tail := r.HWHead(), r.Tail()
	for i := head; i != tail; i++ {
		d := r.Slot(i)
		fmt.Println(i, d.Qw0, d.Generation() == r.Generation(i))
	}
	r.SetHWHead(tail)

	// Completion pass (one at a time).
	r.BeginWrite()
	r.SetSwHead(r.HWHead())
	r.EndWrite()
	fmt.Println("free:", r.FreeCnt(), "empty:", r.Empty())
	// Output:
	// 0 1 true
	// 1 2 true
	// 2 3 true
	// free: 63 empty: true
}

// Enqueue and Dequeue are the one-call forms. A batch that does not fit returns ErrFull and
// changes nothing.
func ExampleRing_Enqueue() {
	r, _ := ring.New(64)
	big := make([]desc.Desc, 40)
	if _, err := r.Enqueue(big, 0); err != nil {
		panic(err)
	}
	_, err := r.Enqueue(big, 0)
	fmt.Println(errors.Is(err, ring.ErrFull), r.FreeCnt())

	dst := make([]desc.Desc, 64)
	fmt.Println(r.Dequeue(dst), r.FreeCnt())
	// Output:
	// true 23
	// 40 63
}

// A sleeper snapshots the head seqcount and later asks whether a completion pass ran since
// (hfi1: sdma_check_progress and sdma_progress).
func ExampleRing_HeadSeq() {
	r, _ := ring.New(64)
	seq := r.HeadSeq()
	fmt.Println(r.HeadRetry(seq))
	r.BeginWrite()
	r.EndWrite()
	fmt.Println(r.HeadRetry(seq))
	// Output:
	// false
	// true
}
