package dma

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func registrar(t *testing.T, m testMapper) Registrar {
	t.Helper()
	rg, ok := m.(Registrar)
	require.True(t, ok, "%T registers memory", m)
	return rg
}

// TestRegister: registered memory translates by arithmetic within its bounds and direction, is
// reported by Live, refuses overlaps, pins its region, and faults once deregistered.
func TestRegister(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		reg := newRegion(t, 4)
		mem := reg.Bytes()
		copy(mem, pattern(len(mem), 3))
		r, err := rg.Register(mem, ToDevice)
		require.NoError(t, err)
		assert.True(t, r.Live())
		assert.Equal(t, ToDevice, r.Dir())
		assert.Equal(t, len(mem), len(r.Bytes()))

		sub := mem[5000:5300]
		a, ok := r.AddrOf(sub)
		require.True(t, ok)
		assert.Equal(t, r.Addr()+5000, a)
		b, err := m.Translate(a, len(sub), ToDevice)
		require.NoError(t, err)
		assert.Equal(t, sliceAddr(sub), sliceAddr(b), "the translation aliases the registered bytes")
		assert.Equal(t, sub, b)
		assert.Same(t, r, rg.Registered(sub))
		assert.Nil(t, rg.Registered(make([]byte, 8)), "heap memory is not registered")
		_, ok = r.AddrOf(make([]byte, 8))
		assert.False(t, ok)

		_, err = m.Translate(a, len(mem), ToDevice)
		requireFault(t, err, a, ReasonPartlyMapped)
		_, err = m.Translate(a, 8, FromDevice)
		requireFault(t, err, a, ReasonDirection)
		assert.NoError(t, m.SyncForDevice(a, 8, ToDevice))
		assert.ErrorIs(t, m.SyncForDevice(a, 8, FromDevice), ErrNotMapped)

		assert.Equal(t, 1, m.LiveCount())
		assert.Equal(t, []Mapping{{Addr: r.Addr(), Size: len(mem), Dir: ToDevice, Kind: KindRegistered}}, m.Live())

		_, err = rg.Register(mem[100:200], ToDevice)
		assert.ErrorIs(t, err, ErrInvalid, "overlap")
		_, err = rg.Register(nil, ToDevice)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, 1, m.LiveCount(), "refused registrations change nothing")

		assert.ErrorIs(t, reg.Close(), ErrBusy, "the registration pins the region")
		require.NoError(t, rg.Deregister(context.Background(), r))
		assert.False(t, r.Live())
		assert.Zero(t, m.LiveCount())
		_, err = m.Translate(a, 8, ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
		assert.ErrorIs(t, rg.Deregister(context.Background(), r), ErrNotMapped, "twice")
		assert.ErrorIs(t, rg.Deregister(context.Background(), nil), ErrNotMapped)
	})
}

// TestRegisterHeapAndMapped: Go heap memory registers too; on Direct a registered buffer may
// also be mapped per call, and both are found.
func TestRegisterHeapAndMapped(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		buf := pattern(3*PageSize, 9)
		r, err := rg.Register(buf, Bidirectional)
		require.NoError(t, err)
		a, err := m.MapSingle(buf[10:20], ToDevice)
		require.NoError(t, err)
		b, err := m.Translate(a, 10, ToDevice)
		require.NoError(t, err)
		assert.Equal(t, buf[10:20], b)
		ra, _ := r.AddrOf(buf[10:20])
		b, err = m.Translate(ra, 10, FromDevice)
		require.NoError(t, err)
		assert.Equal(t, buf[10:20], b)
		require.NoError(t, m.UnmapSingle(a, 10, ToDevice))
		require.NoError(t, rg.Deregister(context.Background(), r))
		assert.Zero(t, m.LiveCount())
	})
}

// TestRegisterAllocs: the registered path allocates nothing.
func TestRegisterAllocs(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		buf := make([]byte, 2*PageSize)
		r, err := rg.Register(buf, ToDevice)
		require.NoError(t, err)
		sub := buf[100:400]
		n := testing.AllocsPerRun(100, func() {
			got := rg.Registered(sub)
			a, _ := got.AddrOf(sub)
			if !got.Acquire() {
				t.Fatal("Acquire refused")
			}
			if _, err := m.Translate(a, len(sub), ToDevice); err != nil {
				t.Fatal(err)
			}
			got.Release()
		})
		assert.Zero(t, n)
		require.NoError(t, rg.Deregister(context.Background(), r))
	})
}

// TestDeregisterWaitsRace: Deregister waits for the uses in flight, refuses new ones meanwhile,
// and gives up on its context, leaving the registration usable.
func TestDeregisterWaitsRace(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		buf := make([]byte, 512)
		r, err := rg.Register(buf, ToDevice)
		require.NoError(t, err)
		require.True(t, r.Acquire())
		require.True(t, r.Acquire())

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		err = rg.Deregister(ctx, r)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, r.Live(), "a cancelled Deregister changes nothing")
		require.True(t, r.Acquire())
		r.Release()

		done := make(chan error, 1)
		go func() { done <- deregisterGuarded(rg, r) }()
		awaitNotLive(t, r, done)
		assert.False(t, r.Acquire(), "no new use once Deregister began")
		assert.Nil(t, rg.Registered(buf), "nor through Registered")
		b, err := m.Translate(r.Addr(), 8, ToDevice)
		require.NoError(t, err, "the uses in flight still translate")
		assert.Equal(t, sliceAddr(buf), sliceAddr(b))
		r.Release()
		select {
		case err := <-done:
			t.Fatalf("Deregister returned %v with a use in flight", err)
		case <-time.After(5 * time.Millisecond):
		}
		r.Release()
		require.NoError(t, <-done)
		_, err = m.Translate(r.Addr(), 8, ToDevice)
		assert.ErrorIs(t, err, ErrFault)
	})
}

// TestRegisterTranslateConcurrent: users Acquire a registration, translate and read it, and
// Release, while it is deregistered and a new one registered; the bytes each user reads are
// always its registration's (the owner poisons a buffer only after Deregister returned), and each
// use is either refused by Acquire or completes whole.
func TestRegisterTranslateConcurrent(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		const bufs = 4
		iters := 400
		if testing.Short() {
			iters = 80
		}
		var cur atomic.Pointer[Registration]
		mem := make([][]byte, bufs)
		for i := range mem {
			mem[i] = make([]byte, 256)
		}
		fill := func(b []byte, v byte) {
			for i := range b {
				b[i] = v
			}
		}
		fill(mem[0], 1)
		r0, err := rg.Register(mem[0], ToDevice)
		require.NoError(t, err)
		cur.Store(r0)
		var stop atomic.Bool
		defer stop.Store(true) // also on a failed require: the users stop
		var uses, refused atomic.Int64
		var round atomic.Int64 // the owner's round (i below)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for !stop.Load() {
					if round.Load()%4 != 3 {
						// Let the owner run: at -cpu 1 users that never yield hold the P for
						// the scheduler's 10 ms slice each per round, most of the test's time.
						// One round in four they do not, so that the preemption lands inside
						// a use, with the owner's Deregister in between.
						runtime.Gosched()
					}
					r := cur.Load()
					if !r.Acquire() {
						refused.Add(1)
						continue
					}
					b, err := m.Translate(r.Addr()+16, 64, ToDevice)
					if !assert.NoError(t, err, "a use in flight translates") {
						r.Release()
						return
					}
					v := b[0]
					for _, x := range b {
						if x != v || x == 0xff {
							assert.Failf(t, "freed memory", "read %#x in a registration filled with %#x", x, v)
							break
						}
					}
					r.Release()
					uses.Add(1)
				}
			})
		}
		for i := 1; i <= iters; i++ {
			round.Store(int64(i))
			for uses.Load() < int64(i) && !t.Failed() { // let the users in on every registration
				runtime.Gosched()
			}
			old := cur.Load()
			nb := mem[i%bufs]
			fill(nb, byte(i%200+1))
			r, err := rg.Register(nb, ToDevice)
			require.NoError(t, err)
			cur.Store(r)
			require.NoError(t, deregisterGuarded(rg, old))
			fill(old.Bytes(), 0xff) // "freed": no use may still read it
		}
		stop.Store(true)
		wg.Wait()
		assert.Positive(t, uses.Load())
		require.NoError(t, deregisterGuarded(rg, cur.Load()))
		assert.Zero(t, m.LiveCount())
	})
}

// TestUnmapTranslateRace: on the IOMMU, translations of addresses that are being unmapped either
// fault or return the very buffer that address was mapped for: a stale bus address never reaches
// other memory.
func TestUnmapTranslateRace(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	const slots = 8
	iters := 3000
	if testing.Short() {
		iters = 500
	}
	bufs := make([][]byte, slots)
	for i := range bufs {
		bufs[i] = make([]byte, 100)
	}
	type pub struct {
		addr Addr
		slot int
	}
	var last [slots]atomic.Pointer[pub]
	var stop atomic.Bool
	var hits, faults atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := 0; !stop.Load(); k++ {
			p := last[k%slots].Load()
			if p == nil {
				continue
			}
			b, err := m.Translate(p.addr, 100, ToDevice)
			switch {
			case err == nil:
				hits.Add(1)
				assert.Equal(t, sliceAddr(bufs[p.slot]), sliceAddr(b), "address %#x reached other memory", uint64(p.addr))
			case errors.Is(err, ErrFault):
				faults.Add(1)
			default:
				assert.NoError(t, err)
			}
		}
	})
	for i := range iters {
		s := i % slots
		a, err := m.MapSingle(bufs[s], ToDevice)
		require.NoError(t, err)
		last[s].Store(&pub{addr: a, slot: s})
		require.NoError(t, m.UnmapSingle(a, 100, ToDevice))
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, m.LiveCount())
	t.Logf("%d translations succeeded, %d faulted", hits.Load(), faults.Load())
}
