package ring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// rv3Model is a plain model of every single-goroutine call on a Ring: the indices, the closed
// flag, the epoch, the seqcount and, per index in [sw, tail), the descriptor the ring must hold.
type rv3Model struct {
	size              uint64
	res, tail, hw, sw uint64
	closed            bool
	epoch             uint64
	seq               uint32
	pending           []*Reservation
	published         []*Reservation // published reservations (stale ones included)
	slots             []desc.Desc    // the ring's array, slot by slot (stale contents included)
	val               uint64
	log               []string
}

func (m *rv3Model) write(start uint64, ds []desc.Desc, skip int) {
	skip = min(max(skip, 0), len(ds)-1)
	for k, d := range ds {
		i := start + uint64(k)
		if k == 0 || k > skip {
			d.Qw1 = d.Qw1&^desc.GenerationSMask | (i/m.size%4)<<desc.GenerationShift
		}
		m.slots[i%m.size] = d
	}
}

func (m *rv3Model) batch(n int) []desc.Desc {
	if n <= 0 {
		return nil
	}
	ds := make([]desc.Desc, n)
	for k := range ds {
		m.val++
		ds[k] = desc.Desc{Qw0: m.val, Qw1: m.val*0x9e3779b97f4a7c15 | desc.GenerationSMask}
	}
	return ds
}

func (m *rv3Model) free() uint64 { return m.size - 1 - (m.res - m.sw) }

// wantReserveErr is the error a reservation of n should get in the model's state (nil: ok).
func (m *rv3Model) wantReserveErr(n int) error {
	switch {
	case n < 1:
		return ErrSize
	case uint64(n) > m.size-1:
		return ErrTooBig
	case m.closed:
		return ErrClosed
	case uint64(n) > m.free():
		return ErrFull
	}
	return nil
}

func panicOf(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

func isErr(p any, target error) bool {
	e, ok := p.(error)
	return ok && errors.Is(e, target)
}

// runRV3Model runs steps random operations on a ring of size slots starting at start, checking
// every call's result and the ring's whole observable state against the model after each.
func runRV3Model(t *testing.T, size int, start uint64, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0xdeadbeef))
	r, err := newAt(size, start)
	if err != nil {
		t.Fatal(err)
	}
	m := &rv3Model{size: uint64(size), res: start, tail: start, hw: start, sw: start, slots: make([]desc.Desc, size)}
	fail := func(format string, args ...any) {
		t.Helper()
		tail := m.log
		if len(tail) > 30 {
			tail = tail[len(tail)-30:]
		}
		for _, l := range tail {
			t.Log(l)
		}
		t.Fatalf("seed %d start %#x: "+format, append([]any{seed, start}, args...)...)
	}
	checkErr := func(op string, got, want error) {
		t.Helper()
		if want == nil {
			if got != nil {
				fail("%s: %v, want nil", op, got)
			}
			return
		}
		if !errors.Is(got, want) {
			fail("%s: %v, want %v", op, got, want)
		}
		if (want == ErrFull || want == ErrClosed) && got != want {
			fail("%s: %v not bare", op, got)
		}
	}
	randN := func() int {
		switch rng.IntN(10) {
		case 0:
			return rng.IntN(3) - 1 // -1, 0, 1
		case 1:
			return size - 1 + rng.IntN(3) - 1
		case 2:
			return int(m.free()) + rng.IntN(3) - 1
		}
		return 1 + rng.IntN(8)
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(22)
		m.log = append(m.log, fmt.Sprintf("step %d op %d: res %#x tail %#x hw %#x sw %#x closed %v pending %d", step, op, m.res, m.tail, m.hw, m.sw, m.closed, len(m.pending)))
		switch op {
		case 0, 1: // Reserve
			n := randN()
			v, err := r.Reserve(n)
			want := m.wantReserveErr(n)
			checkErr(fmt.Sprintf("Reserve(%d)", n), err, want)
			if want == nil {
				if v.Start() != m.res || v.Len() != n {
					fail("Reserve(%d) = [%#x, +%d), want start %#x", n, v.Start(), v.Len(), m.res)
				}
				m.pending = append(m.pending, &v)
				m.res += uint64(n)
			} else if v != (Reservation{}) {
				fail("Reserve(%d) refused but returned %+v", n, v)
			}
		case 2: // ReserveIn
			n := randN()
			ep := m.epoch
			switch rng.IntN(4) {
			case 0:
				ep++
			case 1:
				ep--
			}
			v, err := r.ReserveIn(n, ep)
			want := m.wantReserveErr(n)
			if want != ErrSize && want != ErrTooBig && ep != m.epoch {
				want = ErrReset
			}
			checkErr(fmt.Sprintf("ReserveIn(%d, %d) epoch %d", n, ep, m.epoch), err, want)
			if want == nil {
				if v.Start() != m.res || v.Len() != n {
					fail("ReserveIn(%d) = [%#x, +%d), want start %#x", n, v.Start(), v.Len(), m.res)
				}
				m.pending = append(m.pending, &v)
				m.res += uint64(n)
			}
		case 3: // ReserveWrite
			n := randN()
			ds := m.batch(n)
			skip := rng.IntN(5) - 1
			v, err := r.ReserveWrite(ds, skip)
			want := m.wantReserveErr(n)
			checkErr(fmt.Sprintf("ReserveWrite(%d)", n), err, want)
			if want == nil {
				if v.Start() != m.res || v.Len() != n {
					fail("ReserveWrite(%d) = [%#x, +%d), want start %#x", n, v.Start(), v.Len(), m.res)
				}
				m.write(m.res, ds, skip)
				m.pending = append(m.pending, &v)
				m.res += uint64(n)
			}
		case 4, 5: // Write into a pending reservation (in range)
			if len(m.pending) == 0 {
				continue
			}
			v := m.pending[rng.IntN(len(m.pending))]
			off := rng.IntN(v.Len())
			n := 1 + rng.IntN(v.Len()-off)
			ds := m.batch(n)
			skip := rng.IntN(5) - 1
			v.Write(off, ds, skip)
			m.write(v.Start()+uint64(off), ds, skip)
		case 6: // Write out of range or into a published reservation: panics, changes nothing
			var v *Reservation
			if len(m.published) > 0 && rng.IntN(2) == 0 {
				v = m.published[rng.IntN(len(m.published))]
			} else if len(m.pending) > 0 {
				v = m.pending[rng.IntN(len(m.pending))]
			} else {
				v = &Reservation{}
			}
			off, n := rng.IntN(80)-8, rng.IntN(70)
			if !v.published && v.r != nil && off >= 0 && n > 0 && off+n <= v.Len() {
				continue
			}
			ds := m.batch(n)
			p := panicOf(func() { v.Write(off, ds, 0) })
			want := ErrNotReserved
			if n == 0 {
				want = ErrSize
			}
			if !isErr(p, want) {
				fail("Write(%d, %d) on %+v: panic %v, want %v", off, n, *v, p, want)
			}
		case 7, 8: // Publish / PublishRelease / TryPublishRelease of the oldest pending
			if len(m.pending) == 0 {
				continue
			}
			v := m.pending[0]
			switch rng.IntN(3) {
			case 0:
				v.Publish()
			case 1:
				v.PublishRelease()
			case 2:
				if !v.TryPublishRelease() {
					fail("TryPublishRelease of the oldest: false")
				}
			}
			m.tail = v.Start() + uint64(v.Len())
			m.pending = m.pending[1:]
			m.published = append(m.published, v)
		case 9: // TryPublishRelease of a later pending: false, nothing changes
			if len(m.pending) < 2 {
				continue
			}
			v := m.pending[1+rng.IntN(len(m.pending)-1)]
			if v.TryPublishRelease() {
				fail("TryPublishRelease out of turn: true")
			}
		case 10: // Publish of a published reservation or the zero one: panics
			v := &Reservation{}
			if len(m.published) > 0 && rng.IntN(4) != 0 {
				v = m.published[rng.IntN(len(m.published))]
			}
			for _, f := range []func(){v.Publish, v.PublishRelease} {
				if p := panicOf(f); !isErr(p, ErrNotReserved) {
					fail("Publish of %+v: panic %v, want ErrNotReserved", *v, p)
				}
			}
			if v.TryPublishRelease() {
				fail("TryPublishRelease of a published reservation: true")
			}
		case 11: // Enqueue
			if len(m.pending) > 0 {
				continue // it would wait for the pending ones
			}
			n := randN()
			ds := m.batch(n)
			skip := rng.IntN(5) - 1
			s, err := r.Enqueue(ds, skip)
			want := m.wantReserveErr(n)
			checkErr(fmt.Sprintf("Enqueue(%d)", n), err, want)
			if want == nil {
				if s != m.res {
					fail("Enqueue(%d) = %#x, want %#x", n, s, m.res)
				}
				m.write(s, ds, skip)
				m.res += uint64(n)
				m.tail = m.res
			} else if s != 0 {
				fail("Enqueue(%d) refused, start %#x", n, s)
			}
		case 12: // EnqueueSP (refused with ErrOrder over a reservation not yet published)
			n := randN()
			ds := m.batch(n)
			skip := rng.IntN(5) - 1
			s, err := r.EnqueueSP(ds, skip)
			want := m.wantReserveErr(n)
			if len(m.pending) > 0 && (want == nil || want == ErrFull) {
				want = ErrOrder
			}
			checkErr(fmt.Sprintf("EnqueueSP(%d)", n), err, want)
			if want == nil {
				if s != m.res {
					fail("EnqueueSP(%d) = %#x, want %#x", n, s, m.res)
				}
				m.write(s, ds, skip)
				m.res += uint64(n)
				m.tail = m.res
			} else if s != 0 {
				fail("EnqueueSP(%d) refused, start %#x", n, s)
			}
		case 13, 14: // Dequeue
			k := rng.IntN(size + 8)
			if rng.IntN(3) == 0 {
				k = rng.IntN(4)
			}
			dst := make([]desc.Desc, k)
			got := r.Dequeue(dst)
			want := int(min(uint64(k), m.tail-m.hw))
			if got != want {
				fail("Dequeue(%d) = %d, want %d", k, got, want)
			}
			for i := range got {
				if w := m.slots[(m.hw+uint64(i))%m.size]; dst[i] != w {
					fail("Dequeue: index %#x: %+v, want %+v", m.hw+uint64(i), dst[i], w)
				}
			}
			if got > 0 {
				m.hw += uint64(got)
				m.sw = m.hw
				m.seq += 2
			}
		case 15: // hardware model: Set/StoreHWHead in order, SetHWHead out of order
			h := m.hw + uint64(rng.IntN(int(m.tail-m.hw)+1))
			if rng.IntN(4) == 0 {
				h = m.hw + uint64(rng.IntN(2*size)-size)
				if h-m.hw <= m.tail-m.hw {
					continue
				}
				if p := panicOf(func() { r.SetHWHead(h) }); !isErr(p, ErrOrder) {
					fail("SetHWHead(%#x) out of order: panic %v", h, p)
				}
				break
			}
			for i := m.hw; i != h; i++ {
				if got, w := r.Slot(i), m.slots[i%m.size]; got != w {
					fail("Slot(%#x) = %+v, want %+v", i, got, w)
				}
			}
			if rng.IntN(2) == 0 {
				r.SetHWHead(h)
			} else {
				r.StoreHWHead(h)
			}
			m.hw = h
		case 16: // completion pass
			h := m.sw + uint64(rng.IntN(int(m.hw-m.sw)+1))
			seq := r.HeadSeq()
			r.BeginWrite()
			if rng.IntN(2) == 0 {
				r.SetSwHead(h)
			} else {
				r.StoreSwHead(h)
			}
			r.EndWrite()
			m.seq += 2
			if !r.HeadRetry(seq) {
				fail("HeadRetry after a pass: false")
			}
			m.sw = h
		case 17: // SetSwHead out of order
			h := m.sw + uint64(rng.IntN(2*size)-size)
			if h-m.sw <= m.hw-m.sw {
				continue
			}
			if p := panicOf(func() { r.SetSwHead(h) }); !isErr(p, ErrOrder) {
				fail("SetSwHead(%#x) out of order: panic %v", h, p)
			}
		case 18: // Close
			r.Close()
			m.closed = true
		case 19: // Open
			r.Open()
			m.closed = false
		case 20: // Reset: refused (ErrOrder, nothing changed) with a reservation pending
			if len(m.pending) > 0 {
				if p := panicOf(func() { r.Reset(rng.Uint64()) }); !isErr(p, ErrOrder) {
					fail("Reset with %d reservations pending: panic %v, want ErrOrder", len(m.pending), p)
				}
				break
			}
			ns := m.tail + uint64(rng.IntN(3*size)) - uint64(size)
			if rng.IntN(4) == 0 {
				ns = rng.Uint64()
			}
			seq := r.HeadSeq()
			r.Reset(ns)
			if !r.HeadRetry(seq) {
				fail("HeadRetry after Reset: false")
			}
			m.seq += 2
			m.res, m.tail, m.hw, m.sw = ns, ns, ns, ns
			m.epoch++
		case 21: // copied reservation published twice: the second must panic
			if len(m.pending) == 0 {
				continue
			}
			v := m.pending[0]
			cp := *v
			v.Publish()
			m.tail = v.Start() + uint64(v.Len())
			m.pending = m.pending[1:]
			m.published = append(m.published, v)
			if p := panicOf(cp.Publish); p == nil {
				fail("a copy of a published reservation published again without a panic")
			}
		}
		// The whole observable state.
		if r.Tail() != m.tail || r.HWHead() != m.hw || r.SwHead() != m.sw || r.Reserved() != m.res {
			fail("indices: tail %#x hw %#x sw %#x res %#x, want %#x %#x %#x %#x", r.Tail(), r.HWHead(), r.SwHead(), r.Reserved(), m.tail, m.hw, m.sw, m.res)
		}
		if got, want := r.FreeCnt(), int(m.free()); got != want {
			fail("FreeCnt %d, want %d", got, want)
		}
		if got, want := r.Used(), int(m.res-m.sw); got != want {
			fail("Used %d, want %d", got, want)
		}
		if got, want := r.InProcess(), int(m.res-m.sw)+1; got != want {
			fail("InProcess %d, want %d", got, want)
		}
		if r.Empty() != (m.res == m.sw) || r.Closed() != m.closed || r.Epoch() != m.epoch {
			fail("Empty %v Closed %v Epoch %d", r.Empty(), r.Closed(), r.Epoch())
		}
		if r.Seq().Count() != m.seq {
			fail("seq %d, want %d", r.Seq().Count(), m.seq)
		}
		for i := m.hw; i != m.tail; i++ {
			if got, w := r.Slot(i), m.slots[i%m.size]; got != w {
				fail("Slot(%#x) = %+v, want %+v", i, got, w)
			}
			if g := r.Generation(i); uint64(g) != i/m.size%4 {
				fail("Generation(%#x) = %d", i, g)
			}
		}
		if len(m.log) > 1000 {
			m.log = m.log[500:]
		}
	}
}

// TestRV3Model: random single-goroutine sequences of every call (Reserve, ReserveIn with the
// ring's epoch, an old one and one ahead, ReserveWrite, Write in and out of range, the three
// Publishes in and out of turn and again, a copy published twice, Enqueue, EnqueueSP (refused
// over a pending reservation), Dequeue
// bursts of 0 to past the capacity, the heads' Set and Store in and out of order, Close, Open,
// Reset refused and done) with batch sizes of -1, 0, 1, capacity, capacity+1 and the room +-1,
// on rings starting just below a generation change, 2^32, 2^63 and 2^64, for every
// implementation (and -tags purego): each call's result and error (bare ErrFull and ErrClosed),
// and after each call every index, FreeCnt, Used, InProcess, Empty, Closed, Epoch, the seqcount
// and every published slot must match a plain model of the ring's array.
func TestRV3Model(t *testing.T) {
	starts := []uint64{0, 1<<32 - 100, ^uint64(0) - 200, ^uint64(0) - 5, 1<<63 - 64, 4*64 - 3}
	seeds, steps := uint64(8), 3000
	if testing.Short() && raceEnabled {
		seeds, steps = 3, 1500
	}
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{64, 128} {
			for si, start := range starts {
				for seed := range seeds {
					runRV3Model(t, size, start, seed*97+uint64(si)*7+uint64(size), steps)
				}
			}
		}
	})
}
