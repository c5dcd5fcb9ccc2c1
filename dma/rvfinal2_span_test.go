package dma

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestRVF2RegionSpanConcurrent: while other goroutines allocate and close regions (moving the
// span's lo and hi, in the registry's two words), maps of a live region's memory through every
// fast map (Direct's and the IOMMU's MapSingleSole, MapSingleSoleHint, MapSingle) always pin the
// region: none is taken as Go memory.
func TestRVF2RegionSpanConcurrent(t *testing.T) {
	r, err := AllocPages(2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	iommu, err := NewIOMMU(IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mappers := []interface {
		Mapper
		SoleMapper
	}{NewDirect(), iommu}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				x, err := AllocPages(1)
				if err != nil {
					t.Error(err)
					return
				}
				y, err := AllocPages(3)
				if err != nil {
					t.Error(err)
					return
				}
				_ = x.Close()
				_ = y.Close()
			}
		}()
	}
	mem := r.Bytes()
	for i := 0; i < 20000; i++ {
		m := mappers[i&1]
		b := mem[(i*64)%(len(mem)-256):][:128]
		before := r.state.Load()
		var a Addr
		var h Sole
		switch i >> 1 % 3 {
		case 0:
			a, h, err = m.MapSingleSole(b, ToDevice)
		case 1:
			a, h, err = m.MapSingleSoleHint(b, ToDevice, h)
		default:
			a, err = m.MapSingle(b, ToDevice)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := r.state.Load(); got != before+1 {
			t.Fatalf("map %d of region memory: pins %d -> %d (taken as Go memory)", i, before, got)
		}
		if i>>1%3 == 2 {
			err = m.UnmapSingle(a, len(b), ToDevice)
		} else {
			err = m.UnmapSingleSole(a, len(b), ToDevice, h)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}
