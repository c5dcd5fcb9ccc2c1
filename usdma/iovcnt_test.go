package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestIOVCntBelowTheVectorsSaysWhy: Submit takes one request, so it refuses an io vector count
// in Ctrl below 1 + the data vectors given, where hfi1_user_sdma_process_request takes the first
// req_iovcnt vectors of the writev (it refuses only a count over dim) and hfi1_write_iter makes
// the vectors past them the next request of the same writev. The refusal said "want 1 + 3 data
// vectors", not why one vector too many is wrong. It now says that the vectors past the count
// would be the next request's in the kernel, and to submit that with its own Submit; a count
// over the vectors given says the count goes past them (-EINVAL in the kernel too), and a count
// of 0 that the header's vector counts. Nothing changes (the slot stays Free), and the request
// cut to its count, which the kernel model sends, goes through.
func TestIOVCntBelowTheVectorsSaysWhy(t *testing.T) {
	dev := testDevice(t, sdma.Config{})
	pq := testQueue(t, Config{Device: dev, Slots: 4})
	a, b, c := pattern(5000, 1), pattern(300, 2), pattern(700, 3)
	info, hdr := Message(2, 4096, testTemplate, a) // a request of a alone: iovcnt 2

	err := pq.Submit(context.Background(), info, &hdr, a, b, c)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "io vector count 2 in Ctrl, below 1 + 3 data vectors")
	assert.Contains(t, err.Error(), "the 2 vectors past it would be the next request of the same writev", "why it is refused")
	assert.Contains(t, err.Error(), "Submit that request on its own")
	assert.Equal(t, CompEntry{Status: Free}, pq.Comp(2), "nothing changed")
	k := kernelRequest(kreqCfg{ringSize: 4, vlsOp: 1, ahg: true, running: true, pcount: MaxPktsPerQueue}, info, hdr, [][]byte{a, b, c})
	assert.Zero(t, k.ret, "the kernel sends the request of the first vector (the documented difference)")
	assert.Equal(t, len(a), k.dataLen, "the kernel's request is the first vector's data")

	over := with(info, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 3) })
	err = pq.Submit(context.Background(), over, &hdr, a)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "io vector count 4 in Ctrl, over the 1 + 1 vectors given")
	assert.Equal(t, kEINVAL, kernelRequest(kreqCfg{ringSize: 4, vlsOp: 1, running: true, pcount: MaxPktsPerQueue}, over, hdr, [][]byte{a}).ret, "the kernel refuses it too")

	zero := with(info, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, -1) })
	err = pq.Submit(context.Background(), zero, &hdr, a)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "io vector count 0 in Ctrl, want at least 1 (the header's vector)")
	assert.Equal(t, CompEntry{Status: Free}, pq.Comp(2), "nothing changed")

	require.NoError(t, pq.Submit(context.Background(), info, &hdr, a), "the request on its own")
	require.NoError(t, pq.Wait(context.Background(), 2))
}
