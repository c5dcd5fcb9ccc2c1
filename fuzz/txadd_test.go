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
	dev    *sdma.Device
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
	dev, err := sdma.NewDevice(sdma.Config{Mapper: fi})
	require.NoError(t, err)
	r, err := dma.AllocPages(regionPages)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	coh, err := m.AllocCoherent(cohSize)
	require.NoError(t, err)
	e := &env{iommu: m, fi: fi, dev: dev, region: r, heap: make([]byte, heapSize), coh: coh}
	fill(r.Bytes(), 0x11)
	fill(e.heap, 0x55)
	fill(coh.Bytes(), 0x99)
	e.base = m.LiveCount()
	return e
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

// mdesc is one descriptor of the model: its mapping type, length and where its bytes come from.
type mdesc struct {
	typ   int
	n     int
	split bool // a page piece of a splitting add or AddPage: must not cross a page boundary
}

// model is the plain model of a txreq under construction, after the kernel's sdma.h.
type model struct {
	state     int // 0 uninitialised, 1 building, 2 cleaned (failed)
	tlen      int
	remaining int
	flags     sdma.Flags
	prefix    int // AHG header + edit descriptors
	descs     []mdesc
	coalesce  []byte // bytes copied past 63 descriptors; nil while not coalescing
	data      []byte // bytes added, in order
}

func (m *model) nd() int { return m.prefix + len(m.descs) }

// piece adds one fragment (the kernel's one sdma_txadd_* call). It reports false if the kernel
// refuses it (a daddr fragment while coalescing).
func (m *model) piece(typ int, b []byte, split bool) bool {
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
func FuzzTxAdd(f *testing.F) {
	f.Add(uint16(10), uint8(0), uint8(0), uint8(0), int64(1), []byte{0, 3, 0, 0, 7, 0})
	f.Fuzz(func(t *testing.T, tlenRaw uint16, flagBits, ahgRaw, failRaw uint8, seed int64, ops []byte) {
		e := newEnv(t)
		var tx sdma.TxReq
		var m model

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
		err := tx.InitAHG(flags, tlen, entry, words, hlen, nil)
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
		m = model{state: 1, tlen: tlen, remaining: tlen, flags: flags}
		if useAHG {
			m.prefix = 1 + desc.EditDescs(tx.Descs()[0].HeaderMode())
			wantMode := desc.AHGApplyUpdate1
			if nWords > 5 {
				wantMode = desc.AHGApplyUpdate3
			} else if nWords > 1 {
				wantMode = desc.AHGApplyUpdate2
			}
			require.Equal(t, wantMode, tx.Descs()[0].HeaderMode())
		}
		check(t, e, &tx, &m)

		// Mapping failures: armed after the device's pad was allocated.
		if failRaw >= 192 {
			e.fi.FailFraction(float64(failRaw-191)/256, seed)
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
			step(t, e, &tx, &m, kind, n, v)
			check(t, e, &tx, &m)
		}

		// Clean undoes everything, any number of times.
		for range 2 {
			require.NoError(t, tx.Clean())
			require.Equal(t, 0, tx.NumDesc())
			require.Equal(t, e.base, e.iommu.LiveCount(), "leaked: %v", e.iommu.Live())
		}
	})
}

// step runs one add on tx and on the model.
func step(t *testing.T, e *env, tx *sdma.TxReq, m *model, kind, n, v int) {
	t.Helper()
	injected := e.fi.Injected()
	var err error
	var off int
	invalid := m.state != 1 || m.remaining == 0 || n <= 0 || n > m.remaining
	switch kind {
	case kindKV:
		off = v % 64
		err = tx.AddKVAddr(e.dev, e.heap[off:off+n])
	case kindPage:
		off = int(v) >> 4 % (dma.PageSize + 1)
		if v&1 != 0 {
			off = dma.PageSize - n // flush against the page's end
		}
		pg, perr := e.region.Page(v % regionPages)
		require.NoError(t, perr)
		invalid = invalid || off < 0 || off+n > dma.PageSize
		err = tx.AddPage(e.dev, pg, off, n)
	case kindDAddr:
		off = v % 64
		err = tx.AddDAddr(e.dev, e.coh.Addr()+dma.Addr(off), n)
	case kindBytes:
		off = (v * 37) % (2 * dma.PageSize)
		if v&1 != 0 {
			off = dma.PageSize - v%5 // just before a page boundary
		}
		err = tx.AddBytes(e.dev, e.region.Bytes()[off:off+n])
	case kindPages:
		off = (v * 41) % regionSize
		invalid = invalid || off+n > regionSize
		err = tx.AddPages(e.dev, e.region, off, n)
	}

	if invalid {
		require.ErrorIs(t, err, sdma.ErrInvalid, "kind %d n %d off %d", kind, n, off)
		var te *sdma.TxError
		require.ErrorAs(t, err, &te)
		m.fail()
		return
	}
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
		require.Equal(t, e.base, e.iommu.LiveCount(), "failure leaked: %v", e.iommu.Live())
		return
	}
	ds := tx.Descs()
	require.Len(t, ds, m.nd())
	require.LessOrEqual(t, len(ds), desc.MaxDesc)
	require.Equal(t, m.remaining, tx.Remaining())
	require.Equal(t, e.base+m.liveMapped(), e.iommu.LiveCount(), "live mappings: %v", e.iommu.Live())
	for i, md := range m.descs {
		d := ds[m.prefix+i]
		require.Equal(t, md.typ, d.Generation(), "desc %d type", m.prefix+i)
		require.Equal(t, md.n, d.Len(), "desc %d length", m.prefix+i)
	}
	if m.remaining != 0 {
		return
	}

	// Closed: the packet as the device reads it.
	sum := 0
	var got []byte
	for i, d := range ds {
		if i > 0 && i < m.prefix {
			continue // AHG edit descriptor: raw update words, no flags
		}
		require.Equal(t, i == 0, d.First(), "FIRST on desc %d", i)
		require.Equal(t, i == len(ds)-1, d.Last(), "LAST on desc %d", i)
		if i == 0 && m.prefix > 0 {
			require.Equal(t, 0, d.Len(), "AHG header descriptor")
			continue
		}
		require.GreaterOrEqual(t, d.Len(), 1)
		require.LessOrEqual(t, d.Len(), desc.MaxByteCount)
		sum += d.Len()
		b, err := e.iommu.Translate(dma.Addr(d.Addr()), d.Len(), dma.ToDevice)
		require.NoError(t, err, "desc %d", i)
		if md := m.descs[i-m.prefix]; md.split {
			a := addrOf(b)
			require.Equal(t, a/dma.PageSize, (a+uintptr(len(b))-1)/dma.PageSize, "desc %d crosses a page", i)
		}
		got = append(got, b...)
	}
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
