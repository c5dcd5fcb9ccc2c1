package ring

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gosdma/gosdma/desc"
	"github.com/klauspost/cpuid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// forEachImpl runs f once per Write implementation available here (cryptotest's
// TestAllImplementations pattern). Subtests must not run in parallel: the switch is global.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, name := range Implementations() {
		t.Run("impl="+name, func(t *testing.T) {
			restore, err := setImplementation(name)
			require.NoError(t, err)
			defer restore()
			f(t)
		})
	}
}

// mk builds a descriptor whose qw0 is v and qw1 is v's complement with the generation field set
// to 3 (so that stamping visibly changes it unless the generation is 3).
func mk(v uint64) desc.Desc { return desc.Desc{Qw0: v, Qw1: ^v | desc.GenerationSMask} }

func stamped(d desc.Desc, gen desc.Generation) desc.Desc { return d.WithGeneration(gen) }

func batch(first uint64, n int) []desc.Desc {
	ds := make([]desc.Desc, n)
	for i := range ds {
		ds[i] = mk(first + uint64(i))
	}
	return ds
}

// drain reads every published slot through the hardware-model API and completes it.
func drain(t *testing.T, r *Ring) []desc.Desc {
	t.Helper()
	var out []desc.Desc
	h, tl := r.HWHead(), r.Tail()
	for i := h; i != tl; i++ {
		out = append(out, r.Slot(i))
	}
	r.SetHWHead(tl)
	r.BeginWrite()
	r.SetSwHead(tl)
	r.EndWrite()
	return out
}

func TestNewSizes(t *testing.T) {
	r, err := New(0)
	require.NoError(t, err)
	assert.Equal(t, DefaultSize, r.Size())
	assert.Equal(t, uint64(DefaultSize-1), r.Mask())
	assert.Equal(t, uint(11), r.Shift())
	for _, size := range []int{64, 128, 1024, 32768} {
		r, err := New(size)
		require.NoError(t, err, "size %d", size)
		assert.Equal(t, size, r.Size())
		assert.Equal(t, uint64(size-1), r.Mask())
		assert.Equal(t, size, 1<<r.Shift())
		assert.Zero(t, slotsAddr(r)%slotAlign, "slots 64-byte aligned")
		assert.Len(t, r.slots, size)
	}
	for _, size := range []int{-1, 1, 2, 32, 63, 65, 100, 1000, 3000, 65536, 1 << 20} {
		r, err := New(size)
		assert.Nil(t, r)
		require.ErrorIs(t, err, ErrSize, "size %d", size)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "New", e.Op)
		assert.Contains(t, err.Error(), fmt.Sprint(size))
	}
}

func TestEmpty(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		require.NoError(t, err)
		assert.True(t, r.Empty())
		assert.Equal(t, 63, r.FreeCnt())
		assert.Equal(t, 1, r.InProcess(), "kernel's inprocess is size - freecnt")
		assert.Equal(t, 0, r.Used())
		assert.Zero(t, r.Dequeue(make([]desc.Desc, 8)))
		assert.Zero(t, r.Dequeue(nil))
		assert.Equal(t, uint64(0), r.Tail())
	})
}

func TestFullAndCapacity(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{64, 256} {
			r, err := New(size)
			require.NoError(t, err)
			ds := batch(1, size-1)
			start, err := r.Enqueue(ds, 0)
			require.NoError(t, err, "a full-capacity batch fits")
			assert.Equal(t, uint64(0), start)
			assert.Equal(t, 0, r.FreeCnt())
			assert.Equal(t, size, r.InProcess())
			assert.False(t, r.Empty())

			_, err = r.Reserve(1)
			assert.Same(t, ErrFull, err, "ErrFull is returned bare")
			_, err = r.Enqueue(batch(0, 1), 0)
			assert.ErrorIs(t, err, ErrFull)
			_, err = r.EnqueueSP(batch(0, 1), 0)
			assert.ErrorIs(t, err, ErrFull)
			assert.Equal(t, uint64(size-1), r.Tail(), "ErrFull changes nothing")

			// Free one slot: room for exactly one.
			r.SetHWHead(1)
			_, err = r.Reserve(1)
			assert.ErrorIs(t, err, ErrFull, "hwHead alone does not free slots")
			r.BeginWrite()
			r.SetSwHead(1)
			r.EndWrite()
			assert.Equal(t, 1, r.FreeCnt())
			_, err = r.Reserve(2)
			assert.ErrorIs(t, err, ErrFull)
			s, err := r.Reserve(1)
			require.NoError(t, err)
			assert.Equal(t, uint64(size-1), s.Start())
			s.Write(0, batch(99, 1), 0)
			s.Publish()
		}
	})
}

func TestBadInput(t *testing.T) { forEachImpl(t, testBadInput) }

func testBadInput(t *testing.T) {
	r, err := New(64)
	require.NoError(t, err)
	for _, n := range []int{64, 65, 1000} {
		_, err := r.Reserve(n)
		require.ErrorIs(t, err, ErrTooBig, "n=%d", n)
		_, err = r.Enqueue(make([]desc.Desc, n), 0)
		require.ErrorIs(t, err, ErrTooBig)
		_, err = r.EnqueueSP(make([]desc.Desc, n), 0)
		require.ErrorIs(t, err, ErrTooBig)
	}
	// An empty batch: one answer, ErrSize, named after the call (issue 12.8).
	for _, n := range []int{0, -1} {
		_, err := r.Reserve(n)
		require.ErrorIs(t, err, ErrSize, "n=%d", n)
		requireOp(t, err, "Reserve")
	}
	_, err = r.Enqueue(nil, 0)
	require.ErrorIs(t, err, ErrSize)
	requireOp(t, err, "Enqueue")
	_, err = r.EnqueueSP(nil, 0)
	require.ErrorIs(t, err, ErrSize)
	requireOp(t, err, "EnqueueSP")
	assert.True(t, r.Empty())
	s, err := r.Reserve(4)
	require.NoError(t, err)
	requirePanicIs(t, ErrSize, func() { s.Write(0, nil, 0) })
	requirePanicOp(t, "Write", func() { s.Write(0, nil, 0) })
	assert.Equal(t, s.Start(), r.Tail(), "refused calls change nothing")

	// A reservation can be published once; the zero Reservation not at all.
	s.Write(0, batch(1, 4), 0)
	s.Publish()
	requirePanicIs(t, ErrNotReserved, func() { s.Publish() })
	requirePanicIs(t, ErrNotReserved, func() { s.PublishRelease() })
	requirePanicOp(t, "PublishRelease", func() { s.PublishRelease() })
	var zero Reservation
	requirePanicIs(t, ErrNotReserved, func() { zero.Publish() })
	requirePanicIs(t, ErrNotReserved, func() { zero.PublishRelease() })
	requirePanicIs(t, ErrNotReserved, func() { zero.Write(0, batch(1, 1), 0) })
	assert.Equal(t, s.Start()+4, r.Tail(), "refused publishes change nothing")
	// The same once-only rule for PublishRelease, and either publication ends the reservation.
	s2, err := r.Reserve(2)
	require.NoError(t, err)
	s2.Write(0, batch(5, 2), 0)
	s2.PublishRelease()
	assert.Equal(t, s2.Start()+2, r.Tail(), "PublishRelease moves the tail past the reservation")
	requirePanicIs(t, ErrNotReserved, func() { s2.PublishRelease() })
	requirePanicIs(t, ErrNotReserved, func() { s2.Publish() })
	requirePanicIs(t, ErrNotReserved, func() { s2.Write(0, batch(1, 1), 0) })
	assert.Equal(t, s2.Start()+2, r.Tail(), "refused publishes change nothing")

	// Head indices out of order are programmer errors: panics matching ErrOrder.
	tl := r.Tail()
	requirePanicIs(t, ErrOrder, func() { r.SetHWHead(tl + 1) })
	r.SetHWHead(tl - 1)
	requirePanicIs(t, ErrOrder, func() { r.SetHWHead(tl - 2) })
	requirePanicIs(t, ErrOrder, func() { r.SetSwHead(tl) })
	r.BeginWrite()
	r.SetSwHead(tl - 1)
	r.EndWrite()
	requirePanicIs(t, ErrOrder, func() { r.SetSwHead(tl - 2) })

	_, err = setImplementation("nope")
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

// TestWriteOutsideReservation: a Write of slots that are not reserved, or already published,
// panics with ErrNotReserved before touching a slot, and the ring goes on working.
func TestWriteOutsideReservation(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, start := range []uint64{0, 64 - 2, ^uint64(0) - 1} {
			r, err := newAt(64, start)
			require.NoError(t, err)
			fill(r.slots)
			before := append([]desc.Desc(nil), r.slots...)
			one := batch(0xabc, 1)

			s, err := r.Reserve(4)
			require.NoError(t, err)
			require.Equal(t, start, s.Start())
			requirePanicIs(t, ErrNotReserved, func() { s.Write(0, batch(1, 5), 0) })  // past the end
			requirePanicIs(t, ErrNotReserved, func() { s.Write(3, batch(1, 2), 0) })  // straddles the end
			requirePanicIs(t, ErrNotReserved, func() { s.Write(4, one, 0) })          // just past
			requirePanicIs(t, ErrNotReserved, func() { s.Write(-1, one, 0) })         // below the start
			requirePanicIs(t, ErrNotReserved, func() { s.Write(-64, one, 0) })        // same slot, a pass before
			requirePanicIs(t, ErrNotReserved, func() { s.Write(64, one, 0) })         // same slot, a pass after
			requirePanicIs(t, ErrNotReserved, func() { s.Write(0, batch(1, 64), 0) }) // larger than any reservation
			require.Equal(t, before, r.slots, "refused Writes touched no slot")

			// Sub-ranges of the reservation, in any order, are fine (sdma fills one txreq at a time).
			s.Write(2, batch(12, 2), 0)
			s.Write(0, batch(10, 2), 0)
			s.Publish()
			requirePanicIs(t, ErrNotReserved, func() { s.Write(0, one, 0) }) // already published
			dst := make([]desc.Desc, 8)
			require.Equal(t, 4, r.Dequeue(dst))
			for k := range 4 {
				assert.Equal(t, stamped(mk(10+uint64(k)), r.Generation(s.Start()+uint64(k))), dst[k])
			}
			assert.True(t, r.Empty())
		}
	})
}

// TestNoSlotBeforePublication: reservations are published in reservation order. A later
// reservation that is written and published first stays invisible to the hardware model (Tail,
// Dequeue) until every earlier one is published; a reserved, written, unpublished range is never
// handed out.
func TestNoSlotBeforePublication(t *testing.T) {
	for _, pub := range []string{"Publish", "PublishRelease"} {
		t.Run("publish="+pub, func(t *testing.T) { testNoSlotBeforePublication(t, pub) })
	}
}

// publishBy publishes v with the named method: "Publish" or "PublishRelease".
func publishBy(v *Reservation, method string) {
	if method == "PublishRelease" {
		v.PublishRelease()
		return
	}
	v.Publish()
}

func testNoSlotBeforePublication(t *testing.T, pub string) {
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, 64-3) // the reservations straddle a generation change
		require.NoError(t, err)
		base := r.Tail()
		a, err := r.Reserve(3)
		require.NoError(t, err)
		b, err := r.Reserve(4)
		require.NoError(t, err)
		require.Equal(t, a.Start()+3, b.Start())

		b.Write(0, batch(20, 4), 0)
		published := make(chan struct{}, 1)
		go func() { publishBy(&b, pub); published <- struct{}{} }() // waits for a

		dst := make([]desc.Desc, 16)
		// Whenever we look, b's slots are not visible: a is not published yet. (The loop gives
		// the goroutine many chances to run; it cannot make the test fail by being slow.)
		for range 200 {
			require.Equal(t, base, r.Tail(), "tail moved past an unpublished reservation")
			require.Zero(t, r.Dequeue(dst))
			select {
			case <-published:
				t.Fatal("Publish of b returned before a was published")
			default:
			}
			runtime.Gosched()
		}
		a.Write(0, batch(10, 3), 0)
		require.Zero(t, r.Dequeue(dst), "written but unpublished")
		publishBy(&a, pub)
		<-published
		require.Equal(t, b.Start()+4, r.Tail())
		require.Equal(t, 7, r.Dequeue(dst))
		for k := range 7 {
			v := uint64(10 + k)
			if k >= 3 {
				v = uint64(20 + k - 3)
			}
			assert.Equal(t, stamped(mk(v), r.Generation(a.Start()+uint64(k))), dst[k], "k=%d", k)
		}
		assert.True(t, r.Empty())
	})
}

// requireOp asserts that err is an *Error naming op.
func requireOp(t *testing.T, err error, op string) {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, op, e.Op, "%v", err)
}

// requirePanicOp asserts that f panics with an *Error naming op.
func requirePanicOp(t *testing.T, op string, f func()) {
	t.Helper()
	defer func() {
		err, _ := recover().(error)
		requireOp(t, err, op)
	}()
	f()
}

func requirePanicIs(t *testing.T, target error, f func()) {
	t.Helper()
	defer func() {
		v := recover()
		require.NotNil(t, v, "expected a panic")
		err, ok := v.(error)
		require.True(t, ok, "panic value %v is an error", v)
		require.ErrorIs(t, err, target)
	}()
	f()
}

func TestGenerationStampingAndSkip(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, 60) // generation 0 → 1 at index 64
		require.NoError(t, err)
		ds := batch(100, 8)
		start, err := r.Enqueue(ds, 2) // ds[1], ds[2] are AHG edit descriptors
		require.NoError(t, err)
		require.Equal(t, uint64(60), start)
		got := drain(t, r)
		require.Len(t, got, 8)
		for k, d := range got {
			i := start + uint64(k)
			assert.Equal(t, ds[k].Qw0, d.Qw0)
			if k == 1 || k == 2 {
				assert.Equal(t, ds[k], d, "edit descriptor %d keeps its raw qw1", k)
				continue
			}
			assert.Equal(t, stamped(ds[k], r.Generation(i)), d, "k=%d", k)
			assert.Equal(t, r.Generation(i), d.Generation())
		}
		assert.Equal(t, desc.Generation(0), got[0].Generation())
		assert.Equal(t, desc.Generation(1), got[7].Generation(), "generation changes mid-batch at the wrap")

		// skip is clamped to [0, n-1].
		s, err := r.Enqueue(batch(1, 3), 10)
		require.NoError(t, err)
		got = drain(t, r)
		assert.Equal(t, r.Generation(s), got[0].Generation(), "ds[0] always stamped")
		assert.Equal(t, desc.Generation(3), got[1].Generation())
		assert.Equal(t, desc.Generation(3), got[2].Generation())
		_, err = r.Enqueue(batch(1, 3), -5)
		require.NoError(t, err)
		for _, d := range drain(t, r) {
			assert.Equal(t, desc.Generation(1), d.Generation(), "negative skip means none")
		}
	})
}

// TestWrap runs batches through indices that start just below a generation change, 2^32 and
// 2^64, with batch sizes that straddle the wrap in the middle.
func TestWrap(t *testing.T) {
	starts := map[string]uint64{
		"gen":   64*3 - 5,
		"2^32":  1<<32 - 37,
		"2^64":  ^uint64(0) - 100,
		"2^64b": ^uint64(0) - 63*2 + 1,
	}
	forEachImpl(t, func(t *testing.T) {
		for name, start := range starts {
			t.Run(name, func(t *testing.T) {
				r, err := newAt(64, start)
				require.NoError(t, err)
				assert.Equal(t, start, r.Tail())
				assert.Equal(t, start, r.SwHead())
				assert.Equal(t, 63, r.FreeCnt())
				next := start
				seq := uint64(0)
				dst := make([]desc.Desc, 64)
				for round := 0; round < 40; round++ {
					n := 1 + (round*7)%63
					ds := batch(seq, n)
					var s uint64
					if round%2 == 0 {
						s, err = r.Enqueue(ds, round%3)
					} else {
						s, err = r.EnqueueSP(ds, round%3)
					}
					require.NoError(t, err)
					require.Equal(t, next, s)
					assert.Equal(t, 63-n, r.FreeCnt())
					got := r.Dequeue(dst)
					require.Equal(t, n, got)
					skip := min(round%3, n-1)
					for k := 0; k < n; k++ {
						want := ds[k]
						if k == 0 || k > skip {
							want = stamped(want, desc.Generation((s+uint64(k))>>6&3))
						}
						require.Equal(t, want, dst[k], "round %d k %d index %#x", round, k, s+uint64(k))
					}
					next += uint64(n)
					seq += uint64(n)
					assert.Equal(t, next, r.SwHead())
					assert.True(t, r.Empty())
				}
				switch name {
				case "2^32":
					assert.Greater(t, next, uint64(1)<<32, "the test crossed 2^32")
				case "2^64", "2^64b":
					assert.Less(t, next, start, "the test crossed the uint64 wrap")
				}
			})
		}
	})
}

func TestReset(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		require.NoError(t, err)
		_, err = r.Enqueue(batch(0, 50), 0)
		require.NoError(t, err)
		seq := r.HeadSeq()
		r.Reset(128 + 10) // generation 2
		assert.True(t, r.HeadRetry(seq), "Reset bumps the head seqcount")
		assert.Equal(t, uint32(0), r.Seq().Count()%2)
		for _, v := range []uint64{r.Tail(), r.HWHead(), r.SwHead()} {
			assert.Equal(t, uint64(138), v)
		}
		assert.True(t, r.Empty())
		assert.Equal(t, 63, r.FreeCnt())
		s, err := r.Enqueue(batch(7, 3), 0)
		require.NoError(t, err)
		assert.Equal(t, uint64(138), s)
		got := drain(t, r)
		for _, d := range got {
			assert.Equal(t, desc.Generation(2), d.Generation())
		}
		r.Reset(0)
		res, err := r.Reserve(63)
		require.NoError(t, err, "the head cache was reset too")
		assert.Equal(t, uint64(0), res.Start())
	})
}

func TestSeqCount(t *testing.T) {
	r, err := New(64)
	require.NoError(t, err)
	s0 := r.HeadSeq()
	assert.False(t, r.HeadRetry(s0))
	r.BeginWrite()
	in := r.HeadSeq()
	assert.Equal(t, s0, in, "an odd count is rounded down")
	assert.True(t, r.HeadRetry(in), "a snapshot taken inside a pass is stale")
	r.EndWrite()
	assert.True(t, r.HeadRetry(s0))
	s1 := r.HeadSeq()
	assert.Equal(t, s0+2, s1)
	assert.False(t, r.HeadRetry(s1))
	assert.Equal(t, s1, r.Seq().BeginWait())

	var sc SeqCount
	assert.Equal(t, uint32(0), sc.Begin())
	sc.BeginWrite()
	done := make(chan uint32)
	go func() { done <- sc.BeginWait() }()
	sc.EndWrite()
	assert.Equal(t, uint32(2), <-done)
}

// TestLayout asserts the offsets of the index groups against line sizes taken outside the code
// under test: the running CPU's (klauspost/cpuid/v2), the platform's (golang.org/x/sys/cpu) and
// the 128 bytes of an Intel adjacent-line prefetch pair.
func TestLayout(t *testing.T) {
	line := uintptr(128)
	if l := uintptr(cpuid.CPU.CacheLine); l > line {
		line = l
	}
	if l := unsafe.Sizeof(cpu.CacheLinePad{}); l > line {
		line = l
	}
	t.Logf("cpuid cache line %d, x/sys/cpu line %d: groups must be %d bytes apart",
		cpuid.CPU.CacheLine, unsafe.Sizeof(cpu.CacheLinePad{}), line)
	var r Ring
	offs := map[string]uintptr{
		"slots(read-mostly)": unsafe.Offsetof(r.slots),
		"reserved":           unsafe.Offsetof(r.reserved),
		"tail":               unsafe.Offsetof(r.tail),
		"hwHead":             unsafe.Offsetof(r.hwHead),
		"swHead":             unsafe.Offsetof(r.swHead),
	}
	// The read-mostly fields, then one group per writer, in this order.
	order := []string{"slots(read-mostly)", "reserved", "tail", "hwHead", "swHead"}
	for i := 1; i < len(order); i++ {
		assert.Less(t, offs[order[i-1]], offs[order[i]], "%s before %s", order[i-1], order[i])
	}
	// Fields in their group leader's group: nothing else lies between them.
	groupOf := map[string]uintptr{
		"headCache": unsafe.Offsetof(r.headCache), // the producers' group, with reserved
		"base":      unsafe.Offsetof(r.base),      // read by every Reserve, read-mostly
		"closed":    unsafe.Offsetof(r.closed),    // read by Reserve's slow path, read-mostly
		"tailCache": unsafe.Offsetof(r.tailCache), // the consumer's group, with hwHead
		"seq":       unsafe.Offsetof(r.seq),       // the completion group, with swHead
	}
	leader := map[string]string{"headCache": "reserved", "base": "slots(read-mostly)", "closed": "slots(read-mostly)", "tailCache": "hwHead", "seq": "swHead"}
	for f, o := range groupOf {
		l := offs[leader[f]]
		assert.Less(t, o-l, uintptr(64), "%s within one line of %s", f, leader[f])
		offs[f] = o
	}
	// Every field of one group at least a line from every field of another, wherever the Ring
	// is allocated: distinct lines and distinct prefetch pairs.
	group := func(name string) string {
		if l, ok := leader[name]; ok {
			return l
		}
		return name
	}
	for a, oa := range offs {
		for b, ob := range offs {
			if group(a) == group(b) {
				continue
			}
			d := oa - ob
			if ob > oa {
				d = ob - oa
			}
			assert.GreaterOrEqual(t, d, line, "%s and %s", a, b)
		}
	}
	assert.GreaterOrEqual(t, unsafe.Sizeof(r)-unsafe.Offsetof(r.seq), line, "tail padding: the next object stays off seq's line")
}

func TestAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation")
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := New(256)
		require.NoError(t, err)
		ds := batch(0, 32)
		dst := make([]desc.Desc, 32)
		assert.Zero(t, testing.AllocsPerRun(200, func() {
			_, _ = r.Enqueue(ds, 1)
			_ = r.Dequeue(dst)
		}), "Enqueue/Dequeue")
		assert.Zero(t, testing.AllocsPerRun(200, func() {
			s, err := r.Reserve(len(ds))
			if err != nil {
				panic(err)
			}
			s.Write(0, ds, 0)
			s.Publish()
			_ = r.Dequeue(dst)
		}), "Reserve+Write+Publish")
		assert.Zero(t, testing.AllocsPerRun(200, func() {
			s, err := r.Reserve(len(ds))
			if err != nil {
				panic(err)
			}
			s.Write(0, ds, 0)
			s.PublishRelease()
			r.SetHWHead(r.Tail())
			r.BeginWrite()
			r.SetSwHead(r.HWHead())
			r.EndWrite()
		}), "Reserve+Write+PublishRelease, SetHWHead, SetSwHead")
		assert.Zero(t, testing.AllocsPerRun(200, func() {
			_, _ = r.EnqueueSP(ds, 0)
			_ = r.Dequeue(dst)
		}), "EnqueueSP")
		// The full path returns the bare sentinel: no allocation either.
		for r.FreeCnt() >= len(ds) {
			_, err := r.Enqueue(ds, 0)
			require.NoError(t, err)
		}
		assert.Zero(t, testing.AllocsPerRun(200, func() { _, _ = r.Enqueue(ds, 0) }), "ErrFull")
	})
}

// TestDequeueIndicesAndSeq checks, per implementation, what Dequeue's single assembly call does
// besides the copy: hwHead and swHead move together, the head seqcount gains exactly one write
// section per non-empty Dequeue, and wraps of the slot array and of 2^64 are crossed in the
// middle of a batch.
func TestDequeueIndicesAndSeq(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, start := range []uint64{0, 64 - 3, 1<<32 - 5, ^uint64(0) - 40} {
			r, err := newAt(64, start)
			require.NoError(t, err)
			dst := make([]desc.Desc, 63)
			next := start // index of the next descriptor to come out
			for round := range 40 {
				n := 1 + round*7%63
				s, err := r.EnqueueSP(batch(uint64(round)<<8, n), 0)
				require.NoError(t, err)
				require.Equal(t, s+uint64(n), r.Tail())
				seq := r.Seq().Count()
				m := 1 + round*5%n
				got := r.Dequeue(dst[:m])
				require.Equal(t, m, got)
				assert.Equal(t, seq+2, r.Seq().Count(), "one write section per Dequeue")
				for k := range m {
					i := next + uint64(k)
					require.Equal(t, stamped(mk(uint64(round)<<8+uint64(k)), r.Generation(i)), dst[k], "start %#x index %#x", start, i)
				}
				next += uint64(m)
				assert.Equal(t, next, r.HWHead())
				assert.Equal(t, next, r.SwHead())
				// The rest of the batch, with a larger dst than there is to take.
				rest := n - m
				require.Equal(t, rest, r.Dequeue(dst))
				next += uint64(rest)
				require.Zero(t, r.Dequeue(dst))
				assert.True(t, r.Empty())
			}
		}
	})
}

// TestDequeueTailCache: Dequeue's cached tail must not survive another consumer API moving
// hwHead past it, or a Reset, and must not make Dequeue return less than is published.
func TestDequeueTailCache(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		require.NoError(t, err)
		dst := make([]desc.Desc, 8)
		_, err = r.EnqueueSP(batch(0, 10), 0)
		require.NoError(t, err)
		require.Equal(t, 2, r.Dequeue(dst[:2])) // caches tail = 10
		// More is published; a request the cache cannot fill loads the tail again.
		_, err = r.Enqueue(batch(10, 10), 0)
		require.NoError(t, err)
		require.Equal(t, 8, r.Dequeue(dst))
		require.Equal(t, 8, r.Dequeue(dst))
		assert.Equal(t, mk(17), dst[7].WithGeneration(3))
		// The hardware-model API takes the rest (hwHead past the cache), then more arrives.
		got := drain(t, r)
		require.Len(t, got, 2)
		_, err = r.EnqueueSP(batch(20, 5), 0)
		require.NoError(t, err)
		require.Equal(t, 5, r.Dequeue(dst))
		assert.Equal(t, stamped(mk(24), 0), dst[4])
		// Reset below the cache: Dequeue sees an empty ring, then the new batch.
		r.Reset(3)
		require.Zero(t, r.Dequeue(dst))
		_, err = r.EnqueueSP(batch(30, 4), 0)
		require.NoError(t, err)
		require.Equal(t, 4, r.Dequeue(dst))
		assert.Equal(t, stamped(mk(30), 0), dst[0])
		assert.Equal(t, uint64(7), r.SwHead())
	})
}

// TestEnqueueSPStaleHeadCache: racing Reserves can leave in headCache a head older than the last
// reservation saw, so that reserved - headCache exceeds the capacity. EnqueueSP must then read
// swHead rather than take the wrapped-around difference for room.
func TestEnqueueSPStaleHeadCache(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, 1000)
		require.NoError(t, err)
		_, err = r.EnqueueSP(batch(0, 63), 0) // full
		require.NoError(t, err)
		r.headCache.Store(1000 - 100) // as a stale store from a racing Reserve would leave it
		_, err = r.EnqueueSP(batch(63, 1), 0)
		require.ErrorIs(t, err, ErrFull)
		assert.Equal(t, uint64(1000+63), r.Tail())
		assert.Equal(t, uint64(1000), r.headCache.Load(), "refreshed from swHead")
		// Room again once the consumer frees: the batch lands after the 63.
		dst := make([]desc.Desc, 8)
		require.Equal(t, 8, r.Dequeue(dst))
		r.headCache.Store(1000 - 100)
		start, err := r.EnqueueSP(batch(63, 8), 0)
		require.NoError(t, err)
		assert.Equal(t, uint64(1000+63), start)
		_, err = r.EnqueueSP(batch(71, 1), 0)
		require.ErrorIs(t, err, ErrFull)
	})
}

// TestReserveWrite checks ReserveWrite against Reserve + Write: batches of 1 to 5 descriptors
// (the plain-store writer up to writeFewMax, the batch writer past it) with AHG edit
// descriptors, across a generation change and the uint64 wrap; its errors; and that it
// allocates nothing.
func TestReserveWrite(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, start := range []uint64{64*3 - 7, ^uint64(0) - 20} {
			r, err := newAt(64, start)
			require.NoError(t, err)
			dst := make([]desc.Desc, 8)
			next := start
			for round := 0; round < 20; round++ {
				n := 1 + round%5
				skip := round % 3
				ds := batch(uint64(round)*8, n)
				res, err := r.ReserveWrite(ds, skip)
				require.NoError(t, err)
				require.Equal(t, next, res.Start())
				require.Equal(t, n, res.Len())
				assert.Equal(t, next, r.Tail(), "not published before Publish")
				if round%2 == 0 {
					res.Publish()
				} else {
					res.PublishRelease()
				}
				require.Equal(t, n, r.Dequeue(dst))
				skip = min(skip, n-1)
				for k := 0; k < n; k++ {
					want := ds[k]
					if k == 0 || k > skip {
						want = stamped(want, r.Generation(next+uint64(k)))
					}
					require.Equal(t, want, dst[k], "start %#x round %d k %d", start, round, k)
				}
				next += uint64(n)
			}
		}

		r, err := New(64)
		require.NoError(t, err)
		_, err = r.ReserveWrite(nil, 0)
		require.ErrorIs(t, err, ErrSize)
		_, err = r.ReserveWrite(batch(0, 64), 0)
		require.ErrorIs(t, err, ErrTooBig)
		res, err := r.ReserveWrite(batch(0, 60), 0)
		require.NoError(t, err)
		_, err = r.ReserveWrite(batch(0, 4), 0)
		require.Equal(t, ErrFull, err, "bare sentinel")
		res.PublishRelease()
		r.Close()
		_, err = r.ReserveWrite(batch(0, 1), 0)
		require.Equal(t, ErrClosed, err, "bare sentinel")
		r.Open()
		r.SetHWHead(r.Tail())
		r.BeginWrite()
		r.SetSwHead(r.HWHead())
		r.EndWrite()
		var zero Reservation
		require.Panics(t, func() { zero.PublishRelease() })
		require.Panics(t, func() { res.Publish() }, "published already")

		ds, dst2 := batch(0, 2), make([]desc.Desc, 2)
		if testing.CoverMode() == "" {
			assert.Zero(t, testing.AllocsPerRun(200, func() {
				res, err := r.ReserveWrite(ds, 0)
				if err != nil {
					panic(err)
				}
				res.PublishRelease()
				_ = r.Dequeue(dst2)
			}), "ReserveWrite+PublishRelease")
		}
	})
}
