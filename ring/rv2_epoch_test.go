package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/require"
)

// TestReserveInAcrossCloseOpen (rv2 review of b775793): Close and Open without a Reset keep the
// epoch: ReserveIn is refused with ErrClosed (not ErrReset) while closed and reserves again in
// the same epoch after Open, right after the reservations made before the Close. A full ring says
// ErrFull in its epoch and ErrReset once Reset (the ring is empty then), and Reserve, whatever
// the epoch, reserves as before.
func TestReserveInAcrossCloseOpen(t *testing.T) {
	r, err := New(64)
	require.NoError(t, err)
	ep := r.Epoch()
	v, err := r.ReserveIn(5, ep)
	require.NoError(t, err)
	v.Write(0, []desc.Desc{mk(1), mk(2), mk(3), mk(4), mk(5)}, 0)
	v.Publish()
	for range 3 {
		r.Close()
		_, err = r.ReserveIn(1, ep)
		require.Same(t, ErrClosed, err)
		r.Open()
	}
	require.Equal(t, ep, r.Epoch())
	v, err = r.ReserveIn(58, ep)
	require.NoError(t, err)
	require.EqualValues(t, 5, v.Start())
	ds := make([]desc.Desc, 58)
	for i := range ds {
		ds[i] = mk(uint64(6 + i))
	}
	v.Write(0, ds, 0)
	v.Publish()
	_, err = r.ReserveIn(1, ep)
	require.Same(t, ErrFull, err)

	r.Close()
	r.SetHWHead(r.Tail())
	r.BeginWrite()
	r.SetSwHead(r.Tail())
	r.EndWrite()
	r.Reset(0)
	_, err = r.ReserveIn(1, ep)
	require.Same(t, ErrReset, err, "closed and reset: the epoch is over")
	r.Open()
	_, err = r.ReserveIn(1, ep)
	require.Same(t, ErrReset, err)
	require.Zero(t, r.Reserved())
	v, err = r.Reserve(63)
	require.NoError(t, err, "Reserve: any epoch")
	require.Zero(t, v.Start())
}
