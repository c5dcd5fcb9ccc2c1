package dma

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexVariants runs f on each mapper (impls) with the table's index as it is, shrunk to one set
// per stripe (entries are reused for other buffers all the time, and sets overflow into the page
// lists), and switched off (the page lists alone).
func indexVariants(t *testing.T, f func(t *testing.T, m testMapper)) {
	variants := []struct {
		name string
		set  func(*table)
	}{
		{"index=full", func(*table) {}},
		{"index=tiny", func(tab *table) { tab.useSets(0) }},
		{"index=off", func(tab *table) { tab.spillOnly = true }},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			impls(t, func(t *testing.T, m testMapper) {
				v.set(tableOf(t, m))
				f(t, m)
			})
		})
	}
}

// tableOf returns the mapping table of a Direct or IOMMU.
func tableOf(t testing.TB, m testMapper) *table {
	switch m := m.(type) {
	case *Direct:
		return &m.tab
	case *IOMMU:
		return &m.tab
	}
	t.Fatalf("unknown mapper %T", m)
	return nil
}

// raceSlot is one slot of TestTranslateRemapRace: a mapper goroutine maps its buffers into it in
// turn (generation g maps buffer g%raceBufs of the slot), publishes each mapping, and unmaps it.
type raceSlot struct {
	started    atomic.Int64 // generation whose MapSingle has begun (stored before the call)
	pub        atomic.Pointer[racePub]
	unmapStart atomic.Int64 // generation whose UnmapSingle has begun (stored before the call)
	unmapped   atomic.Int64 // generation whose UnmapSingle has returned
	bufs       [raceBufs][]byte
}

// racePub is a published mapping: its bus address, length, fill byte and generation.
type racePub struct {
	addr Addr
	size int
	fill byte
	gen  int64
	cpu  uintptr
	h    Sole // the sole mapping's handle (0 if none), for TranslateSole's readers
}

const raceBufs = 3

// TestTranslateRemapRace: goroutines map, unmap and map again buffers of distinct contents (each
// filled with its own byte, each of its own length) while other goroutines translate the
// published bus addresses in a loop. Every successful Translate returns exactly the bytes of the
// mapping it asked for (its fill byte, its length, on Direct its own memory): never the bytes of
// an entry that was recycled for another mapping while it read. A Translate of a mapping that
// stayed live for the whole call succeeds; one that started after the mapping's unmap returned
// fails (unless, on Direct, the same buffer was mapped again at the same address meanwhile); and
// a mapper's own Translate right after its unmap fails.
func TestTranslateRemapRace(t *testing.T) {
	indexVariants(t, func(t *testing.T, m testMapper) { remapRace(t, m, false) })
}

// TestTranslateRemapRaceSole is TestTranslateRemapRace with the mappings made by MapSingleSole and
// undone by UnmapSingleSole (an unmap with a plain store), half the reads made with TranslateSole
// and the mapping's handle, as the hardware model makes them: the same promises hold, and while a
// sole mapping in the index is live the public UnmapSingle cannot undo it.
func TestTranslateRemapRaceSole(t *testing.T) {
	indexVariants(t, func(t *testing.T, m testMapper) { remapRace(t, m, true) })
}

// mapTest maps buf for the device with MapSingle, or if sole with MapSingleSole (h its handle).
func mapTest(m testMapper, buf []byte, sole bool) (Addr, Sole, error) {
	if sole {
		return m.(SoleMapper).MapSingleSole(buf, ToDevice)
	}
	a, err := m.MapSingle(buf, ToDevice)
	return a, 0, err
}

// unmapTest undoes mapTest.
func unmapTest(m testMapper, a Addr, n int, h Sole, sole bool) error {
	if sole {
		return m.(SoleMapper).UnmapSingleSole(a, n, ToDevice, h)
	}
	return m.UnmapSingle(a, n, ToDevice)
}

func remapRace(t *testing.T, m testMapper, sole bool) {
	{
		const mappers, perMapper, readers = 2, 4, 2
		iters := 20000
		if testing.Short() {
			iters = 2000
		}
		iters = shortRounds(m, iters)
		_, direct := m.(*Direct)
		// Buffers of a few pages of one backing array: many share a page (and a stripe); the
		// last slot of each mapper maps buffers of several pages (index entries found at their
		// first page, and by readers of their later pages through scanBack).
		backing := make([]byte, 20*PageSize)
		slots := make([]raceSlot, mappers*perMapper)
		off := 0
		for i := range slots {
			for k := range raceBufs {
				id := i*raceBufs + k
				n := 24 + 8*id
				if i%perMapper == perMapper-1 {
					n = 2*PageSize + 1000*k + 8*id
				}
				b := backing[off : off+n : off+n]
				off += n + 8
				for j := range b {
					b[j] = byte(id + 1)
				}
				slots[i].bufs[k] = b
			}
		}
		require.LessOrEqual(t, off, len(backing))

		var (
			stop            atomic.Bool
			hits, misses    atomic.Int64
			readersWG, mapW sync.WaitGroup
		)
		for r := range readers {
			readersWG.Go(func() {
				for k := r; !stop.Load(); k++ {
					s := &slots[k%len(slots)]
					p := s.pub.Load()
					if p == nil {
						continue
					}
					o := 0 // sometimes read from inside the mapping, possibly a later page
					if k%3 == 1 {
						o = p.size / 2
					}
					before := s.unmapped.Load()
					var b []byte
					var err error
					if sole && k%2 == 0 { // the hardware model's translation, with the handle
						b, err = m.(SoleTranslator).TranslateSole(p.addr+Addr(o), p.size-o, ToDevice, p.h)
					} else {
						b, err = m.Translate(p.addr+Addr(o), p.size-o, ToDevice)
					}
					after := s.unmapStart.Load()
					if err != nil {
						misses.Add(1)
						if !assert.ErrorIs(t, err, ErrFault) {
							return
						}
						if !assert.GreaterOrEqual(t, after, p.gen, "gen %d faulted while live for the whole call: %v", p.gen, err) {
							return
						}
						continue
					}
					hits.Add(1)
					if !checkRaceBytes(t, b, p, o, direct) {
						return
					}
					if before >= p.gen { // unmapped before the call began
						if !direct || s.started.Load() < p.gen+raceBufs {
							assert.Failf(t, "translated after unmap", "gen %d at %#x read after its unmap returned", p.gen, uint64(p.addr))
							return
						}
					}
				}
			})
		}
		for w := range mappers {
			mapW.Go(func() {
				for it := range iters {
					s := &slots[w*perMapper+it%perMapper]
					gen := s.started.Load() + 1
					buf := s.bufs[gen%raceBufs]
					s.started.Store(gen)
					a, h, err := mapTest(m, buf, sole)
					if !assert.NoError(t, err) {
						return
					}
					s.pub.Store(&racePub{addr: a, size: len(buf), fill: buf[0], gen: gen, cpu: sliceAddr(buf), h: h})
					if h != 0 && it%5 == 0 && !assert.ErrorIs(t, m.UnmapSingle(a, len(buf), Bidirectional), ErrNotMapped,
						"gen %d: a public unmap in another direction undid a sole mapping", gen) {
						return
					}
					if it%7 == 0 { // sometimes read it ourselves while others do
						b, err := m.Translate(a, len(buf), ToDevice)
						if !assert.NoError(t, err) || !checkRaceBytes(t, b, s.pub.Load(), 0, direct) {
							return
						}
					}
					s.unmapStart.Store(gen)
					if !assert.NoError(t, unmapTest(m, a, len(buf), h, sole)) {
						return
					}
					s.unmapped.Store(gen)
					if sole && h != 0 && !assert.ErrorIs(t, unmapTest(m, a, len(buf), h, sole), ErrNotMapped, "gen %d: a second sole unmap", gen) {
						return
					}
					_, err = m.Translate(a, len(buf), ToDevice)
					if !assert.ErrorIs(t, err, ErrFault, "gen %d translated after its unmap returned", gen) {
						return
					}
				}
			})
		}
		mapW.Wait()
		stop.Store(true)
		readersWG.Wait()
		require.Zero(t, m.LiveCount())
		require.Empty(t, m.Live())
		requireTableEmpty(t, m)
		t.Logf("%d translations succeeded, %d faulted", hits.Load(), misses.Load())
	}
}

// checkRaceBytes checks that b is exactly the bytes of the published mapping p from offset o on.
func checkRaceBytes(t *testing.T, b []byte, p *racePub, o int, direct bool) bool {
	t.Helper()
	if !assert.Len(t, b, p.size-o, "gen %d", p.gen) || !assert.Equal(t, p.size-o, cap(b), "gen %d: capacity beyond the mapping", p.gen) {
		return false
	}
	if direct && !assert.Equal(t, p.cpu+uintptr(o), sliceAddr(b), "gen %d: other memory", p.gen) {
		return false
	}
	for i, x := range b {
		if x != p.fill {
			assert.Failf(t, "bytes of another mapping", "gen %d at %#x: byte %d is %d, want %d", p.gen, uint64(p.addr), i, x, p.fill)
			return false
		}
	}
	return true
}

// TestTranslateTornRead is the deterministic form of TestTranslateRemapRace: in the window
// between a translation's loads of an entry's words (testMidRead), the mapping is unmapped and
// the entry filled again for another buffer of the same length. The translation must notice (the
// stripe's sequence moved) and answer from a consistent state: here "not mapped" (the mapping it
// asked for is gone), never the other buffer's bytes under the old address.
func TestTranslateTornRead(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		tab := tableOf(t, m)
		tab.useSets(0) // one set per stripe: the second buffer takes the first one's entry
		backing := make([]byte, PageSize)
		old, other := backing[64:128:128], backing[256:320:320]
		for i := range old {
			old[i], other[i] = 1, 2
		}
		a, err := m.MapSingle(old, ToDevice)
		require.NoError(t, err)
		var otherAddr Addr
		fired := false
		tab.testMidRead = func() {
			if fired {
				return
			}
			fired = true
			assert.NoError(t, m.UnmapSingle(a, len(old), ToDevice))
			otherAddr, err = m.MapSingle(other, ToDevice)
			assert.NoError(t, err)
		}
		b, err := m.Translate(a, len(old), ToDevice)
		require.True(t, fired)
		requireFault(t, err, a, ReasonNotMapped)
		require.Nil(t, b)
		tab.testMidRead = nil
		b, err = m.Translate(otherAddr, len(other), ToDevice)
		require.NoError(t, err)
		require.Equal(t, other, b)
		require.NoError(t, m.UnmapSingle(otherAddr, len(other), ToDevice))
		requireTableEmpty(t, m)
	})
}

// TestPacketMappingsAllocs: one packet's mappings on the kvaddr path (a header and a payload in
// one page: 2×MapSingle, 2×Translate, one UnmapBatch of 2) allocate nothing once warm, on every
// mapper, also under -race: a mapping of one page (one granule) takes no sync.Pool (which drops
// items at random under the race detector) on the way. On the 256-byte-granule IOMMU the payload
// spans two granules, whose record does come from the pool: rare drops average out below one.
func TestPacketMappingsAllocs(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		page := make([]byte, PageSize) // a page-sized object starts on a page: neither piece straddles one
		hdr, payload := page[:40:40], page[40:296:296]
		bu := m.(BatchUnmapper)
		us := make([]Unmap, 2)
		packet := func() {
			ha, err := m.MapSingle(hdr, ToDevice)
			if err != nil {
				panic(err)
			}
			pa, err := m.MapSingle(payload, ToDevice)
			if err != nil {
				panic(err)
			}
			if _, err := m.Translate(ha, len(hdr), ToDevice); err != nil {
				panic(err)
			}
			if _, err := m.Translate(pa, len(payload), ToDevice); err != nil {
				panic(err)
			}
			us[0] = Unmap{Addr: ha, Size: len(hdr), Dir: ToDevice, Kind: KindSingle}
			us[1] = Unmap{Addr: pa, Size: len(payload), Dir: ToDevice, Kind: KindSingle}
			if err := bu.UnmapBatch(us); err != nil {
				panic(err)
			}
		}
		packet()
		require.Zero(t, testing.AllocsPerRun(1000, packet))
		require.Zero(t, m.LiveCount())
	})
}

// TestMultiPageIndexed: a kvaddr buffer of several pages (a 16380-byte payload at an unaligned
// start) is one index entry, not page-list records (no stripe's pairs count moves), on every
// mapper whose granule it fits: it translates from its first byte and from inside each of its
// later pages, refuses a range past its end (partly mapped) and the wrong direction, and faults
// everywhere once unmapped. Mapping the same buffer twice (Direct: two mappings at the same
// address) gives two entries that unmap one at a time. One map, translate and unmap allocates
// nothing once warm.
func TestMultiPageIndexed(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		tab := tableOf(t, m)
		backing := make([]byte, 6*PageSize)
		buf := backing[100 : 100+16380 : 100+16380]
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		spans := uint64(1)
		if im, ok := m.(*IOMMU); ok {
			spans = (uint64(sliceAddr(buf))&(1<<im.shift-1)+uint64(len(buf))-1)>>im.shift + 1
		} else {
			spans = uint64(sliceAddr(buf)+uintptr(len(buf))-1)>>directShift - uint64(sliceAddr(buf))>>directShift + 1
		}
		indexed := spans <= spanMax
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		pairs := func() (n int64) {
			for i := range tab.stripes {
				n += tab.stripes[i].pairs.Load()
			}
			return n
		}
		if indexed {
			require.Zero(t, pairs(), "a mapping of %d granules is in the index", spans)
		}
		for _, o := range []int{0, 1, 4000, PageSize, 2*PageSize + 5, len(buf) - 1} {
			b, err := m.Translate(a+Addr(o), len(buf)-o, ToDevice)
			require.NoError(t, err, "offset %d", o)
			require.Equal(t, sliceAddr(buf)+uintptr(o), sliceAddr(b))
			require.Equal(t, len(buf)-o, cap(b))
			_, err = m.Translate(a+Addr(o), len(buf)-o+1, ToDevice)
			requireFault(t, err, a+Addr(o), ReasonPartlyMapped)
			_, err = m.Translate(a+Addr(o), 1, FromDevice)
			requireFault(t, err, a+Addr(o), ReasonDirection)
		}
		a2, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.Equal(t, 2, m.LiveCount())
		require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
		b, err := m.Translate(a2+3*PageSize, 10, ToDevice)
		require.NoError(t, err, "the second mapping outlives the first")
		require.Equal(t, buf[3*PageSize:3*PageSize+10], b)
		require.NoError(t, m.UnmapSingle(a2, len(buf), ToDevice))
		if _, ok := m.(*IOMMU); ok { // Direct's address is the buffer's again: nothing to fault on
			for _, o := range []int{0, PageSize, len(buf) - 1} {
				_, err = m.Translate(a+Addr(o), 1, ToDevice)
				requireFault(t, err, a+Addr(o), ReasonNotMapped)
			}
		} else {
			_, err = m.Translate(a+PageSize, 1, ToDevice)
			requireFault(t, err, a+PageSize, ReasonNotMapped)
		}
		requireTableEmpty(t, m)
		if raceEnabled && !indexed {
			return // records of several pages come from a sync.Pool, which drops items under -race
		}
		n := testing.AllocsPerRun(200, func() {
			a, err := m.MapSingle(buf, ToDevice)
			if err != nil {
				panic(err)
			}
			if _, err := m.Translate(a, len(buf), ToDevice); err != nil {
				panic(err)
			}
			if err := m.UnmapSingle(a, len(buf), ToDevice); err != nil {
				panic(err)
			}
		})
		require.Zero(t, n)
	})
}
