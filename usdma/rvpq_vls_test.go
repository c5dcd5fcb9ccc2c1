package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestVLBelowDeviceVLs: a header's VL must be below the port's operational VLs
// (hfi1_user_sdma_process_request: vl >= dd->pport->vls_operational is -EINVAL), the number the
// engine map is built for (sdma_map_init(dd, port, ppd->vls_operational, ...)): here the
// device's NumVLs. A queue on a device of 2 VLs took a template on VL 3 by default (its own
// default was 8) and sent it on the engines of VL 3 & 1; and a Config.NumVLs above the device's
// was taken too.
func TestVLBelowDeviceVLs(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Engines: 2, NumVLs: 2})
	pq := testQueue(t, Config{Device: dev})
	data := pattern(100, 1)
	for _, vl := range []uint8{2, 3, 7} {
		tp := testTemplate
		tp.VL = vl
		info, hdr := Message(0, 4096, tp, data)
		err := pq.Submit(context.Background(), info, &hdr, data)
		require.ErrorIs(t, err, ErrInvalid, "VL %d on a device of 2 VLs", vl)
		assert.Equal(t, CompEntry{}, pq.Comp(0), "VL %d: the slot is untouched", vl)
	}
	tp := testTemplate
	tp.VL = 1
	info, hdr := Message(0, 4096, tp, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	drive(t, dev.Engine(0))
	drive(t, dev.Engine(1))
	require.NoError(t, waitSlot(t, pq, 0))

	_, err := New(Config{Device: dev, NumVLs: 3})
	require.ErrorIs(t, err, ErrInvalid, "NumVLs above the device's")
	_, err = New(Config{Device: dev, NumVLs: 1}) // fewer is the caller's choice
	require.NoError(t, err)
}
