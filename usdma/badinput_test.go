package usdma

import (
	"context"
	"errors"
	"strings"
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

// TestMessageOutOfRange: ReqInfo's fields are 16 bits; Message used to truncate a slot or a
// fragment size that does not fit (slot 65538 became slot 2, slot -1 slot 65535, fragsize
// 65600 fragsize 64), the one bad input Submit then accepted as another, valid request. Such a
// ReqInfo is now refused by Submit first, with a *ReqError matching ErrInvalid that names the
// value, and changes nothing; values at the ends of the range are taken as they are.
func TestMessageOutOfRange(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev, Slots: 8})
	small := pattern(1000, 1)
	big := make([]byte, (1<<16)*64) // 65536 packets of 64 bytes
	for _, tc := range []struct {
		name       string
		slot, frag int
		data       []byte
		reason     string // "" for a request Message describes as given
	}{
		{"slot 65538", 65538, 256, small, "slot 65538 out of 0..65535"},
		{"slot 65536", 1 << 16, 256, small, "slot 65536 out of 0..65535"},
		{"slot -1", -1, 256, small, "slot -1 out of 0..65535"},
		{"slot -65534", -65534, 256, small, "slot -65534 out of 0..65535"},
		{"frag 65600", 2, 65600, small, "fragsize 65600 out of 0..65535"},
		{"frag -64", 2, -64, small, "fragsize -64 out of 0..65535"},
		{"65536 packets", 2, 64, big, "make 65536 packets, over 65535"},
		{"slot 65535", 65535, 256, small, ""},
		{"slot 0", 0, 256, small, ""},
		{"frag 65535", 3, 65535, small, ""},
		{"65535 packets", 3, 64, big[:65535*64], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, hdr := Message(tc.slot, tc.frag, testTemplate, tc.data)
			if tc.reason == "" {
				if info.bad != nil || int(info.CompIdx) != tc.slot || int(info.FragSize) != tc.frag {
					t.Fatalf("in range: %+v", info)
				}
				return
			}
			err := pq.Submit(context.Background(), info, &hdr, tc.data)
			var re *ReqError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &re) || re.Slot != tc.slot || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Submit: %v; want ErrInvalid for slot %d naming %q", err, tc.slot, tc.reason)
			}
			for s := range pq.Slots() {
				if c := pq.Comp(s); c.Status != Free {
					t.Fatalf("slot %d %v after a refused request", s, c)
				}
			}
			if st := pq.Stats(); st.Requests != 0 || st.Packets != 0 {
				t.Fatalf("stats after a refused request: %+v", st)
			}
		})
	}
}
