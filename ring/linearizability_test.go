package ring

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/require"
)

// The linearizability check records short histories of concurrent enqueue-batch operations (by
// several producers) and dequeue operations (by the single consumer) on a real ring and asks
// porcupine whether some sequential order of them, respecting real time, is legal for a FIFO
// queue. Values are one byte (producer << 5 | sequence); the model's state is the queue as a
// string, so states compare with ==.
//
// Linearization points: an enqueue takes effect at its tail store (Publish), a dequeue at its
// tail load; so a dequeue must return exactly min(max, queue length) values. The ring is large
// enough never to fill, so a refused enqueue is illegal in the model.

type linEnq struct{ vals string }    // input of an enqueue-batch
type linDeq struct{ max int }        // input of a dequeue
type linDeqOut struct{ vals string } // output of a dequeue
type linEnqOut struct{ ok bool }     // output of an enqueue

var fifoModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		q := state.(string)
		switch in := input.(type) {
		case linEnq:
			if !output.(linEnqOut).ok {
				return false, q
			}
			return true, q + in.vals
		case linDeq:
			got := output.(linDeqOut).vals
			want := q[:min(in.max, len(q))]
			if got != want {
				return false, q
			}
			return true, q[len(got):]
		}
		return false, q
	},
	DescribeOperation: func(input, output any) string {
		switch in := input.(type) {
		case linEnq:
			return "enq(" + hexBytes(in.vals) + ")"
		case linDeq:
			return "deq() -> " + hexBytes(output.(linDeqOut).vals)
		}
		return "?"
	},
}

func hexBytes(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte("0123456789abcdef"[s[i]>>4])
		b.WriteByte("0123456789abcdef"[s[i]&15])
	}
	return b.String()
}

func TestLinearizableMPSC(t *testing.T) {
	iterations := 200
	if testing.Short() {
		iterations = 30
	}
	const producers, opsPerProducer = 3, 4
	forEachImpl(t, func(t *testing.T) {
		for it := range iterations {
			r, err := newAt(MinSize, ^uint64(0)-uint64(it%40)) // cross the uint64 wrap sometimes
			require.NoError(t, err)
			var clock atomic.Int64
			var mu sync.Mutex
			var history []porcupine.Operation
			record := func(op porcupine.Operation) {
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}

			total := 0
			var wg sync.WaitGroup
			for p := range producers {
				n := 0
				for o := range opsPerProducer {
					n += 1 + (p+o+it)%3
				}
				total += n
				wg.Add(1)
				go func(pid int) {
					defer wg.Done()
					seq := 0
					for o := range opsPerProducer {
						n := 1 + (pid+o+it)%3
						ds := make([]desc.Desc, n)
						vals := make([]byte, n)
						for k := range ds {
							vals[k] = byte(pid<<5 | seq)
							ds[k].Qw0 = uint64(vals[k])
							seq++
						}
						call := clock.Add(1)
						var err error
						if (pid+o)%2 == 0 {
							_, err = r.Enqueue(ds, 0)
						} else {
							var s Reservation
							if s, err = r.Reserve(n); err == nil {
								runtime.Gosched() // widen the reserved-but-unpublished window
								s.Write(0, ds, 0)
								if o%4 < 2 {
									s.Publish()
								} else {
									s.PublishRelease()
								}
							}
						}
						ret := clock.Add(1)
						record(porcupine.Operation{ClientId: pid, Input: linEnq{string(vals)}, Call: call, Output: linEnqOut{err == nil}, Return: ret})
					}
				}(p)
			}

			dst := make([]desc.Desc, 4)
			for got, ops := 0, 0; got < total; ops++ {
				max := 1 + ops%4
				call := clock.Add(1)
				m := r.Dequeue(dst[:max])
				ret := clock.Add(1)
				vals := make([]byte, m)
				for k := range m {
					vals[k] = byte(dst[k].Qw0)
				}
				got += m
				// Keep empty dequeues few: record some, skip the rest of a long empty run.
				if m > 0 || ops%8 == 0 {
					record(porcupine.Operation{ClientId: producers, Input: linDeq{max}, Call: call, Output: linDeqOut{string(vals)}, Return: ret})
				}
				if m == 0 {
					runtime.Gosched()
				}
			}
			wg.Wait()
			res := porcupine.CheckOperationsTimeout(fifoModel, history, 10*time.Second)
			require.NotEqual(t, porcupine.Illegal, res, "iteration %d: history not linearizable: %v", it, describe(history))
		}
	})
}

func describe(h []porcupine.Operation) []string {
	out := make([]string, len(h))
	for i, op := range h {
		out[i] = fifoModel.DescribeOperation(op.Input, op.Output)
	}
	return out
}

// TestFIFOModelRejects makes sure the model can fail: a dequeue that starts after an enqueue
// returned must see its value, and values come out in order.
func TestFIFOModelRejects(t *testing.T) {
	ok := func(h ...porcupine.Operation) bool { return porcupine.CheckOperations(fifoModel, h) }
	enq := func(v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: linEnq{v}, Call: call, Output: linEnqOut{true}, Return: ret}
	}
	deq := func(max int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: linDeq{max}, Call: call, Output: linDeqOut{v}, Return: ret}
	}
	require.True(t, ok(enq("ab", 1, 2), deq(1, "a", 3, 4), deq(4, "b", 5, 6)))
	require.True(t, ok(enq("ab", 1, 4), deq(4, "", 2, 3)), "concurrent: may run first")
	require.False(t, ok(enq("ab", 1, 2), deq(4, "", 3, 4)), "missed a completed enqueue")
	require.False(t, ok(enq("ab", 1, 2), deq(4, "ba", 3, 4)), "out of order")
	require.False(t, ok(enq("ab", 1, 2), deq(4, "a", 3, 4)), "short read")
	require.False(t, ok(enq("a", 1, 2), deq(4, "a", 3, 4), deq(4, "a", 5, 6)), "seen twice")
}
