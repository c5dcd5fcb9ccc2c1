package alloc_test

import (
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
)

// header stands in for sdma.TxReq (alloc cannot import sdma).
type header struct {
	flags uint16
	tlen  int
}

// Use the fields, for staticcheck: they give the types a size and a layout to get wrong.
var _ = header{}.flags + uint16(header{}.tlen) + uint16(second{}.seq) + second{}.h.flags

type embedded struct {
	header
	seq int
}

type named struct {
	h   header
	seq int
}

type second struct {
	seq int
	h   header
}

func TestOuter(t *testing.T) {
	e := &embedded{seq: 1}
	assert.Same(t, e, alloc.Outer[embedded](&e.header))
	n := &named{seq: 2}
	assert.Same(t, n, alloc.Outer[named](&n.h))
	assert.Nil(t, alloc.Outer[embedded]((*header)(nil)))

	conv := alloc.OuterFunc[embedded, header]()
	assert.Same(t, e, conv(&e.header))
	assert.Nil(t, conv(nil))

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if alloc.Outer[embedded](&e.header) != e {
			panic("wrong outer")
		}
	}))
}

func TestOuterMisuse(t *testing.T) {
	var h header
	assert.PanicsWithValue(t, "alloc.Outer: the first field of alloc_test.second is seq int, not a alloc_test.header",
		func() { alloc.Outer[second](&h) })
	assert.PanicsWithValue(t, "alloc.Outer: int is not a struct, so it cannot start with a alloc_test.header",
		func() { alloc.Outer[int](&h) })
	assert.PanicsWithValue(t, "alloc.Outer: struct {} has no fields; its first field must be a alloc_test.header",
		func() { alloc.Outer[struct{}](&h) })
	assert.Panics(t, func() { alloc.OuterFunc[second, header]() })
	// A bad pair is not cached as good.
	assert.Panics(t, func() { alloc.Outer[second](&h) })
}
