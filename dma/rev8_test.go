package dma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnmapBatchRegisteredKind: a batch entry naming a registration (Kind KindRegistered, or a
// coherent allocation with KindCoherent) is not one of the kinds an Unmap names (KindSingle,
// KindPage, KindSG): it is ErrNotMapped and leaves the registration's IOVA range taken, so that
// no later map is handed the registration's bus addresses while it is live.
func TestUnmapBatchRegisteredKind(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{IOVABits: 20}) // 256 granules: no magazines, exact allocation
	require.NoError(t, err)
	buf := make([]byte, 100)
	r, err := m.Register(buf, ToDevice)
	require.NoError(t, err)
	err = m.UnmapBatch([]Unmap{{Addr: r.Addr(), Size: len(buf), Dir: ToDevice, Kind: KindRegistered}})
	assert.ErrorIs(t, err, ErrNotMapped)
	assert.ErrorIs(t, m.UnmapSingle(r.Addr(), len(buf), ToDevice), ErrNotMapped)
	// Map until the space is full: none may get the registration's granule.
	for {
		a, err := m.MapSingle(make([]byte, 8), ToDevice)
		if err != nil {
			break
		}
		require.NotEqual(t, uint64(r.Addr())>>12, uint64(a)>>12, "a map was handed the live registration's granule")
	}
	require.NoError(t, m.Deregister(context.Background(), r))

	c, err := m.AllocCoherent(64)
	if err == nil {
		assert.ErrorIs(t, m.UnmapBatch([]Unmap{{Addr: c.Addr(), Size: len(c.Bytes()), Dir: Bidirectional, Kind: KindCoherent}}), ErrNotMapped)
	}
}

// TestTranslateEdgesRev8: translations, sole translations and syncs of ranges at the ends of the
// address space (sizes that wrap, addresses near 2^48 and 2^64, stale and forged handles) fault
// or fail, never panic and never return bytes outside a mapping; with and without registrations.
func TestTranslateEdgesRev8(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		st, _ := m.(SoleTranslator)
		sm, _ := m.(SoleMapper)
		buf := make([]byte, 64)
		a, h, err := sm.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		// strict: nothing but buf is mapped, so every other range must fault. With registrations
		// live (their bus ranges may lie right after buf's: an IOMMU of 256-byte granules hands
		// out the next granule), only Translate and TranslateSole agreeing is checked.
		check := func(strict bool) {
			addrs := []Addr{0, 1, a - 1, a, a + 63, a + 64, 1<<48 - 1, 1 << 48, 1<<63 - 1, 1 << 63, ^Addr(0), ^Addr(0) - 63}
			sizes := []int{-1, 0, 1, 2, 64, 65, 1 << 20, int(^uint(0)>>2) + 2, int(^uint(0) >> 1)}
			hs := []Sole{0, h, h + 1, h - 1, h ^ (1 << soleBits), ^Sole(0), 1<<soleBits - 1, 1 << soleBits}
			for _, x := range addrs {
				for _, n := range sizes {
					for _, d := range []Direction{Bidirectional, ToDevice, FromDevice, 3, 255} {
						ok := x >= a && n > 0 && uint64(x-a)+uint64(n) <= 64 && (d == ToDevice)
						b, err := m.Translate(x, n, d)
						if ok {
							require.NoError(t, err, "%#x+%d %v", x, n, d)
							require.Len(t, b, n)
						} else if err == nil && strict {
							t.Fatalf("Translate(%#x, %d, %v) = %d bytes, want a fault", uint64(x), n, d, len(b))
						}
						for _, hh := range hs {
							b2, err2 := st.TranslateSole(x, n, d, hh)
							if (err == nil) != (err2 == nil) || len(b2) != len(b) {
								t.Fatalf("TranslateSole(%#x, %d, %v, %#x) = %d, %v; Translate %d, %v", uint64(x), n, d, uint64(hh), len(b2), err2, len(b), err)
							}
						}
						_ = m.SyncForCPU(x, n, d)
					}
				}
			}
		}
		check(true)
		rg := registrar(t, m)
		rbuf := make([]byte, 128)
		r, err := rg.Register(rbuf, FromDevice)
		require.NoError(t, err)
		check(false)
		r2, err := rg.Register(make([]byte, 4096), Bidirectional)
		require.NoError(t, err)
		check(false)
		require.NoError(t, rg.Deregister(context.Background(), r))
		require.NoError(t, rg.Deregister(context.Background(), r2))
		require.NoError(t, sm.UnmapSingleSole(a, 64, ToDevice, h))
		_, err = m.Translate(a, 1, ToDevice)
		require.Error(t, err)
	})
}

// TestRegisterChurnRev8: while registrations come and go, users that Find and Acquire a
// registration translate its memory successfully until they Release it, and maps made meanwhile
// (IOMMU: fresh IOVA ranges) always translate to their own buffer, never to a registration's.
func TestRegisterChurnRev8(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		var reg interface{ Registry() *Registry }
		var ok bool
		if reg, ok = m.(interface{ Registry() *Registry }); !ok {
			t.Skip("no Registry")
		}
		ry := reg.Registry()
		mem := make([]byte, 3*4096)
		stop := make(chan struct{})
		errs := make(chan string, 8)
		done := make(chan struct{})
		nw := 3
		for w := 0; w < nw; w++ {
			go func(w int) {
				defer func() { done <- struct{}{} }()
				sm, _ := m.(SoleMapper)
				buf := make([]byte, 100+w)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					sub := mem[w*4096+i%1000 : w*4096+i%1000+64]
					if x, a := ry.Find(sub); x != nil && x.Acquire() {
						b, err := m.Translate(a, len(sub), ToDevice)
						if err != nil || sliceAddr(b) != sliceAddr(sub) {
							select {
							case errs <- "acquired registration did not translate":
							default:
							}
						}
						x.Release()
					}
					a, h, err := sm.MapSingleSole(buf, ToDevice)
					if err != nil {
						continue
					}
					b, err := m.Translate(a, len(buf), ToDevice)
					if err != nil || sliceAddr(b) != sliceAddr(buf) {
						select {
						case errs <- "a mapping translated to other bytes":
						default:
						}
					}
					_ = sm.UnmapSingleSole(a, len(buf), ToDevice, h)
				}
			}(w)
		}
		n := 300
		if testing.Short() {
			n = 100
		}
		for i := 0; i < n; i++ {
			var rs []*Registration
			for k := 0; k < 1+i%3; k++ {
				r, err := rg.Register(mem[k*4096:(k+1)*4096], Direction(i%2))
				require.NoError(t, err)
				rs = append(rs, r)
			}
			for _, r := range rs {
				require.NoError(t, rg.Deregister(context.Background(), r))
				a := r.Addr()
				if _, err := m.Translate(a, 1, ToDevice); err == nil && sliceAddr(mustTranslate(m, a)) == sliceAddr(r.Bytes()) {
					t.Errorf("registration translated after Deregister")
				}
			}
		}
		close(stop)
		for w := 0; w < nw; w++ {
			<-done
		}
		select {
		case e := <-errs:
			t.Fatal(e)
		default:
		}
		assert.Equal(t, 0, m.LiveCount())
	})
}

func mustTranslate(m Mapper, a Addr) []byte {
	b, _ := m.Translate(a, 1, ToDevice)
	return b
}

// TestRegistrationBoundsRev8: Find, Registered and AddrOf accept exactly the sub-slices of a
// registration (first byte, last byte, the whole) and refuse one byte past either end, with one
// registration and with several (the search).
func TestRegistrationBoundsRev8(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rg := registrar(t, m)
		ry := m.(interface{ Registry() *Registry }).Registry()
		back := make([]byte, 3*1024)
		mem := back[1024:2048]
		r, err := rg.Register(mem, ToDevice)
		require.NoError(t, err)
		for round := 0; round < 2; round++ {
			type c struct {
				b  []byte
				ok bool
			}
			cases := []c{
				{mem, true}, {mem[:1], true}, {mem[1023:], true}, {mem[1023:1024], true},
				{back[1023:1025], false}, {back[2047:2049], false}, {back[1024:2049], false},
				{back[1023:2048], false}, {back[2048:2049], false}, {back[1023:1024], false},
				{mem[:0], false}, {mem[1024:], false},
			}
			for i, k := range cases {
				x, a := ry.Find(k.b)
				a2, ok2 := r.AddrOf(k.b)
				if k.ok {
					require.Same(t, r, x, "case %d", i)
					require.True(t, ok2, "case %d", i)
					require.Equal(t, a, a2, "case %d", i)
					require.Equal(t, r.Addr()+Addr(sliceAddr(k.b)-sliceAddr(mem)), a)
					require.Same(t, r, rg.Registered(k.b))
				} else {
					require.Nil(t, x, "case %d", i)
					require.False(t, ok2, "case %d", i)
					require.Nil(t, rg.Registered(k.b), "case %d", i)
				}
			}
			if round > 0 {
				continue // the second registration may lie right after r in bus addresses
			}
			// Translate at the bus ends.
			_, err := m.Translate(r.Addr()+1023, 1, ToDevice)
			require.NoError(t, err)
			_, err = m.Translate(r.Addr()+1023, 2, ToDevice)
			require.Error(t, err)
			_, err = m.Translate(r.Addr()-1, 1, ToDevice)
			require.Error(t, err)
			_, err = m.Translate(r.Addr()+1024, 1, ToDevice)
			require.Error(t, err)
			// A second registration: the search instead of the one's arithmetic.
			_, err = rg.Register(make([]byte, 64), ToDevice)
			require.NoError(t, err)
		}
	})
}

// TestUnmapBatchCoherentKind: a batch entry of Kind KindCoherent does not unmap coherent memory
// behind FreeCoherent: ErrNotMapped, the memory stays mapped, and FreeCoherent still frees it.
func TestUnmapBatchCoherentKind(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		c, err := m.AllocCoherent(64)
		require.NoError(t, err)
		err = m.(BatchUnmapper).UnmapBatch([]Unmap{{Addr: c.Addr(), Size: 64, Dir: Bidirectional, Kind: KindCoherent}})
		assert.ErrorIs(t, err, ErrNotMapped)
		_, err = m.Translate(c.Addr(), 64, FromDevice)
		assert.NoError(t, err, "coherent memory is mapped until FreeCoherent")
		assert.NoError(t, m.FreeCoherent(c))
		assert.Equal(t, 0, m.LiveCount())
	})
}
