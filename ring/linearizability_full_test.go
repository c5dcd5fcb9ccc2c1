package ring

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/gosdma/gosdma/desc"
)

// The linearizability check of the bounded ring, full included (TestLinearizableMPSC's ring never
// fills, so it never judges an ErrFull). The model is the ring's own specification, not an
// unbounded FIFO: a reservation takes room at its compare-and-swap and its descriptors become
// visible at its publication, in reservation order; the hardware model reads what is published
// and the completion pass frees what the hardware model has read. Its state:
//
//	q    the values of [swHead, reserved), in reservation order
//	pub  tail - swHead
//	hw   hwHead - swHead
//
// Operations: reserve(vals) -> ok | full (ok takes room: legal iff Size()-1 - len(q) >= n; full is
// legal iff it is less), publish(vals) (legal iff vals are next after pub), read(max) -> vals
// (exactly q[hw : hw+min(max, pub-hw)]: the hardware model's tail load, slot reads and SetHWHead,
// or Dequeue's copy), free(k) (legal iff k <= hw: the completion pass's SetSwHead). Dequeue is a
// read and a free of what it read in one operation. An Enqueue is recorded as a reserve and a
// publish with the same interval (both of its steps happen inside it); Reserve and Publish are
// recorded each with its own call's interval. The ring is filled with filler values first, so
// that the producers' batches find it full as often as not.

type fullState struct {
	q       string
	pub, hw int
}

type (
	fullRes struct{ vals string }
	fullPub struct{ vals string }
	fullRd  struct {
		max  int
		free bool // Dequeue: frees what it read
	}
	fullFree struct{ k int }
)

func fullModel(capacity int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return fullState{} },
		Step: func(state, input, output any) (bool, any) {
			s := state.(fullState)
			switch in := input.(type) {
			case fullRes:
				room := capacity - len(s.q)
				if !output.(bool) {
					return room < len(in.vals), s
				}
				if room < len(in.vals) {
					return false, s
				}
				s.q += in.vals
				return true, s
			case fullPub:
				if s.pub+len(in.vals) > len(s.q) || s.q[s.pub:s.pub+len(in.vals)] != in.vals {
					return false, s
				}
				s.pub += len(in.vals)
				return true, s
			case fullRd:
				got := output.(string)
				if got != s.q[s.hw:s.hw+min(in.max, s.pub-s.hw)] {
					return false, s
				}
				s.hw += len(got)
				if in.free {
					s.q, s.pub, s.hw = s.q[s.hw:], s.pub-s.hw, 0
				}
				return true, s
			case fullFree:
				if in.k > s.hw {
					return false, s
				}
				s.q, s.pub, s.hw = s.q[in.k:], s.pub-in.k, s.hw-in.k
				return true, s
			}
			return false, s
		},
		DescribeOperation: func(input, output any) string {
			switch in := input.(type) {
			case fullRes:
				return fmt.Sprintf("reserve(%s) -> %v", hexBytes(in.vals), output)
			case fullPub:
				return "publish(" + hexBytes(in.vals) + ")"
			case fullRd:
				return fmt.Sprintf("read(%d, free %v) -> %s", in.max, in.free, hexBytes(output.(string)))
			case fullFree:
				return fmt.Sprintf("free(%d)", in.k)
			}
			return "?"
		},
	}
}

// fullHistory records operations with a logical clock.
type fullHistory struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (h *fullHistory) now() int64 { return h.clock.Add(1) }

func (h *fullHistory) add(client int, in, out any, call, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// TestLinearizableFullRing: producers against a ring that is nearly full from the start: a
// single producer with EnqueueSP, or three with the multi-producer APIs (Enqueue,
// Reserve+Write+Publish, ReserveWrite+PublishRelease, ReserveIn+Write+TryPublishRelease), each
// refused batch retried (the first few refusals recorded); the consumer is Dequeue, or the
// hardware model and the completion pass on two goroutines (Tail, Slot, SetHWHead or
// StoreHWHead; HWHead, SetSwHead in a write section). porcupine must find every history legal
// for the bounded ring's model above: no ErrFull while there was room, no batch accepted without
// room, reads in reservation order and exactly what was published. Indices start near 2^64;
// every implementation; run under -race and at -cpu 1,2,4.
func TestLinearizableFullRing(t *testing.T) {
	iterations := 60
	if testing.Short() {
		iterations = 12
	}
	type variant struct {
		name      string
		producers int
		split     bool // hardware model and completion pass apart; else Dequeue
	}
	variants := []variant{{"SP/Dequeue", 1, false}, {"MP/Dequeue", 3, false}, {"MP/split", 3, true}, {"SP/split", 1, true}}
	refusals := map[string]int{}
	forEachImpl(t, func(t *testing.T) {
		for _, v := range variants {
			for it := range iterations {
				h := runFullRing(t, it, v.producers, v.split)
				for _, op := range h {
					if _, ok := op.Input.(fullRes); ok && !op.Output.(bool) {
						refusals[v.name]++
					}
				}
				res := porcupine.CheckOperationsTimeout(fullModel(MinSize-1), h, 20*time.Second)
				if res == porcupine.Illegal {
					m := fullModel(MinSize - 1)
					for _, op := range h {
						t.Logf("[%d,%d] c%d %s", op.Call, op.Return, op.ClientId, m.DescribeOperation(op.Input, op.Output))
					}
					t.Fatalf("%s iteration %d: history not linearizable for the bounded ring", v.name, it)
				}
			}
		}
	})
	t.Logf("ErrFull refusals recorded: %v", refusals)
}

// runFullRing runs one history and returns it.
func runFullRing(t *testing.T, it, producers int, split bool) []porcupine.Operation {
	t.Helper()
	const filler = 60 // of the 63 slots: the producers' first batches overflow the rest
	const opsPer, fullsPer = 5, 3
	r, err := newAt(MinSize, ^uint64(0)-uint64(it%70))
	if err != nil {
		t.Fatal(err)
	}
	fill := make([]desc.Desc, filler)
	for k := range fill {
		fill[k].Qw0 = 0xff
	}
	if _, err := r.Enqueue(fill, 0); err != nil {
		t.Fatal(err)
	}
	h := &fullHistory{}
	// The filler, as if reserved and published before the history: one op each, before all.
	fb := make([]byte, filler)
	for k := range fb {
		fb[k] = 0xff
	}
	fv := string(fb)
	c0 := h.now()
	h.add(producers+2, fullRes{fv}, true, c0, h.now())
	c1 := h.now()
	h.add(producers+2, fullPub{fv}, nil, c1, h.now())

	total := filler
	var wg sync.WaitGroup
	var tried atomic.Int32 // producers that made their first attempt: the consumer waits for all
	for p := range producers {
		for o := range opsPer {
			total += 1 + (p+o+it)%3
		}
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			seq, fulls := 0, 0
			for o := range opsPer {
				n := 1 + (pid+o+it)%3
				ds := make([]desc.Desc, n)
				vals := make([]byte, n)
				for k := range ds {
					vals[k] = byte(pid<<5 | seq)
					ds[k].Qw0 = uint64(vals[k])
					seq++
				}
				api := (pid + o + it) % 4
				if producers == 1 {
					api = 4 // EnqueueSP
				}
				for {
					call := h.now()
					var v Reservation
					var err error
					switch api {
					case 0:
						_, err = r.Enqueue(ds, 0)
					case 4:
						_, err = r.EnqueueSP(ds, 0)
					case 1:
						v, err = r.Reserve(n)
					case 2:
						v, err = r.ReserveWrite(ds, 0)
					case 3:
						v, err = r.ReserveIn(n, r.Epoch())
					}
					ret := h.now()
					if o == 0 && seq == n && fulls == 0 {
						tried.Add(1)
					}
					if err == ErrFull {
						if fulls < fullsPer {
							fulls++
							h.add(pid, fullRes{string(vals)}, false, call, ret)
						}
						runtime.Gosched()
						continue
					}
					if err != nil {
						panic(err) // no Close, no Reset: nothing else is possible
					}
					h.add(pid, fullRes{string(vals)}, true, call, ret)
					if api == 0 || api == 4 {
						h.add(pid, fullPub{string(vals)}, nil, call, ret) // inside the same call
						break
					}
					if api != 2 {
						runtime.Gosched() // widen the reserved-but-unpublished window
						v.Write(0, ds, 0)
					}
					pc := h.now()
					switch api {
					case 1:
						v.Publish()
					case 2:
						v.PublishRelease()
					case 3:
						for !v.TryPublishRelease() {
							runtime.Gosched()
						}
					}
					h.add(pid, fullPub{string(vals)}, nil, pc, h.now())
					break
				}
			}
		}(p)
	}

	for tried.Load() < int32(producers) {
		runtime.Gosched()
	}
	cons := producers
	empties := 0
	buf := make([]desc.Desc, 4)
	readVals := func(ds []desc.Desc) string {
		b := make([]byte, len(ds))
		for k, d := range ds {
			b[k] = byte(d.Qw0)
		}
		return string(b)
	}
	if !split {
		for got, ops := 0, 0; got < total; ops++ {
			max := 1 + (ops+it)%4
			call := h.now()
			m := r.Dequeue(buf[:max])
			ret := h.now()
			got += m
			if m > 0 || ops%8 == 0 && empties < 16 {
				if m == 0 {
					empties++ // an empty read changes nothing: recording a few suffices
				}
				h.add(cons, fullRd{max: max, free: true}, readVals(buf[:m]), call, ret)
			}
			if m == 0 || ops%3 == 0 {
				runtime.Gosched()
			}
		}
		wg.Wait()
		return h.ops
	}

	// The completion pass on its own goroutine: frees part of what the hardware model read.
	var done atomic.Bool
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for i := 0; ; i++ {
			call := h.now()
			hw, sw := r.HWHead(), r.SwHead()
			if hw == sw {
				if done.Load() && r.HWHead() == r.SwHead() {
					return
				}
				runtime.Gosched()
				continue
			}
			to := sw + max(1, (hw-sw)/uint64(1+i%2))
			r.BeginWrite()
			if i%2 == 0 {
				r.SetSwHead(to)
			} else {
				r.StoreSwHead(to)
			}
			r.EndWrite()
			h.add(cons+1, fullFree{int(to - sw)}, nil, call, h.now())
			if i%3 == 0 {
				runtime.Gosched()
			}
		}
	}()
	for got, ops := 0, 0; got < total; ops++ {
		max := 1 + (ops+it)%4
		call := h.now()
		hw := r.HWHead()
		m := int(min(uint64(max), r.Tail()-hw))
		for k := range m {
			buf[k] = r.Slot(hw + uint64(k))
		}
		if m > 0 {
			if ops%2 == 0 {
				r.SetHWHead(hw + uint64(m))
			} else {
				r.StoreHWHead(hw + uint64(m))
			}
		}
		ret := h.now()
		got += m
		if m > 0 || ops%8 == 0 && empties < 16 {
			if m == 0 {
				empties++
			}
			h.add(cons, fullRd{max: max}, readVals(buf[:m]), call, ret)
		}
		if m == 0 || ops%3 == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	done.Store(true)
	cwg.Wait()
	return h.ops
}

// TestFullModelRejects makes sure the bounded ring's model can fail: a refusal with room, an
// acceptance without, a read of something reserved but not published, a free of something not
// read, are all illegal.
func TestFullModelRejects(t *testing.T) {
	m := fullModel(3)
	ok := func(ops ...porcupine.Operation) bool { return porcupine.CheckOperations(m, ops) }
	at := 0
	op := func(in, out any) porcupine.Operation {
		at += 2
		return porcupine.Operation{Input: in, Output: out, Call: int64(at), Return: int64(at + 1)}
	}
	if !ok(op(fullRes{"ab"}, true), op(fullRes{"cd"}, false), op(fullPub{"ab"}, nil), op(fullRd{max: 4}, "ab"), op(fullFree{2}, nil), op(fullRes{"cd"}, true)) {
		t.Error("a legal history judged illegal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullRes{"c"}, false)) {
		t.Error("ErrFull with room: legal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullRes{"cd"}, true)) {
		t.Error("accepted without room: legal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullRd{max: 4}, "ab")) {
		t.Error("read before publication: legal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullPub{"ab"}, nil), op(fullRd{max: 4}, "a")) {
		t.Error("short read: legal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullPub{"ab"}, nil), op(fullFree{1}, nil)) {
		t.Error("free before the hardware model read: legal")
	}
	at = 0
	if ok(op(fullRes{"ab"}, true), op(fullRes{"c"}, true), op(fullPub{"c"}, nil)) {
		t.Error("published out of reservation order: legal")
	}
	at = 0
	if !ok(op(fullRes{"ab"}, true), op(fullPub{"ab"}, nil), op(fullRd{max: 1}, "a"), op(fullRes{"cd"}, false), op(fullFree{1}, nil), op(fullRes{"cd"}, true)) {
		t.Error("room comes back only when freed: judged illegal")
	}
}
