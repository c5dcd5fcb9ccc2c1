package fuzz

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// Add kinds decoded from the fuzzer's op bytes.
const (
	kindKV    = iota // AddKVAddr of heap memory
	kindPage         // AddPage
	kindDAddr        // AddDAddr of a caller-mapped coherent buffer
	kindBytes        // AddBytes (the splitting add) of page-backed memory
	kindPages        // AddPages (the splitting add) of a region
	numKinds
)

const (
	regionPages = 7
	regionSize  = regionPages * dma.PageSize
	heapSize    = 20000
	cohSize     = 17000
)

// env is the memory and mappers one fuzz input runs against.
type env struct {
	iommu  *dma.IOMMU
	fi     *dma.FaultInjector
	cnt    *dma.Counting // wraps fi; the device's mapper
	dev    *sdma.Device
	dev2   *sdma.Device // a second device on the same mapper (addDev2), or nil
	region *dma.Region
	heap   []byte
	coh    *dma.Coherent
	base   int // live mappings that are not the txreq's: the pad and coh
}

func newEnv(t *testing.T) *env {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	fi := dma.NewFaultInjector(m)
	cnt := dma.NewCounting(fi)
	dev, err := sdma.NewDevice(sdma.Config{Mapper: cnt})
	require.NoError(t, err)
	// Closed last (cleanups run in reverse): an input's device would otherwise outlive it, an
	// engine goroutine and a ring per input, for the life of the fuzz worker.
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	r, err := dma.AllocPages(regionPages)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	coh, err := m.AllocCoherent(cohSize)
	require.NoError(t, err)
	e := &env{iommu: m, fi: fi, cnt: cnt, dev: dev, region: r, heap: make([]byte, heapSize), coh: coh}
	fill(r.Bytes(), 0x11)
	fill(e.heap, 0x55)
	fill(coh.Bytes(), 0x99)
	e.base = m.LiveCount()
	return e
}

// addDev2 gives e a second device on the same mapper: a txreq's adds must all name one device.
func (e *env) addDev2(t *testing.T) {
	t.Helper()
	dev, err := sdma.NewDevice(sdma.Config{Mapper: e.cnt})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	e.dev2 = dev
	e.base = e.iommu.LiveCount() // its pad
}

// balanced checks the IOMMU leak report and that every map call that succeeded was undone exactly
// once, with no failed call besides the injected ones (an unmap of something not mapped, or a
// double unmap, would fail).
func (e *env) balanced(t *testing.T) {
	t.Helper()
	if n := e.iommu.LiveCount(); n != e.base {
		t.Fatalf("%d mappings live, want %d: leaked: %v", n, e.base, e.iommu.Live())
	}
	c := e.cnt.Counts()
	require.Equal(t, int(e.fi.Injected()), c.Errors, "mapper calls failed besides the injected ones: %+v", c)
	require.Equal(t, c.MapSingle+c.MapPage-int(e.fi.Injected()), c.UnmapSingle+c.UnmapPage, "maps not undone exactly once: %+v", c)
}

// dirty builds, coalesces and cleans a full-size packet of non-zero heap bytes on tx, so that the
// next packet reuses an extended array and a coalesce buffer full of stale bytes.
func (e *env) dirty(t *testing.T, tx *sdma.TxReq) {
	t.Helper()
	require.NoError(t, tx.Init(0, desc.MaxPktSize, nil))
	for i := range desc.MaxDesc - 1 {
		require.NoError(t, tx.AddKVAddr(e.dev, e.heap[i:i+1]))
	}
	require.NoError(t, tx.AddKVAddr(e.dev, e.heap[desc.MaxDesc-1:desc.MaxPktSize]))
	require.Equal(t, desc.MaxDesc, tx.NumDesc())
	require.NoError(t, tx.Clean())
	e.balanced(t)
}

// ahgPrefix is the model of the AHG header and edit descriptors, written from the kernel's
// _sdma_txreq_ahgadd (sdma.c, which sdma_txinit_ahg calls) and the qw1 fields of sdma.h
// (SDMA_DESC1_HEADER_MODE, _INDEX, _DWS, _UPDATE1): desc0 is a zero-length FIRST descriptor
// holding the entry, the header dwords, the mode and word 0; words 1..4 and 5..8 fill one or two
// edit descriptors as qw0 low, qw0 high, qw1 low, qw1 high.
func ahgPrefix(entry, hlen int, words []uint32) []desc.Desc {
	mode, edits := desc.AHGApplyUpdate1, 0
	switch {
	case len(words) > 5:
		mode, edits = desc.AHGApplyUpdate3, 2
	case len(words) > 1:
		mode, edits = desc.AHGApplyUpdate2, 1
	}
	w := make([]uint64, 9)
	for i, x := range words {
		w[i] = uint64(x)
	}
	ds := []desc.Desc{{
		Qw0: desc.FirstFlag,
		Qw1: w[0]<<32 | uint64(mode)<<13 | uint64(entry)<<8 | uint64(hlen/4)<<4,
	}}
	for k := 1; k <= edits; k++ {
		ds = append(ds, desc.Desc{Qw0: w[4*k-3] | w[4*k-2]<<32, Qw1: w[4*k-1] | w[4*k]<<32})
	}
	return ds
}

func fill(b []byte, seed byte) {
	x := uint32(seed) | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// mdesc is one descriptor of the model: its mapping type and length.
type mdesc struct {
	typ   desc.MapType // desc.MapNone, MapSingle, MapPage
	n     int          // byte count
	split bool         // a page piece of a splitting add or AddPage: must not cross a page boundary
}

// model is the plain model of a txreq under construction, after the kernel's sdma.h.
type model struct {
	state     int // 0 uninitialised, 1 building, 2 cleaned (failed)
	tlen      int
	remaining int
	flags     sdma.Flags
	prefix    int         // AHG header + edit descriptors
	ahg       []desc.Desc // their expected contents (ahgPrefix)
	ahgCopy   int         // the AHG entry desc0 names with FlagAHGCopy, or -1
	dev       int         // the device the adds use: 0 none yet, 1 env.dev, 2 env.dev2
	descs     []mdesc
	coalesce  []byte // bytes copied past 63 descriptors; nil while not coalescing
	data      []byte // bytes added, in order
}

func (m *model) nd() int { return m.prefix + len(m.descs) }

// piece adds one fragment (the kernel's one sdma_txadd_* call). It reports false if the kernel
// refuses it (a daddr fragment while coalescing).
func (m *model) piece(typ desc.MapType, b []byte, split bool) bool {
	if m.coalesce != nil || m.nd() == desc.MaxDesc-1 {
		if typ == desc.MapNone {
			return false
		}
		if m.coalesce == nil {
			m.coalesce = []byte{}
		}
		m.coalesce = append(m.coalesce, b...)
	} else {
		m.descs = append(m.descs, mdesc{typ: typ, n: len(b), split: split})
	}
	m.data = append(m.data, b...)
	m.remaining -= len(b)
	if m.remaining == 0 {
		pad := (4 - m.tlen%4) % 4
		switch {
		case m.coalesce != nil:
			m.descs = append(m.descs, mdesc{typ: desc.MapSingle, n: len(m.coalesce) + pad})
		case pad != 0:
			m.descs = append(m.descs, mdesc{typ: desc.MapNone, n: pad})
		}
	}
	return true
}

func (m *model) fail() {
	m.state = 2
	m.descs = nil
	m.prefix = 0
	m.ahg = nil
	m.coalesce = nil
}

// liveMapped is how many mappings the model's descriptors hold.
func (m *model) liveMapped() int {
	k := 0
	for _, d := range m.descs {
		if d.typ != desc.MapNone {
			k++
		}
	}
	return k
}

// FuzzTxAdd drives random sequences of adds against the model and checks, after every step,
// the descriptors and the live mappings, and on close the packet's bytes as the device reads them.
//
// flagBits: 1 URGENT, 2 USE_AHG, 4 AHG_COPY, 8 VIP, 0x10 reuse a txreq whose extended array and
// coalesce buffer hold a previous packet, 0x20 a second device. ahgRaw: low digit mod 10 the
// update words, high nibble the header length. failRaw: 128..191 fail the (failRaw-127)th map
// call, 192..255 a fraction of them. ops: 3 bytes per add (kind and length mode, then a 16-bit
// value for offset and length); a first byte of 240 or more also names the device: (b-240)%2 0
// nil, 1 the second device (nil without one). A daddr add with the value's two top bits set
// names a bus address running past 48 bits (refused).
func FuzzTxAdd(f *testing.F) {
	f.Add(uint16(10), uint8(0), uint8(0), uint8(0), int64(1), []byte{0, 3, 0, 0, 7, 0})
	f.Fuzz(func(t *testing.T, tlenRaw uint16, flagBits, ahgRaw, failRaw uint8, seed int64, ops []byte) {
		e := newEnv(t)
		var tx sdma.TxReq
		var m model
		if flagBits&0x10 != 0 {
			e.dirty(t, &tx)
		}
		if flagBits&0x20 != 0 {
			e.addDev2(t)
		}

		// Init.
		tlen := int(tlenRaw % (desc.MaxPktSize + 20))
		var flags sdma.Flags
		if flagBits&1 != 0 {
			flags |= sdma.FlagUrgent
		}
		if flagBits&2 != 0 {
			flags |= sdma.FlagUseAHG
		}
		if flagBits&4 != 0 {
			flags |= sdma.FlagAHGCopy
		}
		if flagBits&8 != 0 {
			flags |= sdma.FlagVIP
		}
		useAHG := flags&sdma.FlagUseAHG != 0 && flags&sdma.FlagAHGCopy == 0
		nWords := int(ahgRaw % 10)
		hlen := 8 + 4*int(ahgRaw>>4%14)
		entry := int(seed & 31)
		var words []uint32
		if flags&sdma.FlagUseAHG != 0 {
			for i := range nWords {
				words = append(words, uint32(seed>>i)|desc.AHGUpdateEnableFlag)
			}
		}
		err := tx.InitAHG(flags, tlen, sdma.AHG{Entry: entry, Words: words, HeaderLen: hlen}, nil)
		switch {
		case tlen == 0:
			require.ErrorIs(t, err, sdma.ErrNoData)
			return
		case tlen > desc.MaxPktSize:
			require.ErrorIs(t, err, sdma.ErrMsgSize)
			return
		case useAHG && nWords == 0:
			require.ErrorIs(t, err, sdma.ErrInvalid)
			return
		}
		require.NoError(t, err)
		m = model{state: 1, tlen: tlen, remaining: tlen, flags: flags, ahgCopy: -1}
		switch {
		case useAHG:
			m.ahg = ahgPrefix(entry, hlen, words)
			m.prefix = len(m.ahg)
		case flags&sdma.FlagAHGCopy != 0:
			m.ahgCopy = entry
		}
		check(t, e, &tx, &m)

		// Mapping failures: armed after the device's pad was allocated.
		switch {
		case failRaw >= 192:
			e.fi.FailFraction(float64(failRaw-191)/256, seed)
		case failRaw >= 128:
			e.fi.FailNth(int(failRaw) - 127)
		}

		for len(ops) >= 3 {
			b0, v := ops[0], int(ops[1])|int(ops[2])<<8
			ops = ops[3:]
			kind, mode := int(b0)%numKinds, int(b0)/numKinds%4
			var n int
			switch mode {
			case 0:
				n = m.remaining
			case 1:
				n = 1 + v%8
			case 2:
				n = v % 17000
			case 3:
				n = min(m.remaining, 1+v%5000)
			}
			dev, which := e.dev, 1
			if b0 >= 240 {
				dev, which = nil, 0
				if (b0-240)%2 == 1 && e.dev2 != nil {
					dev, which = e.dev2, 2
				}
			}
			step(t, e, &tx, &m, dev, which, kind, n, v)
			check(t, e, &tx, &m)
		}

		// Clean undoes everything, any number of times.
		for range 2 {
			require.NoError(t, tx.Clean())
			require.Equal(t, 0, tx.NumDesc())
			e.balanced(t)
		}
	})
}

// step runs one add on tx with dev (which: 1 env.dev, 2 env.dev2, 0 nil) and on the model.
func step(t *testing.T, e *env, tx *sdma.TxReq, m *model, dev *sdma.Device, which, kind, n, v int) {
	t.Helper()
	injected := e.fi.Injected()
	var err error
	var off int
	invalid := m.state != 1 || m.remaining == 0 || n <= 0 || n > m.remaining ||
		which == 0 || m.dev != 0 && m.dev != which // every add of a txreq names its one device
	switch kind {
	case kindKV:
		off = v % 64
		err = tx.AddKVAddr(dev, e.heap[off:off+n])
	case kindPage:
		off = int(v) >> 4 % (dma.PageSize + 1)
		if v&1 != 0 {
			off = dma.PageSize - n + v>>1&1 // flush against the page's end, or one byte past it
		}
		pg, perr := e.region.Page(v % regionPages)
		require.NoError(t, perr)
		invalid = invalid || off < 0 || off+n > dma.PageSize
		err = tx.AddPage(dev, pg, off, n)
	case kindDAddr:
		off = v % 64
		addr := e.coh.Addr() + dma.Addr(off)
		if v>>14 == 3 && n > 0 {
			addr = dma.Addr(desc.MaxAddr) + 1 - dma.Addr(min(n-1, off)) // its last byte past 48 bits
			invalid = true
		}
		err = tx.AddDAddr(dev, addr, n)
	case kindBytes:
		off = (v * 37) % (2 * dma.PageSize)
		if v&1 != 0 {
			off = dma.PageSize - v%5 // just before a page boundary
		}
		err = tx.AddBytes(dev, e.region.Bytes()[off:off+n])
	case kindPages:
		off = (v * 41) % regionSize
		invalid = invalid || off+n > regionSize
		err = tx.AddPages(dev, e.region, off, n)
	}

	if invalid {
		require.ErrorIs(t, err, sdma.ErrInvalid, "kind %d n %d off %d device %d (the txreq's %d)", kind, n, off, which, m.dev)
		var te *sdma.TxError
		require.ErrorAs(t, err, &te)
		m.fail()
		return
	}
	m.dev = which
	if errors.Is(err, sdma.ErrMapping) {
		require.Greater(t, e.fi.Injected(), injected, "mapping failure not injected: %v", err)
		m.fail()
		return
	}

	// The model, piece by piece.
	ok := true
	switch kind {
	case kindKV:
		ok = m.piece(desc.MapSingle, e.heap[off:off+n], false)
	case kindPage:
		ok = m.piece(desc.MapPage, e.region.Bytes()[v%regionPages*dma.PageSize+off:][:n], true)
	case kindDAddr:
		ok = m.piece(desc.MapNone, e.coh.Bytes()[off:off+n], false)
	case kindBytes, kindPages:
		typ := desc.MapSingle
		if kind == kindPages {
			typ = desc.MapPage
		}
		for o, end := off, off+n; o < end; {
			k := min(dma.PageSize-o%dma.PageSize, end-o)
			m.piece(typ, e.region.Bytes()[o:o+k], true)
			o += k
		}
	}
	if !ok {
		require.ErrorIs(t, err, sdma.ErrInvalid, "daddr while coalescing")
		m.fail()
		return
	}
	require.NoError(t, err, "kind %d n %d off %d", kind, n, off)
}

// check compares tx with the model and, once closed, checks the packet.
func check(t *testing.T, e *env, tx *sdma.TxReq, m *model) {
	t.Helper()
	if m.state != 1 {
		require.Equal(t, 0, tx.NumDesc())
		e.balanced(t)
		return
	}
	ds := tx.Descs()
	require.Len(t, ds, m.nd())
	require.LessOrEqual(t, len(ds), desc.MaxDesc)
	require.Equal(t, m.remaining, tx.Remaining())
	if n := e.iommu.LiveCount(); n != e.base+m.liveMapped() {
		t.Fatalf("%d mappings live, the model %d: %v", n, e.base+m.liveMapped(), e.iommu.Live())
	}
	closed := m.remaining == 0
	for i, want := range m.ahg {
		require.Equal(t, want, ds[i], "AHG descriptor %d", i) // adds never touch them
	}
	if len(ds) > 0 && m.prefix == 0 {
		d0, entry, mode := ds[0], 0, desc.AHGNoAHG
		if m.ahgCopy >= 0 {
			entry, mode = m.ahgCopy, desc.AHGCopy
		}
		require.Equal(t, mode, d0.HeaderMode(), "desc0 AHG mode")
		require.Equal(t, entry, d0.HeaderIndex(), "desc0 AHG entry")
		require.Zero(t, d0.HeaderDWs())
		require.Zero(t, d0.Update1())
	}
	sum := 0
	var got []byte
	// Plain comparisons in this loop, run for every descriptor after every add: testify's
	// calls cost a stack walk each (t.Helper), which made them most of an input's time.
	for i, md := range m.descs {
		i += m.prefix
		d := ds[i]
		if d.MapType() != md.typ || d.Len() != md.n || d.First() != (i == 0) || d.Last() != (closed && i == len(ds)-1) ||
			!d.Last() && (d.HeadToHost() || d.IntReq()) || d.Len() < 1 || d.Len() > desc.MaxByteCount {
			t.Fatalf("desc %d of %d (closed %v): type %v len %d FIRST %v LAST %v HEAD_TO_HOST %v INT_REQ %v; the model: %+v",
				i, len(ds), closed, d.MapType(), d.Len(), d.First(), d.Last(), d.HeadToHost(), d.IntReq(), md)
		}
		sum += d.Len()
		b, err := e.iommu.Translate(dma.Addr(d.Addr()), d.Len(), dma.ToDevice)
		if err != nil {
			t.Fatalf("desc %d: %v", i, err)
		}
		if a := addrOf(b); md.split && a/dma.PageSize != (a+uintptr(len(b))-1)/dma.PageSize {
			t.Fatalf("desc %d crosses a page", i)
		}
		got = append(got, b...)
	}
	if !closed {
		return
	}

	// Closed: the packet as the device reads it.
	want := append([]byte(nil), m.data...)
	for len(want)%4 != 0 {
		want = append(want, 0)
	}
	require.Equal(t, (m.tlen+3)&^3, sum)
	require.Equal(t, want, got)
	last := ds[len(ds)-1]
	require.True(t, last.HeadToHost())
	require.Equal(t, m.flags&sdma.FlagUrgent != 0, last.IntReq())
}
