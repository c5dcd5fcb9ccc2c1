package usdma

import (
	"errors"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/sdma"
)

// TestNewTypedNilAlloc: a nil allocator pointer in a non-nil Config.Alloc is refused, as
// sdma.NewDevice refuses a typed nil Mapper or Sink. It used to be taken: the first Submit then
// panicked on it after claiming its slot, and Close waited for that request forever.
func TestNewTypedNilAlloc(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	var slab *alloc.Slab[TxReq]
	var list *alloc.List[TxReq]
	var pool *alloc.Pool[TxReq]
	for name, a := range map[string]alloc.Allocator[TxReq]{"slab": slab, "list": list, "pool": pool} {
		pq, err := New(Config{Device: dev, Alloc: a})
		var re *ReqError
		if pq != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &re) {
			t.Errorf("%s: New with a nil %T: %v, %v; want ErrInvalid", name, a, pq, err)
		}
	}
}
