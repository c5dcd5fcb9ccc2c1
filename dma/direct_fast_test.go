package dma

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectFastMultiPage: Direct's fast map, translation and sole unmap of buffers of 1 byte to
// keepMax bytes (1..16 pages) at page-crossing offsets agree with the general path: a twin
// mapper whose fast map is switched off (testPublished set: every map is mapBuf's) returns the
// same address and the same handle (entry and generation) for every map, the first (a fill) and
// the second (the entry the buffer left, made live again); Direct.Translate answers as core's
// Translate for the whole range, a range in each page, a range past the end, the wrong direction,
// and after the unmap; refused unmaps (length, direction, address, generation) change nothing,
// and a double unmap is ErrNotMapped. keepMax+1 bytes take the general path and are still one
// index entry.
func TestDirectFastMultiPage(t *testing.T) {
	heap := make([]byte, keepMax+3*PageSize)
	base := int(-sliceAddr(heap) & (PageSize - 1)) // heap[base:] is page-aligned
	sizes := []int{1, 100, PageSize - 1, PageSize, PageSize + 1, 2 * PageSize, 3*PageSize + 17, 4*PageSize - 4, 5 * PageSize, keepMax - 1, keepMax, keepMax + 1}
	offs := []int{0, 1, 100, PageSize/2 + 64, PageSize - 1}
	for _, n := range sizes {
		for _, off := range offs {
			t.Run(fmt.Sprintf("n=%d/off=%d", n, off), func(t *testing.T) {
				buf := heap[base+off : base+off+n]
				copy(buf, pattern(n, byte(off)))
				fast, slow := NewDirect(), NewDirect()
				slow.tab.testPublished = func() {} // mapBuf only
				for round := range 3 {
					a, h, err := fast.MapSingleSole(buf, ToDevice)
					require.NoError(t, err)
					sa, sh, err := slow.MapSingleSole(buf, ToDevice)
					require.NoError(t, err)
					require.Equal(t, Addr(sliceAddr(buf)), a)
					require.Equal(t, sa, a)
					require.Equal(t, sh, h, "round %d: the fast map's entry and generation are the general path's", round)
					require.NotZero(t, h, "indexed")
					requireSameTranslations(t, fast, a, n)

					require.ErrorIs(t, fast.UnmapSingleSole(a, n-1, ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, fast.UnmapSingleSole(a, n+1, ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, fast.UnmapSingleSole(a, n, Bidirectional, h), ErrNotMapped)
					require.ErrorIs(t, fast.UnmapSingleSole(a+1, n, ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, fast.UnmapSingleSole(a, n, ToDevice, h+1<<soleBits), ErrNotMapped)
					require.Equal(t, 1, fast.LiveCount(), "a refused unmap undid the mapping")
					requireSameTranslations(t, fast, a, n)

					require.NoError(t, fast.UnmapSingleSole(a, n, ToDevice, h))
					require.NoError(t, slow.core.UnmapSingleSole(sa, n, ToDevice, sh))
					require.ErrorIs(t, fast.UnmapSingleSole(a, n, ToDevice, h), ErrNotMapped, "a double unmap")
					_, err = fast.Translate(a, n, ToDevice)
					requireFault(t, err, a, ReasonNotMapped)
					requireSameTranslations(t, fast, a, n)
					requireTableEmpty(t, fast)
					requireTableEmpty(t, slow)
					requireEntryInvariants(t, &fast.tab)
				}
			})
		}
	}
}

// requireSameTranslations checks that Direct's Translate and core's answer alike for ranges of
// the mapping [a, a+n) and around it: the whole range, one past it, a range in each page, the
// last byte, bytes before and after, both directions.
func requireSameTranslations(t *testing.T, d *Direct, a Addr, n int) {
	t.Helper()
	type rng struct {
		a Addr
		n int
	}
	rs := []rng{{a, n}, {a, n + 1}, {a - 1, 2}, {a + Addr(n) - 1, 1}, {a + Addr(n) - 1, 2}, {a + Addr(n), 1}}
	for pg := (a &^ (PageSize - 1)) + PageSize; pg < a+Addr(n); pg += PageSize {
		rs = append(rs, rng{pg, min(64, int(a+Addr(n)-pg))}, rng{pg - 1, 2})
	}
	for _, r := range rs {
		for _, dir := range []Direction{ToDevice, FromDevice, Bidirectional} {
			got, err := d.Translate(r.a, r.n, dir)
			want, werr := d.core.Translate(r.a, r.n, dir)
			require.Equal(t, werr == nil, err == nil, "[%#x,+%d) %v: %v vs %v", uint64(r.a), r.n, dir, err, werr)
			if err != nil {
				var f, wf *Fault
				require.True(t, errors.As(err, &f) && errors.As(werr, &wf))
				require.Equal(t, wf.Reason, f.Reason, "[%#x,+%d) %v", uint64(r.a), r.n, dir)
				continue
			}
			require.Len(t, got, r.n)
			require.Same(t, &want[0], &got[0])
		}
	}
}

// TestDirectFastFaults: every fault of a translation of a multi-page sole mapping on Direct's fast
// path, with its reason: never mapped, unmapped since, the wrong direction, a range past the end,
// one that starts before the mapping.
func TestDirectFastFaults(t *testing.T) {
	d := NewDirect()
	heap := make([]byte, 6*PageSize)
	buf := heap[300 : 300+4*PageSize-4]
	a := Addr(sliceAddr(buf))
	_, err := d.Translate(a, len(buf), ToDevice)
	requireFault(t, err, a, ReasonNotMapped)
	for range 2 { // the general path's fill, then the fast map of the entry it left
		a2, h, err := d.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		require.Equal(t, a, a2)
		got, err := d.Translate(a, len(buf), ToDevice)
		require.NoError(t, err)
		require.Same(t, &buf[0], &got[0])
		got, err = d.Translate(a+3*PageSize, 100, ToDevice)
		require.NoError(t, err)
		require.Same(t, &buf[3*PageSize], &got[0])
		_, err = d.Translate(a, len(buf), FromDevice)
		requireFault(t, err, a, ReasonDirection)
		_, err = d.Translate(a, len(buf)+1, ToDevice)
		requireFault(t, err, a, ReasonPartlyMapped)
		_, err = d.Translate(a+PageSize, len(buf), ToDevice)
		requireFault(t, err, a+PageSize, ReasonPartlyMapped)
		_, err = d.Translate(a-1, 10, ToDevice)
		requireFault(t, err, a-1, ReasonNotMapped)
		require.NoError(t, d.UnmapSingleSole(a, len(buf), ToDevice, h))
		_, err = d.Translate(a, len(buf), ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
		_, err = d.Translate(a+2*PageSize, 8, ToDevice)
		requireFault(t, err, a+2*PageSize, ReasonNotMapped)
	}
	requireTableEmpty(t, d)
}

// TestDirectFastRegion: the fast map leaves a buffer with a byte in a Region's span to the general
// path, which pins the region; a multi-page buffer of Region memory is mapped (and pinned) every
// time, its entry dropping the buffer at the unmap, and closing the region while it is mapped
// defers the release. mayOverlapRegion asks about every byte: a range that ends just before the
// regions' span is outside, one that reaches its first byte is not.
func TestDirectFastRegion(t *testing.T) {
	r := newRegion(t, 6)
	snap := regionList.Load()
	require.Equal(t, [2]uintptr{snap.lo, snap.hi}, [2]uintptr{regionSpan.lo.Load(), regionSpan.hi.Load()}, "regionSpan is the snapshot's")
	require.False(t, mayOverlapRegion(snap.lo-PageSize, PageSize))
	require.True(t, mayOverlapRegion(snap.lo-PageSize, PageSize+1), "the range's last byte is the span's first")
	require.False(t, mayBeRegion(snap.lo-PageSize), "the first byte alone is outside")
	require.True(t, mayOverlapRegion(snap.hi-1, 1))
	require.False(t, mayOverlapRegion(snap.hi, 1))

	d := NewDirect()
	buf := r.Bytes()[PageSize-100 : 4*PageSize+100]
	for range 3 {
		a, h, err := d.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		require.NotZero(t, h)
		e := d.tab.entryAt(uint64(h&(1<<soleBits-1)) - 1)
		require.Same(t, r, e.region.Load())
		got, err := d.Translate(a+2*PageSize, 10, ToDevice)
		require.NoError(t, err)
		require.Same(t, &buf[2*PageSize], &got[0])
		require.NoError(t, d.UnmapSingleSole(a, len(buf), ToDevice, h))
		require.Nil(t, e.ptr.Load(), "a Region buffer's entry drops it")
		require.Nil(t, e.region.Load())
		requireEntryInvariants(t, &d.tab)
	}
	a, h, err := d.MapSingleSole(buf, ToDevice)
	require.NoError(t, err)
	require.ErrorIs(t, r.Close(), ErrBusy)
	require.NoError(t, d.UnmapSingleSole(a, len(buf), ToDevice, h))
	require.Nil(t, r.Bytes())
	requireTableEmpty(t, d)
}

// TestDirectFastMultiPageConcurrent: senders map, translate and sole-unmap their own multi-page
// buffers (some sharing pages' sets: neighbours in one array, 1..5 pages long, page-crossing)
// over and over while readers translate every sender's last address: a sender always reads its
// own round's stamp through its mapping, each round exactly once, and a reader gets either the
// whole of that sender's buffer (never another's, never part of it) or a not-mapped fault. Both
// mappers.
func TestDirectFastMultiPageConcurrent(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		const senders = 4
		rounds := 2000
		if testing.Short() {
			rounds = 300
		}
		heap := make([]byte, senders*6*PageSize)
		bufs := make([][]byte, senders)
		for i := range bufs {
			off := i*6*PageSize + 700*i + 1
			bufs[i] = heap[off : off+(i+1)*PageSize-3]
		}
		addrs := make([]struct {
			sync.Mutex
			a Addr
		}, senders)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 2*senders)
		for i := range senders {
			wg.Go(func() {
				buf := bufs[i]
				seen := make([]bool, rounds)
				for r := range rounds {
					buf[0], buf[len(buf)-1] = byte(r), byte(r>>8)
					a, h, err := sm.MapSingleSole(buf, ToDevice)
					if err != nil {
						errs <- err
						return
					}
					addrs[i].Lock()
					addrs[i].a = a
					addrs[i].Unlock()
					b, err := m.Translate(a, len(buf), ToDevice)
					if err != nil || len(b) != len(buf) {
						errs <- fmt.Errorf("sender %d round %d: translate: %v", i, r, err)
						return
					}
					got := int(b[0]) | int(b[len(b)-1])<<8
					if got != r&0xffff || seen[got] {
						errs <- fmt.Errorf("sender %d round %d: read round %d (seen %v)", i, r, got, seen[got])
						return
					}
					seen[got] = true
					if err := sm.UnmapSingleSole(a, len(buf), ToDevice, h); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		var readers sync.WaitGroup
		for j := range senders {
			readers.Go(func() {
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					i := (j + k) % senders
					addrs[i].Lock()
					a := addrs[i].a
					addrs[i].Unlock()
					if a == 0 {
						continue
					}
					n := len(bufs[i])
					b, err := m.Translate(a, n, ToDevice)
					if err != nil {
						var f *Fault
						if !errors.As(err, &f) || f.Reason != ReasonNotMapped {
							errs <- fmt.Errorf("reader: sender %d: %v", i, err)
							return
						}
						continue
					}
					if len(b) != n || &b[0] != &bufs[i][0] {
						errs <- fmt.Errorf("reader: sender %d: %d bytes at %p, want %d at %p", i, len(b), &b[0], n, &bufs[i][0])
						return
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		readers.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		requireTableEmpty(t, m)
	})
}

// TestDirectEntryInvariants: requireEntryInvariants holds on Direct after maps and unmaps of every
// kind of memory and mapping (Go heap and Region buffers of one and several pages, sole and public
// maps, sole and public unmaps, revokes, pages, scatter lists), in every index variant.
func TestDirectEntryInvariants(t *testing.T) {
	indexVariants(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		r := newRegion(t, 8)
		heap := make([]byte, 8*PageSize)
		bufs := [][]byte{heap[10:300], heap[PageSize-5 : 3*PageSize], heap[4*PageSize : 4*PageSize+16380],
			r.Bytes()[10:300], r.Bytes()[PageSize-5 : 3*PageSize], r.Bytes()[4*PageSize : 4*PageSize+16380]}
		for round := range 3 {
			var us []Unmap
			for i, b := range bufs {
				if (i+round)%2 == 0 {
					a, h, err := sm.MapSingleSole(b, ToDevice)
					require.NoError(t, err)
					us = append(us, Unmap{Addr: a, Size: len(b), Dir: ToDevice, Kind: KindSingle, Sole: h})
				} else {
					a, err := m.MapSingle(b, FromDevice)
					require.NoError(t, err)
					us = append(us, Unmap{Addr: a, Size: len(b), Dir: FromDevice, Kind: KindSingle})
				}
			}
			p, err := r.Page(7)
			require.NoError(t, err)
			pa, err := m.MapPage(p, 8, 100, ToDevice)
			require.NoError(t, err)
			sg := []SG{{Buf: heap[7*PageSize : 7*PageSize+50]}, {Buf: r.Bytes()[6*PageSize+1 : 6*PageSize+200]}}
			_, err = m.MapSG(sg, Bidirectional)
			require.NoError(t, err)
			requireEntryInvariants(t, tableOf(t, m))
			for i, u := range us {
				switch {
				case u.Sole != 0 && round == 1 && i < 3: // revoked by a public unmap, then freed
					require.NoError(t, m.UnmapSingle(u.Addr, u.Size, u.Dir))
					require.ErrorIs(t, sm.UnmapSingleSole(u.Addr, u.Size, u.Dir, u.Sole), ErrNotMapped)
				case u.Sole != 0:
					require.NoError(t, sm.UnmapSingleSole(u.Addr, u.Size, u.Dir, u.Sole))
				default:
					require.NoError(t, m.UnmapSingle(u.Addr, u.Size, u.Dir))
				}
				requireEntryInvariants(t, tableOf(t, m))
			}
			require.NoError(t, m.UnmapPage(pa, 100, ToDevice))
			require.NoError(t, m.UnmapSG(sg, Bidirectional))
			requireEntryInvariants(t, tableOf(t, m))
			requireTableEmpty(t, m)
		}
	})
}

// TestMapSingleSoleHint: the hint (an earlier sole handle of the caller) is taken only for the
// free entry that holds this very buffer, size and direction; any other hint (an entry of another
// buffer, of the buffer in another size or direction, a live entry, 0, beyond the index) leaves
// the map to the set's search, and every mapping answers Translate and unmaps as without a hint.
func TestMapSingleSoleHint(t *testing.T) {
	d := NewDirect()
	mem := make([]byte, 3*PageSize)
	a, b := mem[100:400], mem[PageSize+100:PageSize+400] // same size, different buffers
	idx := func(h Sole) uint64 { return uint64(h & (1<<soleBits - 1)) }
	check := func(buf []byte, dir Direction, addr Addr, h Sole) {
		t.Helper()
		require.Equal(t, Addr(sliceAddr(buf)), addr)
		require.NotZero(t, h)
		got, err := d.TranslateSole(addr, len(buf), ToDevice, h)
		require.NoError(t, err)
		require.Same(t, &buf[0], &got[0])
		got, err = d.Translate(addr, len(buf), ToDevice) // the set holds it: no hint needed
		require.NoError(t, err)
		require.Same(t, &buf[0], &got[0])
	}

	addrA, hA, err := d.MapSingleSole(a, ToDevice)
	require.NoError(t, err)
	check(a, ToDevice, addrA, hA)
	// A live entry is not taken: the same buffer mapped twice is two entries.
	addrA2, hA2, err := d.MapSingleSoleHint(a, ToDevice, hA)
	require.NoError(t, err)
	check(a, ToDevice, addrA2, hA2)
	require.NotEqual(t, idx(hA), idx(hA2))
	require.Equal(t, 2, d.LiveCount())
	require.NoError(t, d.UnmapSingleSole(addrA2, len(a), ToDevice, hA2))
	require.NoError(t, d.UnmapSingleSole(addrA, len(a), ToDevice, hA))

	// A's free entry: not for B (another buffer of the same size and direction), nor for A in
	// another direction or size.
	addrB, hB, err := d.MapSingleSoleHint(b, ToDevice, hA)
	require.NoError(t, err)
	check(b, ToDevice, addrB, hB)
	_, err = d.Translate(addrA, len(a), ToDevice)
	requireFault(t, err, addrA, ReasonNotMapped) // A's entry was not made live for B
	require.NoError(t, d.UnmapSingleSole(addrB, len(b), ToDevice, hB))
	addrA3, hA3, err := d.MapSingleSoleHint(a[:len(a)-1], ToDevice, hA)
	require.NoError(t, err)
	check(a[:len(a)-1], ToDevice, addrA3, hA3)
	require.NoError(t, d.UnmapSingleSole(addrA3, len(a)-1, ToDevice, hA3))
	addrA4, hA4, err := d.MapSingleSoleHint(a, Bidirectional, hA)
	require.NoError(t, err)
	got, err := d.TranslateSole(addrA4, len(a), FromDevice, hA4)
	require.NoError(t, err)
	require.Same(t, &a[0], &got[0])
	require.NoError(t, d.UnmapSingleSole(addrA4, len(a), Bidirectional, hA4))

	// A's own hint: its entry again, the next generation; and hints that name nothing.
	for _, hint := range []Sole{hA, 0, 1<<soleBits - 1, hA + 1<<soleBits} {
		addr, h, err := d.MapSingleSoleHint(a, ToDevice, hint)
		require.NoError(t, err)
		check(a, ToDevice, addr, h)
		require.Equal(t, 1, d.LiveCount())
		require.NoError(t, d.UnmapSingleSole(addr, len(a), ToDevice, h))
		require.ErrorIs(t, d.UnmapSingleSole(addr, len(a), ToDevice, h), ErrNotMapped)
	}
	requireTableEmpty(t, d)
	requireEntryInvariants(t, &d.tab)
}
