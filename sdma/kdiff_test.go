package sdma

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/ring"
)

// kdiffMapper records every map and unmap call of the library, so that the kernel model's
// dma_map_* calls return the same addresses (kMaps) and its unmaps can be compared.
type kdiffMapper struct {
	dma.Mapper
	maps, unmaps []kMapCall
}

func (m *kdiffMapper) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	a, err := m.Mapper.MapSingle(buf, dir)
	if err == nil {
		m.maps = append(m.maps, kMapCall{kind: kMapSingle, size: len(buf), addr: uint64(a)})
	}
	return a, err
}

func (m *kdiffMapper) MapPage(p dma.Page, off, size int, dir dma.Direction) (dma.Addr, error) {
	a, err := m.Mapper.MapPage(p, off, size, dir)
	if err == nil {
		m.maps = append(m.maps, kMapCall{kind: kMapPage, size: size, addr: uint64(a)})
	}
	return a, err
}

func (m *kdiffMapper) UnmapSingle(a dma.Addr, size int, dir dma.Direction) error {
	m.unmaps = append(m.unmaps, kMapCall{kind: kMapSingle, size: size, addr: uint64(a)})
	return m.Mapper.UnmapSingle(a, size, dir)
}

func (m *kdiffMapper) UnmapPage(a dma.Addr, size int, dir dma.Direction) error {
	m.unmaps = append(m.unmaps, kMapCall{kind: kMapPage, size: size, addr: uint64(a)})
	return m.Mapper.UnmapPage(a, size, dir)
}

// kdiffErrno is the kernel errno a library error stands for (the package doc's map, and each
// sentinel's comment in errors.go).
func kdiffErrno(err error) int {
	switch {
	case err == nil:
		return kOK
	case errors.Is(err, ErrNoData):
		return kENODATA
	case errors.Is(err, ErrMsgSize):
		return kEMSGSIZE
	case errors.Is(err, ErrMapping):
		return kENOSPC
	case errors.Is(err, ErrNoDesc):
		return kENOMEM
	case errors.Is(err, ErrInvalid):
		return kEINVAL
	}
	return 1 // no kernel counterpart
}

// kdiffEnv is one device with a recording mapper, and the memory the adds take their fragments
// from.
type kdiffEnv struct {
	dev   *Device
	m     *kdiffMapper
	heap  []byte
	pages *dma.Region
	coh   *dma.Coherent
}

func newKdiffEnv(t *testing.T) *kdiffEnv {
	t.Helper()
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	m := &kdiffMapper{Mapper: iommu}
	dev, err := NewDevice(Config{Mapper: m, Manual: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	pages, err := dma.AllocPages(8)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pages.Close() })
	coh, err := m.AllocCoherent(2 * desc.MaxPktSize)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.FreeCoherent(coh) })
	return &kdiffEnv{dev: dev, m: m, heap: make([]byte, 4*desc.MaxPktSize), pages: pages, coh: coh}
}

// kdiffOp is one add: its kind (kMapSingle: AddKVAddr, kMapPage: AddPage, kMapNone: AddDAddr)
// and its length.
type kdiffOp struct {
	kind int
	n    int
}

// kdiffInit is one Init/InitAHG.
type kdiffInit struct {
	flags Flags
	tlen  int
	ahg   AHG
}

// kdiffRun builds one txreq both ways, op by op, and returns the first difference (nil: none).
// After the last op it writes the closed txreq to a ring at tail and compares the slots with
// submit_tx's, then cleans both and compares the unmaps.
func kdiffRun(env *kdiffEnv, rng *rand.Rand, in kdiffInit, ops []kdiffOp, tail uint64) error {
	env.m.maps, env.m.unmaps = env.m.maps[:0], env.m.unmaps[:0]
	maps := &kMaps{}
	kd := &kDev{padPhys: uint64(env.dev.padAddr()), defaultDesc1: desc.HeadToHostFlag, maps: maps}
	var tx TxReq
	var ktx kTx
	words := make([]uint32, len(in.ahg.Words))
	copy(words, in.ahg.Words)
	gerr := tx.InitAHG(in.flags, in.tlen, in.ahg, nil)
	kr := ktx.txinitAHG(uint16(in.flags), uint16(in.tlen), uint8(in.ahg.Entry), uint8(len(words)), words, uint8(in.ahg.HeaderLen))
	if err := kdiffCompare("InitAHG", &tx, &ktx, gerr, kr, maps, env.m); err != nil || kr != kOK {
		return err
	}
	for i, op := range ops {
		name := fmt.Sprintf("op %d (%s of %d)", i, kdiffKind(op.kind), op.n)
		var gerr error
		var kr int
		switch op.kind {
		case kMapSingle:
			off := rng.IntN(len(env.heap) - op.n + 1)
			gerr = tx.AddKVAddr(env.dev, env.heap[off:off+op.n])
			maps.calls = env.m.maps
			kr = kd.txaddMapped(&ktx, kMapSingle, uint16(op.n))
		case kMapPage:
			pg, err := env.pages.Page(rng.IntN(env.pages.NumPages()))
			if err != nil {
				return err
			}
			off := rng.IntN(dma.PageSize - op.n + 1)
			gerr = tx.AddPage(env.dev, pg, off, op.n)
			maps.calls = env.m.maps
			kr = kd.txaddMapped(&ktx, kMapPage, uint16(op.n))
		default:
			a := uint64(env.coh.Addr()) + uint64(rng.IntN(len(env.coh.Bytes())-op.n+1))
			gerr = tx.AddDAddr(env.dev, dma.Addr(a), op.n)
			maps.calls = env.m.maps
			kr = kd.txaddDaddr(&ktx, a, uint16(op.n))
		}
		if err := kdiffCompare(name, &tx, &ktx, gerr, kr, maps, env.m); err != nil || kr != kOK {
			return err
		}
	}
	if ktx.tlen == 0 {
		r, err := ring.New(4 * ring.MinSize)
		if err != nil {
			return err
		}
		// Move the ring to tail: reserve, publish and retire what lies before it.
		for r.Reserved() < tail {
			n := min(int(tail-r.Reserved()), r.Size()-1)
			res, err := r.Reserve(n)
			if err != nil {
				return err
			}
			res.Publish()
			r.SetHWHead(r.Tail())
			r.SetSwHead(r.Tail())
		}
		ds, skip := tx.hwDescs()
		res, err := r.ReserveWrite(ds, skip)
		if err != nil {
			return err
		}
		want := ktx.submit(uint32(tail), r.Shift())
		for i := range want {
			got := r.Slot(res.Start() + uint64(i))
			if got.Qw0 != want[i].qw[0] || got.Qw1 != want[i].qw[1] {
				return fmt.Errorf("submit_tx at tail %d: slot %d is %#x/%#x, kernel %#x/%#x", tail, i, got.Qw0, got.Qw1, want[i].qw[0], want[i].qw[1])
			}
		}
		res.Publish()
	}
	env.m.unmaps = env.m.unmaps[:0]
	if err := tx.Clean(); err != nil {
		return err
	}
	kd.txclean(&ktx)
	return kdiffUnmaps("Clean", ktx.unmaps, env.m.unmaps)
}

func kdiffKind(k int) string {
	switch k {
	case kMapSingle:
		return "AddKVAddr"
	case kMapPage:
		return "AddPage"
	}
	return "AddDAddr"
}

// kdiffCompare compares the library's txreq with the model's after one step.
func kdiffCompare(name string, tx *TxReq, ktx *kTx, gerr error, kr int, maps *kMaps, m *kdiffMapper) error {
	if got := kdiffErrno(gerr); got != kr {
		return fmt.Errorf("%s: library %v (errno %d), kernel %d", name, gerr, got, kr)
	}
	if maps.err != nil {
		return fmt.Errorf("%s: %w", name, maps.err)
	}
	if maps.next != len(m.maps) {
		return fmt.Errorf("%s: library made %d mappings, kernel %d", name, len(m.maps), maps.next)
	}
	if kr != kOK {
		// Both cleaned the txreq: the same unmaps (the kernel leaves num_desc 0).
		if tx.NumDesc() != 0 || ktx.numDesc != 0 {
			return fmt.Errorf("%s: after the error num_desc %d, kernel %d", name, tx.NumDesc(), ktx.numDesc)
		}
		return kdiffUnmaps(name, ktx.unmaps, m.unmaps)
	}
	if tx.NumDesc() != int(ktx.numDesc) {
		return fmt.Errorf("%s: num_desc %d, kernel %d", name, tx.NumDesc(), ktx.numDesc)
	}
	kds := ktx.descp()
	for i, d := range tx.Descs() {
		if d.Qw0 != kds[i].qw[0] || d.Qw1 != kds[i].qw[1] {
			return fmt.Errorf("%s: desc %d is %#x/%#x, kernel %#x/%#x", name, i, d.Qw0, d.Qw1, kds[i].qw[0], kds[i].qw[1])
		}
	}
	krem := int(ktx.tlen)
	if ktx.coalesceBuf && ktx.tlen != 0 {
		krem = int(ktx.tlen - ktx.coalesceIdx)
	}
	if tx.Remaining() != krem {
		return fmt.Errorf("%s: remaining %d, kernel %d", name, tx.Remaining(), krem)
	}
	if tx.pktLen() != int(ktx.packetLen) {
		return fmt.Errorf("%s: packet_len %d, kernel %d", name, tx.pktLen(), ktx.packetLen)
	}
	return nil
}

func kdiffUnmaps(name string, want, got []kMapCall) error {
	if len(want) != len(got) {
		return fmt.Errorf("%s: %d unmaps %v, kernel %d %v", name, len(got), got, len(want), want)
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Errorf("%s: unmap %d is %+v, kernel %+v", name, i, got[i], want[i])
		}
	}
	return nil
}

// kdiffRandom draws one txreq: its Init and its adds (lengths that add up to tlen, in the
// domain where the library follows the kernel: no zero or too long add, AHG arguments the kernel
// does not WARN about).
func kdiffRandom(rng *rand.Rand) (kdiffInit, []kdiffOp) {
	var in kdiffInit
	switch rng.IntN(6) {
	case 0:
		in.flags = FlagUrgent
	case 1:
		in.flags = FlagVIP
	case 2:
		in.flags = FlagAHGCopy
		in.ahg.Entry = rng.IntN(32)
	case 3, 4:
		in.flags = FlagUseAHG | Flags(rng.IntN(2))*FlagUrgent
		in.ahg.Entry = rng.IntN(32)
		in.ahg.Words = make([]uint32, 1+rng.IntN(MaxAHGWords))
		for i := range in.ahg.Words {
			in.ahg.Words[i] = rng.Uint32()
		}
		in.ahg.HeaderLen = 4 * (2 + rng.IntN(15))
	}
	// Fragments: few or many (past 6, around 63, past 64).
	var nfrag int
	switch rng.IntN(4) {
	case 0:
		nfrag = 1 + rng.IntN(6)
	case 1:
		nfrag = 5 + rng.IntN(4)
	case 2:
		nfrag = 58 + rng.IntN(10)
	default:
		nfrag = 60 + rng.IntN(40)
	}
	maxLen := 1 + rng.IntN(min(4096, desc.MaxPktSize/nfrag))
	var ops []kdiffOp
	for range nfrag {
		op := kdiffOp{n: 1 + rng.IntN(maxLen)}
		switch r := rng.IntN(10); {
		case r < 6:
			op.kind = kMapSingle
		case r < 9:
			op.kind = kMapPage
		default:
			op.kind = kMapNone
		}
		in.tlen += op.n
		ops = append(ops, op)
	}
	// Sometimes the packet is longer than its adds: the tx stays open.
	if rng.IntN(8) == 0 && in.tlen < desc.MaxPktSize {
		in.tlen++
	}
	return in, ops
}

// TestTxBuildMatchesKernelModel builds random txreqs with the library and with a literal model
// of the kernel's build path (kdiff_model_test.go: sdma_txinit_ahg, _sdma_txreq_ahgadd,
// sdma_txadd_kvaddr/page/daddr, ext_coal_sdma_tx_descs, _extend_sdma_tx_descs,
// _pad_sdma_tx_descs, _sdma_close_tx, __sdma_txclean, submit_tx) and compares, after every
// step, the return (as an errno), num_desc, every descriptor word, the bytes left and
// packet_len; then the ring slots submit_tx writes at a random tail and the unmaps of the clean.
func TestTxBuildMatchesKernelModel(t *testing.T) {
	env := newKdiffEnv(t)
	rng, n := kdiffRand(0x6b646966, 3000, 500)
	for i := range n {
		in, ops := kdiffRandom(rng)
		tail := rng.Uint64N(16 * ring.MinSize)
		if err := kdiffRun(env, rng, in, ops, tail); err != nil {
			t.Fatalf("case %d: init %+v, %d adds: %v", i, in, len(ops), err)
		}
	}
}

// kdiffRand returns the generator of a differential test, seeded with seed, and its number of
// cases: n, or short with -short.
func kdiffRand(seed uint64, n, short int) (*rand.Rand, int) {
	if testing.Short() {
		n = short
	}
	return rand.New(rand.NewPCG(seed, seed)), n
}
