package alloc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/internal/census"
)

// The second bad-input census of package alloc (badinput_test.go has the first: sizes, foreign and
// double Puts, the zero List and Slab): Outer's type checks, zero-size objects, out-of-range enum
// values and repeated Close, each call under census.Timeout so that a hang fails its row.

// cenOuter starts with a cenFirst, the layout Outer converts back to (fields blank: only the
// types matter).
type cenFirst struct{ _ int }
type cenOuter struct {
	_ cenFirst
	_ int
}

func TestCensusAlloc(t *testing.T) {
	panics := func(text string) func(census.Result) bool {
		return func(r census.Result) bool { return r.Panicked && strings.Contains(r.String(), text) }
	}
	// getPut gets two objects of a zero-size type, checks they differ, and puts both back.
	getPut := func(a alloc.Allocator[struct{}]) error {
		x, err := a.Get()
		if err != nil {
			return err
		}
		y, err := a.Get()
		if err != nil {
			return err
		}
		if x == y {
			return errors.New("one object handed out twice")
		}
		return errors.Join(a.Put(x), a.Put(y))
	}
	cases := []census.Case{
		{"Outer of a struct whose first field is another type", func() error { alloc.Outer[cenOuter, int](new(int)); return nil },
			panics("the first field of alloc_test.cenOuter is _ alloc_test.cenFirst, not a int")},
		{"Outer of a type that is no struct", func() error { alloc.Outer[int, int](new(int)); return nil }, panics("int is not a struct")},
		{"OuterFunc of a mismatched pair", func() error { alloc.OuterFunc[cenOuter, int](); return nil }, panics("not a int")},
		{"Outer(nil)", func() error {
			if alloc.Outer[cenOuter, cenFirst](nil) != nil {
				return errors.New("not nil")
			}
			return nil
		}, census.OK},
		{"EmptyPolicy out of range has a name", func() error {
			if alloc.EmptyPolicy(99).String() == "" {
				return errors.New("empty")
			}
			return nil
		}, census.OK},
		{"List of zero-size objects", func() error {
			l, err := alloc.NewList[struct{}](4, nil)
			if err != nil {
				return err
			}
			return getPut(l)
		}, census.OK},
		{"Slab of zero-size objects", func() error {
			s, err := alloc.NewSlab(alloc.SlabConfig[struct{}]{ObjectsPerSlab: 4})
			if err != nil {
				return err
			}
			return getPut(s)
		}, census.OK},
		{"Pool of zero-size objects", func() error { return getPut(alloc.NewPool[struct{}](nil)) }, census.OK},
		{"Pool Put of a zero-size object it did not make", func() error { return alloc.NewPool[struct{}](nil).Put(&struct{}{}) },
			func(r census.Result) bool { return errors.Is(r.Err, alloc.ErrForeign) }},
		{"List Close twice", func() error {
			l, _ := alloc.NewList[int](1, nil)
			_ = l.Close()
			return l.Close()
		}, census.OK},
	}
	census.Run(t, cases)
}
