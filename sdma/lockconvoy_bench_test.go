package sdma

import (
	"sync/atomic"
	"testing"
)

var lockConvoySink atomic.Uint64

// lockConvoyWork is a few microseconds of work, inside or outside the lock.
func lockConvoyWork(n int) uint64 {
	x := uint64(0)
	for i := 0; i < n; i++ {
		x += uint64(i) * uint64(i)
	}
	return x
}

// BenchmarkTicketLockContended: 4 goroutines per P take one ticketLock in a loop, each hold a
// couple of microseconds (as a short Process or Poll pass of many producers driving one engine:
// SendWait on a Manual or CompletePoll engine). Since 2aceae3 a waiter parks (time.Sleep, 16 us
// doubling to 1 ms) after about 320 polls and wakes on its timer only, and the lock is FIFO: when
// the turn of a sleeping waiter comes, everybody behind it waits for its sleep to end. Until wait
// started its backoff over when the turn moves, with more waiters than processors the queue stayed
// in that state, each hand-off a sleep: on the project's 2-vCPU machine, -benchtime 20000x
// -cpu 2, 187-279 us/op, against 9-16 us/op with 2aceae3's parent (spin and yield) and 1.8-3.1
// us/op with the reset.
func BenchmarkTicketLockContended(b *testing.B) {
	var l ticketLock
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Lock()
			lockConvoySink.Add(lockConvoyWork(2000))
			l.Unlock()
			lockConvoySink.Add(lockConvoyWork(500))
		}
	})
}
