package alloc

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigObj is an object larger than half a cache line, with pointers: its cells are padded.
type bigObj struct {
	p    *[64]byte
	data [300]byte
	q    *[64]byte
}

// cellsOf returns every created cell of s, in index order.
func cellsOf[T any](s *stack[T]) []*cell[T] {
	var out []*cell[T]
	for _, sl := range s.tab.Load().byIndex {
		for k := range sl.cells.n {
			out = append(out, sl.cells.at(uint32(k)))
		}
	}
	return out
}

// assertOwnLines checks that no two cells' bytes (object, link and batch words) share a 64-byte
// line, nor an aligned block of the padding unit (an adjacent-line pair on amd64).
func assertOwnLines[T any](t *testing.T, cells []*cell[T]) {
	t.Helper()
	size := unsafe.Sizeof(*cells[0])
	for _, line := range []uintptr{64, cacheLine} {
		owner := map[uintptr]int{}
		for i, c := range cells {
			a := uintptr(unsafe.Pointer(c))
			for l := a / line; l <= (a+size-1)/line; l++ {
				if j, ok := owner[l]; ok {
					require.Failf(t, "cells share a line", "cells %d and %d share the %d-byte line at %#x", j, i, line, l*line)
				}
				owner[l] = i
			}
		}
	}
}

// TestCellLayout: the cells of an allocator of large objects are padded and aligned so that no
// two share a cache line or an adjacent-line pair (the link word of one and the first bytes of the
// next's object were neighbours before: false sharing between cores), across a List, a Slab's
// slabs and its later regions; cells of small objects stay packed.
func TestCellLayout(t *testing.T) {
	lay := newLayout[bigObj]()
	size := unsafe.Sizeof(cell[bigObj]{})
	assert.True(t, lay.padded)
	assert.Zero(t, lay.stride%cacheLine)
	assert.Less(t, lay.stride-size, uintptr(cacheLine), "padding costs less than a padding unit")

	small := newLayout[int64]()
	assert.False(t, small.padded)
	assert.Equal(t, unsafe.Sizeof(cell[int64]{}), small.stride, "small cells stay packed")

	t.Run("list", func(t *testing.T) {
		l, err := NewList[bigObj](100, nil)
		require.NoError(t, err)
		assertOwnLines(t, cellsOf(&l.s))
	})
	t.Run("slab", func(t *testing.T) {
		s, err := NewSlab(SlabConfig[bigObj]{ObjectsPerSlab: 3})
		require.NoError(t, err)
		var held []*bigObj
		for range 3 * 40 { // 40 slabs: several regions
			o, err := s.Get()
			require.NoError(t, err)
			held = append(held, o)
		}
		require.Greater(t, len(s.s.tab.Load().byAddr), 1)
		assertOwnLines(t, cellsOf(&s.s))
		for _, o := range held {
			require.NoError(t, s.Put(o))
		}
	})
}

// TestPaddedCellsGC: the garbage collector sees the pointers in padded cells (their memory is
// typed by the padded layout), so what objects point to stays alive; and an address in a cell's
// padding or at its link word is not an object.
func TestPaddedCellsGC(t *testing.T) {
	l, err := NewList[bigObj](64, nil)
	require.NoError(t, err)
	var held []*bigObj
	for k := range 64 {
		o, err := l.Get()
		require.NoError(t, err)
		o.p, o.q = new([64]byte), new([64]byte)
		for i := range o.p {
			o.p[i], o.q[i] = byte(k), byte(^k)
		}
		held = append(held, o)
	}
	var junk [][64]byte
	for range 4 {
		runtime.GC()
		for range 1 << 12 {
			junk = append(junk, [64]byte{0xee})
		}
	}
	runtime.KeepAlive(junk)
	for k, o := range held {
		for i := range o.p {
			require.Equal(t, byte(k), o.p[i])
			require.Equal(t, byte(^k), o.q[i])
		}
	}
	pad := (*bigObj)(unsafe.Add(unsafe.Pointer(held[0]), unsafe.Sizeof(cell[bigObj]{})))
	assert.False(t, l.Owns(pad), "an address in a cell's padding is not an object")
	require.ErrorIs(t, l.Put(pad), ErrForeign)
	for _, o := range []*bigObj{held[0], held[1]} { // the cell's start (its link word): not an object
		start := (*bigObj)(unsafe.Add(unsafe.Pointer(o), -int(objOffset[bigObj]())))
		assert.False(t, l.Owns(start))
		require.ErrorIs(t, l.Put(start), ErrForeign)
	}
	for _, o := range held {
		require.NoError(t, l.Put(o))
	}
	assert.Equal(t, int64(0), l.Stats().InUse)
}

// TestLayoutQuot: quot(off) < n exactly when off is a multiple of the stride below n strides, and
// then it is off/stride, for packed and padded strides, offsets near multiples, and offsets of
// addresses below a region (a - base wraps).
func TestLayoutQuot(t *testing.T) {
	strides := []uintptr{16, 24, 40, 48, 56, 128, 256, 384, 640, 768, 896, 1024, 1152, 4096, 3 << 20}
	for _, stride := range strides {
		l := layout{stride: stride}.withDivisor()
		const n = 1000
		check := func(off uintptr) {
			q := l.quot(off)
			want := off%stride == 0 && off/stride < n
			require.Equal(t, want, q < n, "stride %d off %d: quot %d", stride, off, q)
			if want {
				require.Equal(t, uint64(off/stride), q, "stride %d off %d", stride, off)
			}
		}
		for k := uintptr(0); k <= n+2; k++ {
			for _, d := range []uintptr{0, 1, 8, 16, stride / 2, stride - 1} {
				check(k*stride + d)
				check(k*stride - d)
				check(-(k*stride + d))
			}
		}
	}
	big := newLayout[bigObj]()
	assert.Equal(t, uint64(2), big.quot(2*big.stride))
}
