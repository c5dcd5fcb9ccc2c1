package pio

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestStressWaiterAfterQuietConsume: the chip goroutine consumed every packet written, below the
// credit-return threshold and with nobody waiting, so it wrote nothing back and went idle
// (spinning or parked, at random); the allocator's view has fewer credits than the next packet
// wants. The producer that then finds no room and queues as the first waiter must be woken
// (QueueWait's forced return, hfi1_sc_wantpiobuf_intr): nothing else will return those credits.
// A wait bounded far above any wake-up turns a lost one into a failure, not a hang.
func TestStressWaiterAfterQuietConsume(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		sc, err := New(Config{Credits: 10, Threshold: 10, Sink: &captureSink{}})
		if err != nil {
			t.Fatal(err)
		}
		// 3 packets of 3 blocks (40 dwords: 160 bytes): 9 consumed, below the threshold of 10.
		for range 3 {
			if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 152)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; sc.Stats().Packets < 3; i++ { // the chip goroutine sends them
			runtime.Gosched()
		}
		// The chip goes idle: still spinning, or parked on the doorbell.
		for range rng.IntN(600) {
			runtime.Gosched()
		}
		if got := sc.Stats().CreditReturns; got != 0 {
			t.Fatalf("round %d: %d credit returns below the threshold", round, got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = sc.SendWait(ctx, 0, 0, [][]byte{make([]byte, 152)}, nil)
		cancel()
		if err != nil {
			t.Fatalf("round %d: the first waiter after a quiet consume: %v (stats %+v, waiting %d)", round, err, sc.Stats(), sc.Waiting())
		}
		if s := sc.Stats(); s.NoCredits == 0 || s.Waits == 0 {
			t.Fatalf("round %d: the send did not wait (stats %+v)", round, s)
		}
		sc.Close()
	}
}
