package pio

import (
	"slices"
	"testing"
)

// TestPIOWaitFlushWakesEveryWaiterQueuedBefore: sc_disable splices the whole piowait list onto
// its wake list (list_splice_init) before it wakes anyone, so every waiter queued when the
// flush starts is woken by it, and one queued while it wakes (at the head: it sent nothing, or
// has a priority) stays on the emptied list. Here the flush takes its waiters in batches with
// the lock let go between them: a waiter that the first batch's wake-up parks at the head must
// not take the place of one queued before the flush (left on the list, not woken by the Disable
// that was to wake it).
func TestPIOWaitFlushWakesEveryWaiterQueuedBefore(t *testing.T) {
	for _, how := range []string{"sent nothing", "priority"} {
		sc := newManual(t, 64, &captureSink{})
		var woke []int
		const nw = 2*WaitBatchSize + 1
		ws := make([]*Waiter, nw+1) // ws[nw] is queued by the first wake-up
		for i := range ws {
			ws[i] = new(Waiter)
			ws[i].Init(func(w *Waiter) { woke = append(woke, slices.Index(ws, w)) })
		}
		late := ws[nw]
		if how == "priority" {
			late.SetPriority(1)
		}
		ws[0].Init(func(w *Waiter) {
			woke = append(woke, 0)
			if !sc.QueueWaitSent(late, sc.ReleaseSeq(), how == "priority") {
				t.Errorf("%s: QueueWaitSent of the late waiter refused", how)
			}
		})
		for _, w := range ws[:nw] {
			if !sc.QueueWait(w, sc.ReleaseSeq()) {
				t.Fatalf("%s: QueueWait refused", how)
			}
		}
		sc.wakeAll()
		want := make([]int, nw)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(woke, want) {
			t.Errorf("%s: the flush woke %v, want every waiter queued before it, in order: %v", how, woke, want)
		}
		if got := listOf(sc, ws); !slices.Equal(got, []int{nw}) {
			t.Errorf("%s: list after the flush %v, want the late waiter only [%d]", how, got, nw)
		}
		if sc.Waiting() != 1 {
			t.Errorf("%s: Waiting %d, want 1", how, sc.Waiting())
		}
	}
}
