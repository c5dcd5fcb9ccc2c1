package ring

import (
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestEnqueueSPRefusesOverPendingReservation: EnqueueSP takes the reservation index as its start
// (one producer: it is the tail) and publishes its batch by storing the tail past it. Called by
// the one producer while a reservation of its own (Reserve, ReserveWrite, ReserveIn) was still
// unpublished, it published that reservation's slots, unwritten, with its own batch: the consumer
// read [0, 5) stale and the reservation's Publish then panicked (start behind the tail). It now
// refuses with an *Error matching ErrOrder and changes nothing; once the reservation is
// published, EnqueueSP goes on after it. Every implementation.
func TestEnqueueSPRefusesOverPendingReservation(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		if err != nil {
			t.Fatal(err)
		}
		v, err := r.Reserve(5)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.EnqueueSP(batch(100, 3), 0)
		if !errors.Is(err, ErrOrder) || !strings.Contains(err.Error(), "EnqueueSP") {
			t.Fatalf("EnqueueSP over [0, 5) reserved and unpublished: %v, want ErrOrder", err)
		}
		if r.Tail() != 0 || r.Reserved() != 5 {
			t.Fatalf("refused EnqueueSP changed the ring: tail %d reserved %d", r.Tail(), r.Reserved())
		}
		v.Write(0, batch(1, 5), 0)
		v.Publish()
		at, err := r.EnqueueSP(batch(100, 3), 0)
		if err != nil || at != 5 || r.Tail() != 8 {
			t.Fatalf("EnqueueSP after the Publish: %d, %v, tail %d", at, err, r.Tail())
		}
		dst := make([]desc.Desc, 8)
		if n := r.Dequeue(dst); n != 8 || dst[0].Qw0 != 1 || dst[5].Qw0 != 100 {
			t.Fatalf("Dequeue: %d %v", n, dst)
		}
	})
}
