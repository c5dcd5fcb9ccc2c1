package dma

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWrapNilMapper: NewCounting(nil) and NewFaultInjector(nil) wrap a new Direct, as a nil
// sdma.Config.Mapper is one: they used to take the nil, and the first call through the wrapper
// panicked on it (inside sdma.NewDevice too, with such a wrapper as its Mapper).
func TestWrapNilMapper(t *testing.T) {
	for name, m := range map[string]interface {
		Mapper
		Unwrap() Mapper
	}{
		"counting": NewCounting(nil), "inject": NewFaultInjector(nil),
		"counting typed nil": NewCounting((*IOMMU)(nil)), "inject typed nil": NewFaultInjector((*Direct)(nil)),
	} {
		_, ok := m.Unwrap().(*Direct)
		assert.True(t, ok, "%s wraps a Direct", name)
		buf := make([]byte, 8)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err, name)
		got, err := m.Translate(a, len(buf), ToDevice)
		require.NoError(t, err, name)
		assert.Len(t, got, len(buf), name)
		require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice), name)
	}
}

// TestBadInputsMappers: the bad-input census of the Mapper methods, on every mapper and wrapper:
// each bad call gets the documented sentinel, panics on nothing, and leaves the live mappings as
// they were.
func TestBadInputsMappers(t *testing.T) {
	io, err := NewIOMMU(IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mappers := map[string]Mapper{
		"direct": NewDirect(), "iommu": io,
		"counting": NewCounting(NewDirect()), "inject": NewFaultInjector(testIOMMU0(t)),
	}
	buf := make([]byte, 128)
	page, closed, closedPage := liveAndSecondPage(t)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	const maxInt = int(^uint(0) >> 1)
	type call struct {
		name string
		f    func(m Mapper) error
		want error
	}
	var calls []call
	for _, dir := range []Direction{3, 255} {
		calls = append(calls,
			call{"MapSingle " + dir.String(), func(m Mapper) error { _, err := m.MapSingle(buf, dir); return err }, ErrInvalid},
			call{"MapPage " + dir.String(), func(m Mapper) error { _, err := m.MapPage(page, 0, 8, dir); return err }, ErrInvalid},
			call{"MapSG " + dir.String(), func(m Mapper) error { _, err := m.MapSG([]SG{{Buf: buf}}, dir); return err }, ErrInvalid},
			call{"SyncForCPU " + dir.String(), func(m Mapper) error { return m.SyncForCPU(0x1000, 8, dir) }, ErrInvalid},
			call{"SyncForDevice " + dir.String(), func(m Mapper) error { return m.SyncForDevice(0x1000, 8, dir) }, ErrInvalid},
			call{"Translate " + dir.String(), func(m Mapper) error { _, err := m.Translate(0x1000, 8, dir); return err }, ErrFault},
			call{"Register " + dir.String(), func(m Mapper) error { _, err := m.(Registrar).Register(buf, dir); return err }, ErrInvalid},
		)
	}
	calls = append(calls,
		call{"MapSingle nil", func(m Mapper) error { _, err := m.MapSingle(nil, ToDevice); return err }, ErrInvalid},
		call{"MapPage zero Page", func(m Mapper) error { _, err := m.MapPage(Page{}, 0, 8, ToDevice); return err }, ErrInvalid},
		call{"MapPage of a closed region", func(m Mapper) error { _, err := m.MapPage(closedPage, 0, 8, ToDevice); return err }, ErrClosed},
		call{"MapSG nil", func(m Mapper) error { _, err := m.MapSG(nil, ToDevice); return err }, ErrInvalid},
		call{"MapSG with an empty entry", func(m Mapper) error {
			_, err := m.MapSG([]SG{{Buf: buf[:8]}, {}}, ToDevice)
			return err
		}, ErrInvalid},
		call{"UnmapSG never mapped", func(m Mapper) error { return m.UnmapSG([]SG{{Buf: buf, Addr: 0x1000, Len: 8}}, ToDevice) }, ErrNotMapped},
		call{"AllocCoherent 0", func(m Mapper) error { _, err := m.AllocCoherent(0); return err }, ErrInvalid},
		call{"AllocCoherent -1", func(m Mapper) error { _, err := m.AllocCoherent(-1); return err }, ErrInvalid},
		call{"AllocCoherent MaxInt", func(m Mapper) error { _, err := m.AllocCoherent(maxInt); return err }, ErrInvalid},
		call{"FreeCoherent nil", func(m Mapper) error { return m.FreeCoherent(nil) }, ErrInvalid},
		call{"FreeCoherent zero", func(m Mapper) error { return m.FreeCoherent(&Coherent{}) }, ErrNotMapped},
		call{"FreeCoherent twice", func(m Mapper) error {
			c, err := m.AllocCoherent(64)
			if err != nil {
				return err
			}
			if err := m.FreeCoherent(c); err != nil {
				return err
			}
			return m.FreeCoherent(c)
		}, ErrClosed},
		call{"FreeCoherent of another mapper", func(m Mapper) error {
			c, err := NewDirect().AllocCoherent(64)
			if err != nil {
				return err
			}
			return m.FreeCoherent(c)
		}, ErrNotMapped},
		call{"Register nil", func(m Mapper) error { _, err := m.(Registrar).Register(nil, ToDevice); return err }, ErrInvalid},
		call{"Register overlapping", func(m Mapper) error {
			r, err := m.(Registrar).Register(buf, ToDevice)
			if err != nil {
				return err
			}
			defer m.(Registrar).Deregister(t.Context(), r)
			_, err = m.(Registrar).Register(buf[64:], ToDevice)
			return err
		}, ErrInvalid},
		call{"Deregister nil", func(m Mapper) error { return m.(Registrar).Deregister(t.Context(), nil) }, ErrNotMapped},
		call{"Deregister zero", func(m Mapper) error { return m.(Registrar).Deregister(t.Context(), &Registration{}) }, ErrNotMapped},
		call{"Deregister twice", func(m Mapper) error {
			r, err := m.(Registrar).Register(buf, ToDevice)
			if err != nil {
				return err
			}
			if err := m.(Registrar).Deregister(t.Context(), r); err != nil {
				return err
			}
			return m.(Registrar).Deregister(t.Context(), r)
		}, ErrNotMapped},
		call{"Deregister of another mapper's", func(m Mapper) error {
			other := NewDirect()
			r, err := other.Register(buf, ToDevice)
			if err != nil {
				return err
			}
			defer other.Deregister(t.Context(), r)
			return m.(Registrar).Deregister(t.Context(), r)
		}, ErrNotMapped},
		call{"UnmapBatch zero entry", func(m Mapper) error { return UnmapAll(m, []Unmap{{}}) }, ErrNotMapped},
	)
	for _, size := range []int{-1, 0, maxInt} {
		for _, a := range []Addr{0, 1 << 48, ^Addr(0)} {
			what := Mapping{Addr: a, Size: size}.String()
			calls = append(calls,
				call{"UnmapSingle " + what, func(m Mapper) error { return m.UnmapSingle(a, size, ToDevice) }, ErrNotMapped},
				call{"UnmapPage " + what, func(m Mapper) error { return m.UnmapPage(a, size, ToDevice) }, ErrNotMapped},
				call{"SyncForCPU " + what, func(m Mapper) error { return m.SyncForCPU(a, size, ToDevice) }, ErrNotMapped},
				call{"SyncForDevice " + what, func(m Mapper) error { return m.SyncForDevice(a, size, ToDevice) }, ErrNotMapped},
				call{"Translate " + what, func(m Mapper) error { _, err := m.Translate(a, size, ToDevice); return err }, ErrFault},
			)
		}
	}
	for _, o := range [][2]int{{-1, 8}, {0, -1}, {0, 0}, {maxInt, 8}, {8, maxInt}, {PageSize, 1}, {PageSize - 8, 16}} {
		calls = append(calls, call{"MapPage offset/size " + Mapping{Addr: Addr(o[0]), Size: o[1]}.String(), func(m Mapper) error {
			_, err := m.MapPage(page, o[0], o[1], ToDevice)
			return err
		}, ErrInvalid})
	}
	for name, m := range mappers {
		// One good mapping that every refused call must leave alone.
		good, err := m.MapSingle(buf[:16], ToDevice)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panicked: %v", r)
						}
					}()
					err = c.f(m)
				}()
				if !errors.Is(err, c.want) {
					t.Fatalf("got %v, want %v", err, c.want)
				}
				if !strings.HasPrefix(err.Error(), "dma: ") && !strings.HasPrefix(err.Error(), "entry ") {
					t.Errorf("unclear error %q", err)
				}
				if b, err := m.Translate(good, 16, ToDevice); err != nil || len(b) != 16 {
					t.Errorf("the good mapping is gone: %v", err)
				}
			})
		}
		if err := m.UnmapSingle(good, 16, ToDevice); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// testIOMMU0 is a default IOMMU for a test.
func testIOMMU0(t *testing.T) *IOMMU {
	m, err := NewIOMMU(IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBadInputsConstructors: NewIOMMU, AllocPages, Region.Page, NewPool, the Pool's and the
// FaultInjector's bad values get ErrInvalid (or ErrClosed, ErrNotOwned, ErrBusy as documented).
func TestBadInputsConstructors(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	nan := func() float64 { var z float64; return z / z }()
	for _, c := range []IOMMUConfig{
		{PageSize: -1}, {PageSize: 100}, {PageSize: 128}, {IOVABits: -1}, {IOVABits: 12},
		{IOVABits: 64}, {PageSize: 1 << 20, IOVABits: 20}, {FailNth: -1}, {FailFraction: -0.1},
		{FailFraction: 1.5}, {FailFraction: nan},
	} {
		if m, err := NewIOMMU(c); m != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("NewIOMMU(%+v): %v", c, err)
		}
	}
	for _, n := range []int{-1, 0, maxInt} {
		if r, err := AllocPages(n); r != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("AllocPages(%d): %v", n, err)
		}
	}
	r, err := AllocPages(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 2, maxInt} {
		if _, err := r.Page(i); !errors.Is(err, ErrInvalid) {
			t.Errorf("Page(%d): %v", i, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Page(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Page after Close: %v", err)
	}
	m := NewDirect()
	for _, c := range []struct{ size, align int }{{0, 8}, {-1, 8}, {8, 3}, {8, -4}, {1<<30 + 1, 8}, {maxInt, 8}} {
		if p, err := NewPool(m, "bad", c.size, c.align); p != nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPool(size %d, align %d): %v", c.size, c.align, err)
		}
	}
	if p, err := NewPool(nil, "bad", 8, 8); p != nil || !errors.Is(err, ErrInvalid) {
		t.Errorf("NewPool(nil mapper): %v", err)
	}
	p, err := NewPool(m, "census", 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(Block{}); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Free of a zero Block: %v", err)
	}
	b, err := p.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(b); !errors.Is(err, ErrNotOwned) {
		t.Errorf("second Free: %v", err)
	}
	if p.InUse() != 0 {
		t.Errorf("InUse %d after the refused Free", p.InUse())
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Destroy: %v", err)
	}
	if _, err := p.Alloc(); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Destroy: %v", err)
	}
	fi := NewFaultInjector(m)
	for _, f := range []float64{-0.5, 1.5, nan} {
		if err := fi.FailFraction(f, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("FailFraction(%v): %v", f, err)
		}
	}
	if _, err := fi.MapSingle(make([]byte, 8), ToDevice); err != nil {
		t.Errorf("a refused FailFraction changed the injector: %v", err)
	}
}
