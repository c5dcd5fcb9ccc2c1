package ring_test

import (
	"fmt"
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/ring"
)

// Two producers reserve slots one after the other; each fills its reservation, one txreq per
// Write, and publishes it. Publication follows reservation order: the tail moves past a
// reservation only once every earlier one is published (hfi1: sdma_update_tail after
// submit_tx).
func ExampleReservation() {
	r, _ := ring.New(64)

	a, _ := r.Reserve(3) // producer A: a 1-descriptor and a 2-descriptor txreq
	b, _ := r.Reserve(1) // producer B
	fmt.Println("A at", a.Start(), "len", a.Len(), "; B at", b.Start(), "len", b.Len())

	a.Write(0, []desc.Desc{{Qw0: 10}}, 0)
	a.Write(1, []desc.Desc{{Qw0: 11}, {Qw0: 12}}, 0)
	b.Write(0, []desc.Desc{{Qw0: 20}}, 0)

	// B is ready first, but it is not its turn: A's slots come before it.
	fmt.Println("B's turn:", b.TryPublishRelease(), "tail", r.Tail())
	a.Publish()
	b.Publish()
	fmt.Println("tail", r.Tail())
	for i := uint64(0); i < r.Tail(); i++ {
		fmt.Print(r.Slot(i).Qw0, " ")
	}
	fmt.Println()
	// Output:
	// A at 0 len 3 ; B at 3 len 1
	// B's turn: false tail 0
	// tail 4
	// 10 11 12 20
}

// A reader takes a snapshot with Begin, reads the data the writer guards, and uses it only if
// Retry says no write section began meanwhile (hfi1: read_seqretry on the engine's head_lock,
// as sdma_progress uses it). The writer brackets its updates with BeginWrite and EndWrite;
// writers are serialised by the caller.
func ExampleSeqCount() {
	var (
		sc         ring.SeqCount
		head, tail atomic.Uint64 // the guarded data, read and written atomically
	)
	update := func(h, t uint64) { // the one writer
		sc.BeginWrite()
		head.Store(h)
		tail.Store(t)
		sc.EndWrite()
	}
	read := func() (h, t uint64) {
		for {
			seq := sc.BeginWait()
			h, t = head.Load(), tail.Load()
			if !sc.Retry(seq) {
				return h, t
			}
		}
	}

	update(2, 7)
	fmt.Println(read())

	seq := sc.Begin()
	update(7, 9) // a writer ran after the snapshot
	fmt.Println("stale:", sc.Retry(seq), "count:", sc.Count())
	// Output:
	// 2 7
	// stale: true count: 4
}
