package sdma

import (
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// txTestGather reads the packet's bytes the way the hardware would: through Translate, skipping
// the AHG edit descriptors. It also checks the structural invariants every closed txreq keeps.
func txTestGather(t *testing.T, dev *Device, tx *TxReq) []byte {
	t.Helper()
	ds, skip := tx.hwDescs()
	require.NotEmpty(t, ds)
	require.LessOrEqual(t, len(ds), desc.MaxDesc)
	var out []byte
	for i, d := range ds {
		if i >= 1 && i <= skip {
			continue // edit descriptor: raw update words, no flags
		}
		assert.Equal(t, i == 0, d.First(), "FIRST on desc %d", i)
		assert.Equal(t, i == len(ds)-1, d.Last(), "LAST on desc %d", i)
		if d.Len() == 0 {
			require.Equal(t, 0, i, "only the AHG header descriptor is empty")
			require.GreaterOrEqual(t, d.HeaderMode(), desc.AHGApplyUpdate1)
			continue
		}
		b, err := dev.Mapper().Translate(dma.Addr(d.Addr()), d.Len(), dma.ToDevice)
		require.NoError(t, err, "desc %d", i)
		out = append(out, b...)
	}
	assert.Zero(t, len(out)%4, "packet padded to 4")
	last := ds[len(ds)-1]
	assert.True(t, last.HeadToHost())
	assert.Equal(t, tx.flags&FlagUrgent != 0, last.IntReq())
	return out
}

func txTestPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func withPad(b []byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

func TestAddKVAddrCloseAndPad(t *testing.T) {
	for _, urgent := range []bool{false, true} {
		dev, m := txTestIOMMU(t)
		var tx TxReq
		var flags Flags
		if urgent {
			flags = FlagUrgent
		}
		data := txTestPattern(10, 1)
		require.NoError(t, tx.Init(flags, 10, nil))
		require.NoError(t, tx.AddKVAddr(dev, data[:4]))
		assert.Equal(t, 1, tx.NumDesc())
		assert.False(t, tx.Descs()[0].Last())
		require.NoError(t, tx.AddKVAddr(dev, data[4:]))
		ds := tx.Descs()
		require.Len(t, ds, 3, "two fragments and a 2-byte pad")
		assert.Equal(t, desc.MapSingle, ds[0].MapType())
		assert.Equal(t, desc.MapSingle, ds[1].MapType())
		assert.Equal(t, desc.MapNone, ds[2].MapType())
		assert.Equal(t, 2, ds[2].Len())
		assert.Equal(t, uint64(dev.padAddr()), ds[2].Addr())
		assert.Equal(t, withPad(data), txTestGather(t, dev, &tx))
		require.NoError(t, tx.Clean())
		assert.Equal(t, 0, txTestLive(m))
	}
}

func TestAddNoPadOnMultipleOf4(t *testing.T) {
	dev, _ := txTestIOMMU(t)
	var tx TxReq
	data := txTestPattern(12, 3)
	require.NoError(t, tx.Init(0, 12, nil))
	require.NoError(t, tx.AddKVAddr(dev, data))
	require.Equal(t, 1, tx.NumDesc())
	d := tx.Descs()[0]
	assert.True(t, d.First() && d.Last())
	assert.Equal(t, data, txTestGather(t, dev, &tx))
	require.NoError(t, tx.Clean())
}

func TestAddPageAndDAddr(t *testing.T) {
	dev, m := txTestIOMMU(t)
	r, err := dma.AllocPages(2)
	require.NoError(t, err)
	defer r.Close()
	copy(r.Bytes(), txTestPattern(2*dma.PageSize, 9))
	p1, err := r.Page(1)
	require.NoError(t, err)

	hdr, err := m.AllocCoherent(16) // a caller-mapped header: AddDAddr
	require.NoError(t, err)
	copy(hdr.Bytes(), "HEADER-HEADER-HD")

	var tx TxReq
	require.NoError(t, tx.Init(0, 16+100, nil))
	require.NoError(t, tx.AddDAddr(dev, hdr.Addr(), 16))
	require.NoError(t, tx.AddPage(dev, p1, dma.PageSize-100, 100))
	ds := tx.Descs()
	require.Len(t, ds, 2)
	assert.Equal(t, desc.MapNone, ds[0].MapType())
	assert.Equal(t, desc.MapPage, ds[1].MapType())
	want := append([]byte("HEADER-HEADER-HD"), p1.Bytes()[dma.PageSize-100:]...)
	assert.Equal(t, want, txTestGather(t, dev, &tx))
	assert.Equal(t, 2, txTestLive(m)) // the page mapping and the caller's coherent header
	require.NoError(t, tx.Clean())
	assert.Equal(t, 1, txTestLive(m), "daddr memory stays the caller's")
	require.NoError(t, m.FreeCoherent(hdr))
}

func TestAddErrorsClean(t *testing.T) {
	r, err := dma.AllocPages(1)
	require.NoError(t, err)
	defer r.Close()
	pg, err := r.Page(0)
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		add      func(*Device, *TxReq) error
		sentinel error
	}{
		{"zero length", func(d *Device, tx *TxReq) error { return tx.AddKVAddr(d, nil) }, ErrInvalid},
		{"beyond tlen", func(d *Device, tx *TxReq) error { return tx.AddKVAddr(d, make([]byte, 100)) }, ErrInvalid},
		{"page crossing", func(d *Device, tx *TxReq) error { return tx.AddPage(d, pg, dma.PageSize-4, 8) }, ErrInvalid},
		{"negative offset", func(d *Device, tx *TxReq) error { return tx.AddPage(d, pg, -1, 8) }, ErrInvalid},
		{"zero page", func(d *Device, tx *TxReq) error { return tx.AddPage(d, dma.Page{}, 0, 8) }, ErrInvalid},
		{"nil device", func(d *Device, tx *TxReq) error { return tx.AddKVAddr(nil, make([]byte, 4)) }, ErrInvalid},
		{"daddr beyond 48 bits", func(d *Device, tx *TxReq) error { return tx.AddDAddr(d, dma.Addr(desc.MaxAddr), 8) }, ErrInvalid},
		{"pages outside region", func(d *Device, tx *TxReq) error { return tx.AddPages(d, r, dma.PageSize-4, 8) }, ErrInvalid},
		{"nil region", func(d *Device, tx *TxReq) error { return tx.AddPages(d, nil, 0, 8) }, ErrInvalid},
		{"negative region offset", func(d *Device, tx *TxReq) error { return tx.AddPages(d, r, -1, 8) }, ErrInvalid},
		{"closed region", func(d *Device, tx *TxReq) error {
			cr, err := dma.AllocPages(1)
			require.NoError(t, err)
			require.NoError(t, cr.Close())
			return tx.AddPages(d, cr, 0, 8)
		}, ErrInvalid},
		{"page offset past the page", func(d *Device, tx *TxReq) error { return tx.AddPage(d, pg, dma.PageSize+1, 1) }, ErrInvalid},
		{"zero-length page", func(d *Device, tx *TxReq) error { return tx.AddPage(d, pg, 0, 0) }, ErrInvalid},
		{"zero-length daddr", func(d *Device, tx *TxReq) error { return tx.AddDAddr(d, 4096, 0) }, ErrInvalid},
		{"empty AddBytes", func(d *Device, tx *TxReq) error { return tx.AddBytes(d, nil) }, ErrInvalid},
		{"AddBytes beyond tlen", func(d *Device, tx *TxReq) error { return tx.AddBytes(d, make([]byte, 31)) }, ErrInvalid},
		{"AddPages beyond tlen", func(d *Device, tx *TxReq) error { return tx.AddPages(d, r, 0, 31) }, ErrInvalid},
		{"other device", func(d *Device, tx *TxReq) error {
			other, _ := txTestIOMMU(t)
			return tx.AddKVAddr(other, make([]byte, 4))
		}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, m := txTestIOMMU(t)
			var tx TxReq
			require.NoError(t, tx.Init(0, 50, nil))
			require.NoError(t, tx.AddKVAddr(dev, make([]byte, 10))) // a mapping to undo
			require.NoError(t, tx.AddPage(dev, pg, 0, 10))
			assert.Equal(t, 2, txTestLive(m))
			txTestErr(t, tc.add(dev, &tx), tc.sentinel)
			assert.Equal(t, 0, txTestLive(m), "failure cleans")
			assert.Equal(t, 0, tx.NumDesc())
			require.NoError(t, tx.Clean())
			require.NoError(t, tx.Clean())
		})
	}

	t.Run("closed", func(t *testing.T) {
		dev, m := txTestIOMMU(t)
		var tx TxReq
		require.NoError(t, tx.Init(0, 4, nil))
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4)))
		te := txTestErr(t, tx.AddKVAddr(dev, make([]byte, 1)), ErrInvalid)
		assert.Contains(t, te.Reason, "closed")
		assert.Equal(t, 0, txTestLive(m))
	})
	t.Run("uninitialised", func(t *testing.T) {
		dev, _ := txTestIOMMU(t)
		var tx TxReq
		te := txTestErr(t, tx.AddKVAddr(dev, make([]byte, 1)), ErrInvalid)
		assert.Contains(t, te.Reason, "uninitialised")
	})
}

func TestAddMappingFailure(t *testing.T) {
	for n := 1; n <= 3; n++ {
		m, err := dma.NewIOMMU(dma.IOMMUConfig{})
		require.NoError(t, err)
		fi := dma.NewFaultInjector(m)
		dev, err := NewDevice(Config{Mapper: fi})
		require.NoError(t, err)
		t.Cleanup(func() { _ = dev.Close() })
		var tx TxReq
		require.NoError(t, tx.Init(0, 12, nil))
		fi.FailNth(n)
		var errs []error
		for i := range 3 {
			errs = append(errs, tx.AddKVAddr(dev, make([]byte, 4+i-i)))
		}
		require.ErrorIs(t, errs[n-1], ErrMapping)
		require.ErrorIs(t, errs[n-1], dma.ErrMapping, "the cause is kept")
		for i := n; i < 3; i++ {
			assert.Contains(t, errs[i].Error(), "cleaned")
		}
		assert.Equal(t, 1, m.LiveCount(), "only the pad stays mapped")
	}
}

// txTestMany adds k fragments that together make tlen bytes, with the given add.
func txTestMany(t *testing.T, dev *Device, tx *TxReq, data []byte, k int) {
	t.Helper()
	off := 0
	for i := range k {
		n := len(data) / k
		if i == k-1 {
			n = len(data) - off
		}
		require.NoError(t, tx.AddKVAddr(dev, data[off:off+n]), "fragment %d", i)
		off += n
	}
}

func TestAddExtend(t *testing.T) {
	dev, m := txTestIOMMU(t)
	var tx TxReq
	data := txTestPattern(7*8, 5)
	require.NoError(t, tx.Init(0, len(data), nil))
	txTestMany(t, dev, &tx, data, 7)
	assert.Equal(t, 7, tx.NumDesc())
	assert.Equal(t, desc.MaxDesc-1, int(tx.descLimit))
	assert.Equal(t, data, txTestGather(t, dev, &tx))
	require.NoError(t, tx.Clean())
	assert.Equal(t, 0, txTestLive(m))
}

// 63 fragments reaching tlen with a pad due: the reserved 64th descriptor takes the pad.
func TestAddPadAt63(t *testing.T) {
	dev, _ := txTestIOMMU(t)
	var tx TxReq
	data := txTestPattern(63, 2)
	require.NoError(t, tx.Init(0, 63, nil))
	txTestMany(t, dev, &tx, data, 63)
	require.Equal(t, desc.MaxDesc, tx.NumDesc())
	ds := tx.Descs()
	assert.Equal(t, desc.MapNone, ds[63].MapType())
	assert.Equal(t, 1, ds[63].Len())
	assert.Equal(t, withPad(data), txTestGather(t, dev, &tx))
	require.NoError(t, tx.Clean())
}

func TestAddCoalesce(t *testing.T) {
	r, err := dma.AllocPages(1)
	require.NoError(t, err)
	defer r.Close()
	pg, _ := r.Page(0)
	copy(pg.Bytes(), txTestPattern(dma.PageSize, 77))
	for _, tlen := range []int{100, 101, 102, 103} {
		dev, m := txTestIOMMU(t)
		var tx TxReq
		data := txTestPattern(tlen, 11)
		require.NoError(t, tx.Init(0, tlen, nil))
		for i := range 63 {
			require.NoError(t, tx.AddKVAddr(dev, data[i:i+1]))
		}
		assert.Equal(t, 63, tx.NumDesc())
		// Past 63: copied. A page fragment too (kmap + memcpy), then a kvaddr.
		copy(data[63:73], pg.Bytes()[5:15])
		require.NoError(t, tx.AddPage(dev, pg, 5, 10))
		assert.Equal(t, 63, tx.NumDesc())
		assert.Equal(t, tlen-73, tx.Remaining())
		txTestErr(t, tx.ready(), ErrInvalid)
		require.NoError(t, tx.AddKVAddr(dev, data[73:]))
		require.Equal(t, 64, tx.NumDesc())
		last := tx.Descs()[63]
		assert.Equal(t, desc.MapSingle, last.MapType())
		assert.Equal(t, tlen-63+(4-tlen%4)%4, last.Len(), "coalesce buffer padded, no pad descriptor")
		assert.Equal(t, (tlen+3)&^3, tx.pktLen())
		assert.Equal(t, withPad(data), txTestGather(t, dev, &tx))
		require.NoError(t, tx.ready())
		assert.Equal(t, 64, txTestLive(m))
		require.NoError(t, tx.Clean())
		assert.Equal(t, 0, txTestLive(m))
	}
}

func TestAddDAddrCannotCoalesce(t *testing.T) {
	dev, m := txTestIOMMU(t)
	hdr, err := m.AllocCoherent(64)
	require.NoError(t, err)
	var tx TxReq
	require.NoError(t, tx.Init(0, 100, nil))
	for i := range 63 {
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 1+i-i)))
	}
	te := txTestErr(t, tx.AddDAddr(dev, hdr.Addr(), 4), ErrInvalid)
	assert.Contains(t, te.Reason, "coalesce")
	assert.Equal(t, 1, txTestLive(m), "only the caller's coherent header")
	assert.Equal(t, 0, tx.NumDesc())
}

func TestAddNoDescUnreachable(t *testing.T) {
	// _extend_sdma_tx_descs at num_desc == MAX_DESC is -ENOMEM; the public API closes the packet
	// at 64 first, so drive extend directly.
	var tx TxReq
	require.NoError(t, tx.Init(0, 8, nil))
	tx.numDesc = desc.MaxDesc
	tx.descp = make([]desc.Desc, desc.MaxDesc)
	txTestErr(t, tx.extend("AddKVAddr"), ErrNoDesc)
	assert.Equal(t, 0, tx.NumDesc())
}

func TestAddAHGPayload(t *testing.T) {
	dev, _ := txTestIOMMU(t)
	var tx TxReq
	data := txTestPattern(30, 4)
	require.NoError(t, tx.InitAHG(FlagUseAHG|FlagUrgent, 30, AHG{Entry: 2, Words: []uint32{1, 2, 3 | 1<<31, 4, 5 | 1<<30, 6}, HeaderLen: 24}, nil))
	require.NoError(t, tx.AddKVAddr(dev, data[:20]))
	require.NoError(t, tx.AddKVAddr(dev, data[20:]))
	ds := tx.Descs()
	require.Len(t, ds, 3+2+1) // header, 2 edits, 2 fragments, pad
	assert.False(t, ds[3].First())
	assert.Equal(t, withPad(data), txTestGather(t, dev, &tx))
	require.NoError(t, tx.Clean())
}

// The first add into desc0 keeps FIRST and the AHG COPY bits.
func TestAddKeepsDesc0Bits(t *testing.T) {
	dev, _ := txTestIOMMU(t)
	var tx TxReq
	require.NoError(t, tx.InitAHG(FlagAHGCopy, 8, AHG{Entry: 9}, nil))
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
	d := tx.Descs()[0]
	assert.True(t, d.First() && d.Last())
	assert.Equal(t, desc.AHGCopy, d.HeaderMode())
	assert.Equal(t, 9, d.HeaderIndex())
	assert.Equal(t, desc.MapSingle, d.MapType())
	require.NoError(t, tx.Clean())
}

func TestAddBytesSplits(t *testing.T) {
	dev, m := txTestIOMMU(t)
	backing := make([]byte, 5*dma.PageSize)
	// Start 100 bytes before a page boundary of the address.
	start := dma.PageSize - int(addrOf(backing)%dma.PageSize) - 100
	for _, n := range []int{1, 100, 101, 4096, 4196, 4197, desc.MaxPktSize} {
		buf := backing[start : start+n]
		copy(buf, txTestPattern(n, byte(n)))
		var tx TxReq
		require.NoError(t, tx.Init(0, n, nil))
		require.NoError(t, tx.AddBytes(dev, buf))
		total := 0
		for _, d := range tx.Descs() {
			if d.MapType() != desc.MapSingle {
				continue
			}
			// Each piece lies inside one page of the buffer's address space.
			a := addrOf(buf) + uintptr(total)
			assert.Equal(t, a/dma.PageSize, (a+uintptr(d.Len())-1)/dma.PageSize)
			total += d.Len()
		}
		assert.Equal(t, n, total)
		assert.Equal(t, withPad(buf), txTestGather(t, dev, &tx))
		require.NoError(t, tx.Clean())
		assert.Equal(t, 0, txTestLive(m))
	}
}

func TestAddPagesSplits(t *testing.T) {
	dev, m := txTestIOMMU(t)
	r, err := dma.AllocPages(5)
	require.NoError(t, err)
	defer r.Close()
	copy(r.Bytes(), txTestPattern(5*dma.PageSize, 3))
	for _, c := range []struct{ off, n int }{{0, 1}, {4095, 2}, {4000, 8192}, {1, desc.MaxPktSize}, {3 * dma.PageSize, 2 * dma.PageSize}} {
		var tx TxReq
		require.NoError(t, tx.Init(0, c.n, nil))
		require.NoError(t, tx.AddPages(dev, r, c.off, c.n))
		for _, d := range tx.Descs() {
			assert.LessOrEqual(t, d.Len(), dma.PageSize)
		}
		assert.Equal(t, withPad(r.Bytes()[c.off:c.off+c.n]), txTestGather(t, dev, &tx))
		require.NoError(t, tx.Clean())
		assert.Equal(t, 0, txTestLive(m))
	}
}

// A failure in the middle of a split add undoes the earlier pieces too.
func TestAddBytesFailureMidway(t *testing.T) {
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	fi := dma.NewFaultInjector(m)
	dev, err := NewDevice(Config{Mapper: fi})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	buf := make([]byte, 3*dma.PageSize)
	var tx TxReq
	require.NoError(t, tx.Init(0, len(buf), nil))
	fi.FailNth(3)
	txTestErr(t, tx.AddBytes(dev, buf), ErrMapping)
	assert.Equal(t, 1, m.LiveCount())
}

// Zero allocations: up to 6 descriptors always; extended and coalescing txreqs once used.
func TestTxAddAllocs(t *testing.T) {
	if testing.CoverMode() != "" || txTestRace {
		t.Skip("coverage instrumentation and the race detector allocate")
	}
	dev, err := NewDevice(Config{Mapper: dma.NewDirect()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	data := make([]byte, 200)
	for _, frags := range []int{1, 6, 7, 63, 100} {
		var tx TxReq
		run := func() {
			if err := tx.Init(FlagUrgent, len(data)-1, nil); err != nil {
				panic(err)
			}
			for i := range frags {
				n := (len(data) - 1) / frags
				if i == frags-1 {
					n = len(data) - 1 - i*n
				}
				if err := tx.AddKVAddr(dev, data[i*((len(data)-1)/frags):][:n]); err != nil {
					panic(err)
				}
			}
			if err := tx.ready(); err != nil {
				panic(err)
			}
			tx.clean()
		}
		run() // warm: the extended array and coalesce buffer
		allocs := testing.AllocsPerRun(100, run)
		assert.Zero(t, allocs, "%d fragments", frags)
	}

	// Every kind of add, AHG and the splitting adds, on a reused txreq.
	r, err := dma.AllocPages(4)
	require.NoError(t, err)
	defer r.Close()
	pg, err := r.Page(2)
	require.NoError(t, err)
	hdr, err := dev.Mapper().AllocCoherent(64)
	require.NoError(t, err)
	defer func() { _ = dev.Mapper().FreeCoherent(hdr) }()
	heap := make([]byte, 3*dma.PageSize)
	words := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		name string
		run  func(*TxReq) error
	}{
		{"page+daddr+kvaddr", func(tx *TxReq) error {
			return firstErr(tx.Init(0, 64+100+7, nil), tx.AddDAddr(dev, hdr.Addr(), 64),
				tx.AddPage(dev, pg, dma.PageSize-100, 100), tx.AddKVAddr(dev, heap[:7]))
		}},
		{"AHG UPDATE3 extended", func(tx *TxReq) error {
			err := tx.InitAHG(FlagUseAHG|FlagUrgent, 40, AHG{Entry: 7, Words: words, HeaderLen: 60}, nil)
			for i := 0; i < 40 && err == nil; i += 4 {
				err = tx.AddPage(dev, pg, i, 4)
			}
			return err
		}},
		{"AddPages", func(tx *TxReq) error {
			return firstErr(tx.Init(0, 3*dma.PageSize-1, nil), tx.AddPages(dev, r, 1, 3*dma.PageSize-1))
		}},
		{"AddBytes", func(tx *TxReq) error {
			return firstErr(tx.Init(0, len(heap)-3, nil), tx.AddBytes(dev, heap[3:]))
		}},
		{"AddPages coalescing", func(tx *TxReq) error {
			err := tx.Init(0, 16383, nil)
			for i := 0; i < 63 && err == nil; i++ {
				err = tx.AddPage(dev, pg, i, 1)
			}
			return firstErr(err, tx.AddPages(dev, r, 5, 16383-63))
		}},
	} {
		var tx TxReq
		run := func() {
			if err := firstErr(tc.run(&tx), tx.ready()); err != nil {
				panic(err)
			}
			tx.clean()
		}
		run()
		assert.Zero(t, testing.AllocsPerRun(100, run), tc.name)
	}

	// Up to 6 descriptors, a txreq does not allocate even on its first use.
	fresh := make([]TxReq, 102) // AllocsPerRun runs once more than asked
	next := 0
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		tx := &fresh[next]
		next++
		err := tx.Init(FlagUrgent, 5*4-1, nil)
		for i := 0; i < 4 && err == nil; i++ {
			err = tx.AddKVAddr(dev, data[i*4:i*4+4])
		}
		if err = firstErr(err, tx.AddKVAddr(dev, data[16:19]), tx.ready()); err != nil {
			panic(err)
		}
		if tx.NumDesc() != desc.NumDesc || tx.ext != nil {
			panic("want 6 inline descriptors, pad included")
		}
		tx.clean()
	}), "fresh txreq, 6 descriptors")
}

// firstErr returns the first non-nil error (the adds after a failed one see a cleaned txreq).
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestTxDescsReadOnlyView(t *testing.T) {
	dev, _ := txTestIOMMU(t)
	var tx TxReq
	require.NoError(t, tx.Init(0, 8, nil))
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4)))
	ds := tx.Descs()
	assert.Equal(t, 1, cap(ds), "capped: appending cannot write into tx")
	require.NoError(t, tx.Clean())
	assert.Empty(t, tx.Descs())
}

// txTestCounted returns a device over Counting(FaultInjector(IOMMU)): the injector fails chosen
// map calls, the counter checks that every map is undone exactly once and no unmap fails.
func txTestCounted(t *testing.T) (*Device, *dma.IOMMU, *dma.FaultInjector, *dma.Counting) {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	fi := dma.NewFaultInjector(m)
	c := dma.NewCounting(fi)
	dev, err := NewDevice(Config{Mapper: c})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	return dev, m, fi, c
}

// txTestBalanced checks that every map call that succeeded was undone exactly once and that the
// only failed calls are the injected ones.
func txTestBalanced(t *testing.T, fi *dma.FaultInjector, c *dma.Counting) {
	t.Helper()
	n := c.Counts()
	assert.Equal(t, int(fi.Injected()), n.Errors, "failed mapper calls besides the injected ones")
	assert.Equal(t, n.MapSingle+n.MapPage-int(fi.Injected()), n.UnmapSingle+n.UnmapPage, "maps not undone exactly once: %+v", n)
}

// A mapping failure on every path an add can map on: the error carries ErrMapping and the
// mapper's cause, every mapping the txreq made is undone exactly once, and the txreq must be
// initialised again.
func TestAddMappingFailureEveryPath(t *testing.T) {
	r, err := dma.AllocPages(4)
	require.NoError(t, err)
	defer r.Close()
	copy(r.Bytes(), txTestPattern(4*dma.PageSize, 13))
	pg, err := r.Page(1)
	require.NoError(t, err)
	heap := txTestPattern(3*dma.PageSize+100, 21)
	ones := func(dev *Device, tx *TxReq, k int) error {
		for i := range k {
			if err := tx.AddKVAddr(dev, heap[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		tlen int
		nth  int // the map call that fails
		adds func(*Device, *TxReq) error
	}{
		{"AddKVAddr", 12, 2, func(d *Device, tx *TxReq) error { return ones(d, tx, 12) }},
		{"AddPage", 12, 2, func(d *Device, tx *TxReq) error {
			if err := tx.AddKVAddr(d, heap[:4]); err != nil {
				return err
			}
			return tx.AddPage(d, pg, dma.PageSize-8, 8)
		}},
		{"AddBytes midway", 3 * dma.PageSize, 3, func(d *Device, tx *TxReq) error {
			return tx.AddBytes(d, heap[50:50+3*dma.PageSize])
		}},
		{"AddPages midway", 9000, 2, func(d *Device, tx *TxReq) error { return tx.AddPages(d, r, 100, 9000) }},
		{"extended array", 20, 8, func(d *Device, tx *TxReq) error { return ones(d, tx, 20) }},
		{"coalesce buffer, kvaddr fragment", 100, 64, func(d *Device, tx *TxReq) error {
			if err := ones(d, tx, 63); err != nil {
				return err
			}
			return tx.AddKVAddr(d, heap[63:100])
		}},
		{"coalesce buffer, page fragment", 100, 64, func(d *Device, tx *TxReq) error {
			if err := ones(d, tx, 63); err != nil {
				return err
			}
			return tx.AddPage(d, pg, 0, 37)
		}},
		{"AHG packet", 30, 2, func(d *Device, tx *TxReq) error { return tx.AddPages(d, r, dma.PageSize-10, 30) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, m, fi, c := txTestCounted(t)
			base := m.LiveCount()
			var tx TxReq
			if tc.name == "AHG packet" {
				require.NoError(t, tx.InitAHG(FlagUseAHG, tc.tlen, AHG{Entry: 1, Words: []uint32{1, 2, 3, 4, 5, 6, 7}, HeaderLen: 20}, nil))
			} else {
				require.NoError(t, tx.Init(0, tc.tlen, nil))
			}
			fi.FailNth(tc.nth)
			err := tc.adds(dev, &tx)
			te := txTestErr(t, err, ErrMapping)
			assert.ErrorIs(t, te, dma.ErrMapping, "the mapper's cause is kept")
			assert.Equal(t, uint64(1), fi.Injected())
			assert.Equal(t, 0, tx.NumDesc())
			assert.Equal(t, base, m.LiveCount(), "leaked: %v", m.Live())
			txTestBalanced(t, fi, c)
			te = txTestErr(t, tx.AddKVAddr(dev, heap[:1]), ErrInvalid)
			assert.Contains(t, te.Reason, "cleaned")
			require.NoError(t, tx.Clean())
			// Re-initialised, the same txreq builds the same packet.
			require.NoError(t, tx.Init(0, 12, nil))
			require.NoError(t, ones(dev, &tx, 12))
			assert.Equal(t, heap[:12], txTestGather(t, dev, &tx))
			require.NoError(t, tx.Clean())
			assert.Equal(t, base, m.LiveCount())
			txTestBalanced(t, fi, c)
		})
	}
}

// A reused txreq keeps its coalesce buffer: the pad of the next coalesced packet must be zeroed
// again, not left over from the last packet (the memset of ext_coal_sdma_tx_descs).
func TestAddCoalesceReusePadZeroed(t *testing.T) {
	dev, m, fi, c := txTestCounted(t)
	base := m.LiveCount()
	dirty := make([]byte, 200)
	for i := range dirty {
		dirty[i] = 0xa5
	}
	var tx TxReq
	for _, tail := range []int{1, 2, 3, 5, 6, 7} { // pads of 3, 2, 1, 3, 2, 1 bytes
		require.NoError(t, tx.Init(0, 63+len(dirty), nil))
		txTestMany(t, dev, &tx, append(make([]byte, 63), dirty...), 64)
		require.NoError(t, tx.Clean())

		data := txTestPattern(63+tail, byte(tail))
		require.NoError(t, tx.Init(0, len(data), nil))
		for i := range 63 {
			require.NoError(t, tx.AddKVAddr(dev, data[i:i+1]))
		}
		require.NoError(t, tx.AddKVAddr(dev, data[63:]))
		require.Equal(t, desc.MaxDesc, tx.NumDesc())
		assert.Equal(t, withPad(data), txTestGather(t, dev, &tx), "tail %d", tail)
		require.NoError(t, tx.Clean())
	}
	assert.Equal(t, base, m.LiveCount())
	txTestBalanced(t, fi, c)
}

// Clean must not read the AHG edit descriptors as mappings (__sdma_txclean skips them): here
// their update words spell out SINGLE and PAGE descriptors of two live mappings that are not the
// txreq's, which must survive the clean.
func TestCleanSkipsAHGEditDescs(t *testing.T) {
	dev, m, fi, c := txTestCounted(t)
	r, err := dma.AllocPages(1)
	require.NoError(t, err)
	defer r.Close()
	pg, err := r.Page(0)
	require.NoError(t, err)
	victim := make([]byte, 64)
	va, err := m.MapSingle(victim, dma.ToDevice)
	require.NoError(t, err)
	pa, err := m.MapPage(pg, 0, 128, dma.ToDevice)
	require.NoError(t, err)
	base := m.LiveCount()

	// An edit descriptor is qw0 = w[i] | w[i+1]<<32, qw1 = w[i+2] | w[i+3]<<32.
	asDesc := func(a dma.Addr, n int, typ desc.MapType) []uint32 {
		return []uint32{uint32(a), uint32(uint64(a)>>32) | uint32(n)<<16, uint32(typ) << desc.GenerationShift, 0}
	}
	words := append([]uint32{desc.AHGUpdateEnableFlag}, asDesc(va, len(victim), desc.MapSingle)...)
	words = append(words, asDesc(pa, 128, desc.MapPage)...)
	require.Len(t, words, desc.MaxAHGWords)

	var tx TxReq
	require.NoError(t, tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 3, Words: words, HeaderLen: 16}, nil))
	require.Equal(t, 3, tx.NumDesc())
	require.Equal(t, desc.MapSingle, tx.Descs()[1].MapType(), "the edit descriptor looks like a mapping")
	require.Equal(t, desc.MapPage, tx.Descs()[2].MapType())
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
	require.NoError(t, tx.Clean())
	assert.Equal(t, base, m.LiveCount(), "clean unmapped a mapping that was not the txreq's")
	require.NoError(t, m.UnmapSingle(va, len(victim), dma.ToDevice))
	require.NoError(t, m.UnmapPage(pa, 128, dma.ToDevice))
	txTestBalanced(t, fi, c)
}

// BenchmarkTxBuild builds and cleans one packet of 4 KiB from frags fragments with the Direct
// mapper: inline (≤6), extended (7..63) and coalescing (>63) txreqs, reused across iterations.
func BenchmarkTxBuild(b *testing.B) {
	dev, err := NewDevice(Config{Mapper: dma.NewDirect()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = dev.Close() })
	data := make([]byte, 4096)
	for _, frags := range []int{1, 6, 7, 63, 100} {
		b.Run("frags="+itoa(frags), func(b *testing.B) {
			var tx TxReq
			step := len(data) / frags
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := tx.Init(0, len(data), nil); err != nil {
					b.Fatal(err)
				}
				for i := range frags {
					end := (i + 1) * step
					if i == frags-1 {
						end = len(data)
					}
					if err := tx.AddKVAddr(dev, data[i*step:end]); err != nil {
						b.Fatal(err)
					}
				}
				tx.clean()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(frags), "ns/frag")
		})
	}
}

func TestAddToClosedDevice(t *testing.T) {
	dev, m := txTestIOMMU(t)
	buf := make([]byte, 8)
	var tx TxReq
	require.NoError(t, tx.Init(0, 16, nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NoError(t, dev.Close())
	te := txTestErr(t, tx.AddKVAddr(dev, buf), ErrClosed)
	assert.Contains(t, te.Error(), "device closed")
	assert.Zero(t, tx.NumDesc(), "the failed add cleaned the txreq")
	assert.Zero(t, m.LiveCount(), "no mapping left: the txreq's was undone, Close freed the pad")
}

// TestAddRefusedHighAddressUnmapped: a mapper that hands out bus addresses beyond the
// descriptor's 48 bits (an IOMMU with a 56-bit IOVA space and 1 TiB granules) gets each such
// mapping refused with ErrMapping and undone at the address it gave, not the masked one: nothing
// stays mapped, and no unmap failed, through every add.
func TestAddRefusedHighAddressUnmapped(t *testing.T) {
	if bits.UintSize < 64 {
		t.Skip("1 TiB IOVA granules need a 64-bit int")
	}
	granule := 40 // a variable shift: the constant 1<<40 does not compile where int is 32 bits
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{PageSize: 1 << granule, IOVABits: 56})
	require.NoError(t, err)
	dev, err := NewDevice(Config{Mapper: iommu, Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	base := iommu.LiveCount() // the device's pad
	region, err := dma.AllocPages(1)
	require.NoError(t, err)
	defer region.Close()
	page, err := region.Page(0)
	require.NoError(t, err)
	buf := make([]byte, 64)
	adds := map[string]func(tx *TxReq) error{
		"AddKVAddr": func(tx *TxReq) error { return tx.AddKVAddr(dev, buf) },
		"AddBytes":  func(tx *TxReq) error { return tx.AddBytes(dev, buf) },
		"AddPage":   func(tx *TxReq) error { return tx.AddPage(dev, page, 0, 64) },
		"AddPages":  func(tx *TxReq) error { return tx.AddPages(dev, region, 0, 64) },
	}
	for name, add := range adds {
		refused := 0
		for i := 0; i < 600 && refused < 3; i++ { // 256 granules below 2^48 of 65536: they run out
			var tx TxReq
			require.NoError(t, tx.Init(0, 64, nil))
			err := add(&tx)
			if err != nil {
				require.ErrorIs(t, err, ErrMapping, name)
				refused++
			}
			require.NoError(t, tx.Clean())
			require.Equal(t, base, iommu.LiveCount(), "%s, add %d: mappings left: %v", name, i, iommu.Live())
		}
		require.Positive(t, refused, "%s: the mapper never handed out an address beyond 48 bits", name)
	}
	require.Zero(t, dev.UnmapErrors(), "unmaps that failed on a path that promised to undo")
}
