package alloc

import (
	"math"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/gosdma/gosdma/internal/prefetch"
)

// Cell layout (the kernel's SLAB_HWCACHE_ALIGN, which hfi1 creates its verbs_txreq_cache with).
//
// A cell's link word is CASed by every Put of its object, and its object is written by whoever
// holds it; cells handed to goroutines on different cores must not share a cache line, or every
// Get, Put and write of the object pays a cross-core line transfer (hundreds of ns on a VM). With
// cells packed back to back, cell k's link shares a line with the first bytes of cell k+1's object.
//
// So an allocator lays its cells out once, at NewSlab or NewList, by the size of cell[T]:
//   - a cell of more than half a padding unit (cacheLine/2: 64 bytes on amd64) is padded to a
//     multiple of cacheLine (at least two 64-byte lines, for the adjacent-line prefetcher), and
//     its regions start on a cacheLine boundary: no two cells share a line or a line pair. That
//     costs less than cacheLine bytes per object: under half of a large object's size.
//   - a smaller cell stays packed (its stride is its size), as the kernel packs small objects
//     several to a line: a List or Slab of small values keeps its memory, and a caller that
//     shares such objects across cores pads T itself.
//
// A padded cell's region is allocated with a type made at run time (reflect.StructOf: cell[T]'s
// fields, then a byte array), so the garbage collector knows where its pointers are; the
// allocator reads it through *cell[T], whose fields sit at the same offsets (newLayout checks).
// Its regions are allocated as the runtime's large objects (over 32 KiB), which start on a page
// boundary, and hence on a cacheLine one (TestCellLayout checks that no two cells share a line).

// largeObject is a size above which the runtime allocates an object by itself on whole pages
// (its small-object size classes end at 32 KiB): such an object starts on a page boundary.
const largeObject = 32<<10 + 1

// layout is an allocator's cell layout: the type of its region's elements and their stride.
// Computed by newLayout, immutable after.
type layout struct {
	elem   reflect.Type // cell[T], or cell[T]'s fields followed by padding
	stride uintptr      // bytes from one cell to the next: elem's size
	padded bool         // regions are allocated as large objects, cacheLine-aligned
	// warm is how many of a cell's first 64-byte lines popCur's touch of the next cell
	// prefetches for writing: a padded cell's first warmBytes (at most its stride); 0 for packed
	// cells, whose lines may be shared with cells in use on other cores (the touch loads their
	// link instead).
	warm int

	// inv and rot divide by the stride without a division (quot): inv is the inverse of the
	// stride's odd factor modulo 2^64, rot is 64 minus the stride's trailing zero bits.
	inv uint64
	rot int
}

// withDivisor sets l's inv and rot for its stride.
func (l layout) withDivisor() layout {
	z := bits.TrailingZeros64(uint64(l.stride))
	d := uint64(l.stride) >> z
	inv := d // Newton's iteration: each step doubles the correct low bits (d*d = 1 mod 8 for odd d)
	for range 5 {
		inv *= 2 - d*inv
	}
	l.inv, l.rot = inv, 64-z
	return l
}

// quot returns off/stride if off is a multiple of the stride, and otherwise a number above
// MaxUint64/stride, so above every cell count: one test (quot(off) < n) tells that off is the
// offset of one of n cells and gives its number, where off%stride and off/stride would cost a
// division (tens of cycles). Why: with the stride d·2^z (d odd), off·inv (mod 2^64) is off/d
// when d divides off, and above MaxUint64/d when it does not (multiplication by inv permutes
// the residues, mapping the multiples of d onto [0, MaxUint64/d]); rotating right by z moves a
// remainder's nonzero low bits to the top (above MaxUint64>>z) and otherwise divides by 2^z
// (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994, §9).
func (l *layout) quot(off uintptr) uint64 {
	return bits.RotateLeft64(uint64(off)*l.inv, l.rot)
}

// maxRegionBytes is the most bytes one region (one allocation of cells) may take: under the
// runtime's largest allocation (2^48 bytes on 64-bit platforms) and within an int (32-bit ones).
// A larger request makes the runtime panic ("allocation size out of range"), so NewList and
// NewSlab refuse sizes past it (maxCells) with an error instead.
const maxRegionBytes = min(math.MaxInt, 1<<47)

// cellStride returns the stride newLayout lays T's cells out at (see above). It takes the size
// from reflect, as newLayout does: with unsafe.Sizeof(cell[T]) here, GOARCH=arm (go1.26, run
// under qemu-arm) computed bits.TrailingZeros64 of the stride as 35 for 24 in withDivisor, so
// quot returned 0 for every offset and a foreign Put passed for an object of the List.
func cellStride[T any]() uintptr {
	size := reflect.TypeFor[cell[T]]().Size()
	if size <= cacheLine/2 {
		return size
	}
	return (size + cacheLine - 1) / cacheLine * cacheLine
}

// maxCells returns the most cells of T that one region may hold (maxRegionBytes).
func maxCells[T any]() uint64 { return uint64(uintptr(maxRegionBytes) / cellStride[T]()) }

// newLayout returns the cell layout for T (see above).
func newLayout[T any]() layout {
	plain := reflect.TypeFor[cell[T]]()
	if objOffset[T]() != cellHeader {
		panic("alloc: object not at cellHeader in its cell") // cannot happen: see cellHeader
	}
	size := plain.Size()
	stride := cellStride[T]()
	if size <= cacheLine/2 {
		return layout{elem: plain, stride: stride}.withDivisor()
	}
	elem := plain
	if stride > size {
		fields := make([]reflect.StructField, 0, plain.NumField()+1)
		for k := range plain.NumField() {
			f := plain.Field(k)
			fields = append(fields, reflect.StructField{Name: "F" + f.Name, Type: f.Type})
		}
		fields = append(fields, reflect.StructField{Name: "Pad", Type: reflect.ArrayOf(int(stride-size), reflect.TypeFor[byte]())})
		elem = reflect.StructOf(fields)
		for k := range plain.NumField() {
			if elem.Field(k).Offset != plain.Field(k).Offset {
				panic("alloc: padded cell layout differs from cell[T]") // cannot happen: same fields, same order
			}
		}
	}
	if elem.Size() != stride {
		panic("alloc: padded cell size is not its stride") // cannot happen: stride is a multiple of the alignment
	}
	return layout{elem: elem, stride: stride, padded: true, warm: int(min(stride, warmBytes) / prefetch.LineSize)}.withDivisor()
}

// warmBytes is how much of a padded cell popCur's touch prefetches for writing: the link and the
// object's first bytes, which the Get and its caller write at once (an sdma.TxReq's completion
// group, its first descriptors and their handles: 256 bytes into a cell). Measured on
// BenchmarkPacketPath list+direct hw=goroutine with the engine's own prefetch of the txreq (2
// vCPUs, interleaved, median of 5): 4 lines 2.63x inline, 6 lines 2.69x.
const warmBytes = 256

// cellRun is n cells at base, stride bytes apart: a region's allocation, or a slab's window of
// it. base keeps the allocation alive.
type cellRun[T any] struct {
	base   unsafe.Pointer
	n      int
	stride uintptr
}

// minCells returns the fewest cells newCells allocates for lay: for padded cells, enough to make
// a large object (which starts on a page); else 1.
func (l *layout) minCells() int {
	if !l.padded {
		return 1
	}
	return int((largeObject + l.stride - 1) / l.stride)
}

// newCells allocates n zeroed cells laid out by lay.
func newCells[T any](n int, lay layout) cellRun[T] {
	alloc := max(n, lay.minCells())
	v := reflect.MakeSlice(reflect.SliceOf(lay.elem), alloc, alloc)
	return cellRun[T]{base: v.UnsafePointer(), n: n, stride: lay.stride}
}

// at returns cell k; it panics if k is out of range, as a slice index would.
func (r cellRun[T]) at(k uint32) *cell[T] {
	if uint(k) >= uint(r.n) {
		panic("alloc: cell index out of range")
	}
	return (*cell[T])(unsafe.Add(r.base, uintptr(k)*r.stride))
}

// cellAt returns the cell k strides after the one at base. The caller has checked that it is
// one of base's allocation's cells.
func cellAt[T any](base unsafe.Pointer, k uint32, stride uintptr) *cell[T] {
	return (*cell[T])(unsafe.Add(base, uintptr(k)*stride))
}

// cellOf returns the cell of the object p. The caller has checked that p is an object of one of
// its cells (layout.quot of its offset in a region): the cell then starts objOffset bytes
// before, in the same allocation.
func cellOf[T any](p *T) *cell[T] {
	return (*cell[T])(unsafe.Add(unsafe.Pointer(p), -cellHeader))
}

// window returns cells [from, to) of r.
func (r cellRun[T]) window(from, to int) cellRun[T] {
	if from < 0 || from > to || to > r.n {
		panic("alloc: cell window out of range")
	}
	if from == to {
		return cellRun[T]{stride: r.stride}
	}
	return cellRun[T]{base: unsafe.Add(r.base, uintptr(from)*r.stride), n: to - from, stride: r.stride}
}

// objects returns the address range of r's objects: from the first object's address to one
// stride past the last's.
func (r cellRun[T]) objects() (base, end uintptr) {
	base = uintptr(r.base) + objOffset[T]()
	return base, base + uintptr(r.n)*r.stride
}

// cellHeader is the offset of the object in its cell on every platform: the link and batch
// words, 8-byte aligned even on 32-bit platforms, and no Go type is aligned to more than 8
// bytes. newLayout checks it. A constant, unlike objOffset in generic code (a dictionary load).
const cellHeader = 16

// objOffset is the offset of the object in its cell.
func objOffset[T any]() uintptr {
	var c *cell[T]
	return unsafe.Offsetof(c.obj)
}
