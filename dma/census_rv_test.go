package dma_test

import (
	"context"
	"testing"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/census"
)

// The second bad-input census of package dma (badinput_test.go has the first: every Mapper
// method's bad arguments, the constructors'): the zero values used without their constructors,
// each call run by census.Isolated, in a process of its own, so that a call that ends the process
// fails its row instead of the run.

// zeroMapper is a mapper of this package used as its zero value, without its constructor.
type zeroMapper interface {
	dma.Mapper
	dma.SoleMapper
	dma.SoleTranslator
	dma.Registrar
	dma.BatchUnmapper
}

// TestCensusZeroMappers: every method of a zero Direct and a zero IOMMU (not made by NewDirect,
// NewIOMMU) panics, as their docs say, as a nil receiver's would, or answers; none ends the
// process. A zero Direct's MapSingleSole, MapSingleSoleHint, TranslateSole and UnmapSingleSole
// used to: their index lookups add an entry's offset to the nil table, and the load faults past
// the nil page, a fatal error ("unexpected fault address") that no recover catches.
func TestCensusZeroMappers(t *testing.T) {
	buf := make([]byte, 256)
	bg := context.Background()
	calls := []struct {
		name string
		f    func(m zeroMapper) error
	}{
		{"MapSingle", func(m zeroMapper) error { _, err := m.MapSingle(buf, dma.ToDevice); return err }},
		{"MapSingleSole", func(m zeroMapper) error { _, _, err := m.MapSingleSole(buf, dma.ToDevice); return err }},
		{"MapSingleSoleHint", func(m zeroMapper) error { _, _, err := m.MapSingleSoleHint(buf, dma.ToDevice, 0x101); return err }},
		{"MapPage", func(m zeroMapper) error {
			r, err := dma.AllocPages(1)
			if err != nil {
				return err
			}
			p, _ := r.Page(0)
			_, err = m.MapPage(p, 0, 64, dma.ToDevice)
			return err
		}},
		{"MapSG", func(m zeroMapper) error { _, err := m.MapSG([]dma.SG{{Buf: buf}}, dma.ToDevice); return err }},
		{"UnmapSingle", func(m zeroMapper) error { return m.UnmapSingle(0x1000, 64, dma.ToDevice) }},
		{"UnmapSingleSole", func(m zeroMapper) error { return m.UnmapSingleSole(0x1000, 64, dma.ToDevice, 0x101) }},
		{"UnmapPage", func(m zeroMapper) error { return m.UnmapPage(0x1000, 64, dma.ToDevice) }},
		{"UnmapSG", func(m zeroMapper) error { return m.UnmapSG([]dma.SG{{Buf: buf, Addr: 0x1000, Len: 64}}, dma.ToDevice) }},
		{"UnmapBatch", func(m zeroMapper) error {
			return m.UnmapBatch([]dma.Unmap{{Addr: 0x1000, Size: 64, Dir: dma.ToDevice, Kind: dma.KindSingle, Sole: 0x101}})
		}},
		{"Translate", func(m zeroMapper) error { _, err := m.Translate(0x1000, 64, dma.ToDevice); return err }},
		{"TranslateSole", func(m zeroMapper) error { _, err := m.TranslateSole(0x1000, 64, dma.ToDevice, 0x101); return err }},
		{"SyncForCPU", func(m zeroMapper) error { return m.SyncForCPU(0x1000, 64, dma.ToDevice) }},
		{"SyncForDevice", func(m zeroMapper) error { return m.SyncForDevice(0x1000, 64, dma.ToDevice) }},
		{"AllocCoherent", func(m zeroMapper) error { _, err := m.AllocCoherent(64); return err }},
		{"FreeCoherent", func(m zeroMapper) error { return m.FreeCoherent(&dma.Coherent{}) }},
		{"Register", func(m zeroMapper) error { _, err := m.Register(buf, dma.ToDevice); return err }},
		{"Registered", func(m zeroMapper) error { m.Registered(buf); return nil }},
		{"Deregister", func(m zeroMapper) error { return m.Deregister(bg, &dma.Registration{}) }},
	}
	for _, mk := range []struct {
		name string
		m    func() zeroMapper
	}{
		{"Direct", func() zeroMapper { return new(dma.Direct) }},
		{"IOMMU", func() zeroMapper { return new(dma.IOMMU) }},
	} {
		for _, c := range calls {
			name := mk.name + "." + c.name
			t.Run(name, func(t *testing.T) {
				if r := census.Isolated(t, name, func() error { return c.f(mk.m()) }); r.Crashed || r.Hung {
					t.Errorf("zero %s: %v", name, r)
				}
			})
		}
	}
}
