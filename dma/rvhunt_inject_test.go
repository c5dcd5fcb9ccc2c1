package dma

import (
	"errors"
	"testing"
)

// TestFaultInjectorSkipsRefusedMapCalls: the FaultInjector counts the map calls the wrapped mapper
// would carry out, as the IOMMU's own injection does (TestIOMMUInjectionSkipsInvalidMapSG,
// TestIOMMUInjectionSkipsClosedRegion): a call refused for its arguments (an empty buffer, a bad
// direction, a bad page range, an empty list or entry, a size that is not positive) is
// ErrInvalid, one on a closed Region's memory ErrClosed, and neither takes FailNth's failure
// from the valid call it is set for nor is failed by FailAll. The injector drew first, so each
// such call was ErrMapping, the caller's bug reported as a mapping failure.
func TestFaultInjectorSkipsRefusedMapCalls(t *testing.T) {
	buf := make([]byte, 64)
	page, closed, closedPage := liveAndSecondPage(t)
	pin, err := NewDirect().MapPage(closedPage, 0, 64, ToDevice) // keeps the memory: closed, not released
	if err != nil {
		t.Fatal(err)
	}
	_ = pin
	if err := closed.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a live mapping: %v, want ErrBusy", err)
	}
	closedMem := closedPage.r.mem[128:192]
	refused := []struct {
		name string
		call func(f *FaultInjector) error
		want error
	}{
		{"MapSingle(nil)", func(f *FaultInjector) error { _, err := f.MapSingle(nil, ToDevice); return err }, ErrInvalid},
		{"MapSingle bad dir", func(f *FaultInjector) error { _, err := f.MapSingle(buf, 7); return err }, ErrInvalid},
		{"MapSingle closed region", func(f *FaultInjector) error { _, err := f.MapSingle(closedMem, ToDevice); return err }, ErrClosed},
		{"MapSingleSole(nil)", func(f *FaultInjector) error { _, _, err := f.MapSingleSole(nil, ToDevice); return err }, ErrInvalid},
		{"MapPage zero Page", func(f *FaultInjector) error { _, err := f.MapPage(Page{}, 0, 8, ToDevice); return err }, ErrInvalid},
		{"MapPage past the page", func(f *FaultInjector) error { _, err := f.MapPage(page, PageSize-4, 8, ToDevice); return err }, ErrInvalid},
		{"MapPage bad dir", func(f *FaultInjector) error { _, err := f.MapPage(page, 0, 8, 9); return err }, ErrInvalid},
		{"MapPage closed region", func(f *FaultInjector) error { _, err := f.MapPage(closedPage, 128, 8, ToDevice); return err }, ErrClosed},
		{"MapSG no entries", func(f *FaultInjector) error { _, err := f.MapSG(nil, ToDevice); return err }, ErrInvalid},
		{"MapSG empty entry", func(f *FaultInjector) error { _, err := f.MapSG([]SG{{Buf: buf}, {}}, ToDevice); return err }, ErrInvalid},
		{"MapSG bad dir", func(f *FaultInjector) error { _, err := f.MapSG([]SG{{Buf: buf}}, 255); return err }, ErrInvalid},
		{"MapSG closed region", func(f *FaultInjector) error {
			_, err := f.MapSG([]SG{{Buf: buf}, {Buf: closedMem}}, ToDevice)
			return err
		}, ErrClosed},
		{"AllocCoherent(0)", func(f *FaultInjector) error { _, err := f.AllocCoherent(0); return err }, ErrInvalid},
	}
	for _, mk := range []struct {
		name string
		m    func() Mapper
	}{{"direct", func() Mapper { return NewDirect() }}, {"iommu", func() Mapper { return testIOMMU0(t) }}} {
		nth := NewFaultInjector(mk.m())
		nth.FailNth(1)
		all := NewFaultInjector(mk.m())
		all.FailAll(true)
		for _, c := range refused {
			if err := c.call(nth); !errors.Is(err, c.want) {
				t.Errorf("%s: FailNth(1): %s: %v, want %v", mk.name, c.name, err, c.want)
			}
			if err := c.call(all); !errors.Is(err, c.want) {
				t.Errorf("%s: FailAll: %s: %v, want %v", mk.name, c.name, err, c.want)
			}
		}
		if n := nth.Injected() + all.Injected(); n != 0 {
			t.Errorf("%s: Injected %d after refused calls only, want 0", mk.name, n)
		}
		if _, err := nth.MapSingle(buf, ToDevice); !errors.Is(err, ErrMapping) {
			t.Errorf("%s: the first valid map call: %v, want the injected ErrMapping", mk.name, err)
		}
		if _, err := nth.MapSingle(buf, ToDevice); err != nil {
			t.Errorf("%s: the second valid map call: %v", mk.name, err)
		}
	}
	// The IOMMU's own injection: a MapSG with an entry in a closed Region is ErrClosed, as its
	// MapSingle and MapPage of such memory are, and draws nothing.
	io, err := NewIOMMU(IOMMUConfig{FailNth: 1})
	if err != nil {
		t.Fatal(err)
	}
	sg := []SG{{Buf: buf}, {Buf: closedMem}}
	if _, err := io.MapSG(sg, ToDevice); !errors.Is(err, ErrClosed) {
		t.Errorf("IOMMU FailNth(1): MapSG with a closed region's entry: %v, want ErrClosed", err)
	}
	if sg[0].Addr != 0 || sg[0].Len != 0 || io.LiveCount() != 0 {
		t.Errorf("IOMMU: a refused MapSG left entry 0 %+v, %d live", sg[0], io.LiveCount())
	}
	if _, err := io.MapSingle(buf, ToDevice); !errors.Is(err, ErrMapping) {
		t.Errorf("IOMMU: the first valid map call: %v, want the injected ErrMapping", err)
	}
}

// liveAndSecondPage returns a page of a one-page Region that stays open until the test ends, and
// a second one-page Region with its page, for the caller to close (the bad-input tests map into
// memory of a closed Region).
func liveAndSecondPage(t *testing.T) (Page, *Region, Page) {
	t.Helper()
	live, err := AllocPages(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	page, err := live.Page(0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := AllocPages(1)
	if err != nil {
		t.Fatal(err)
	}
	secondPage, err := second.Page(0)
	if err != nil {
		t.Fatal(err)
	}
	return page, second, secondPage
}
