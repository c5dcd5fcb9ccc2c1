package usdma

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestSubmitRefusalOrderOnBusySlotAsKernel: hfi1_user_sdma_process_request checks the
// completion index (-EINVAL), the io vector count (req_iovcnt < 1 or > dim: -EINVAL) and a zero
// fragsize (-EINVAL) before it claims the slot (test_and_set_bit on req_in_use: -EBADSLT), and
// everything else after (EXPECTED, npkts, MAX_VECTORS_PER_REQ, the template's opcode, SC/VL,
// LNH; check_header_template's fragsize and length checks on packet 0). So on a slot in use
// the first three are -EINVAL and every other bad request is -EBADSLT, whatever else is wrong
// with it. Submit runs the later checks before its claim (nothing changes on a refusal) but
// after the slot's check: the table is the kernel's errno for each, on slot 1 held by a request
// still in flight, and nothing of the busy slot changes.
func TestSubmitRefusalOrderOnBusySlotAsKernel(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev, Slots: 8, MTU: 4096})
	data := pattern(10000, 1)
	good, hdr := Message(1, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), good, &hdr, data)) // slot 1 in flight: nobody drives the engine
	busy := pq.Comp(1)
	require.Equal(t, Queued, busy.Status)

	const (
		eINVAL  = "EINVAL"  // before the claim
		eBADSLT = "EBADSLT" // the claim
	)
	for _, tc := range []struct {
		name string
		info ReqInfo
		hdr  Header
		vecs [][]byte
		want string // the kernel's errno
	}{
		// user_sdma.c: "if (info.comp_idx >= hfi1_sdma_comp_ring_size) return -EINVAL;" (slot 8
		// is another slot, out of range)
		{"comp idx out of range", with(good, func(i *ReqInfo) { i.CompIdx = 8 }), hdr, [][]byte{data}, eINVAL},
		// "if (req_iovcnt(info.ctrl) < 1 || req_iovcnt(info.ctrl) > dim) return -EINVAL;"
		{"iovcnt 0", with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, -1) }), hdr, [][]byte{data}, eINVAL},
		{"iovcnt over dim", with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), hdr, [][]byte{data}, eINVAL},
		// "if (!info.fragsize) return -EINVAL;"
		{"fragsize 0", with(good, func(i *ReqInfo) { i.FragSize = 0 }), hdr, [][]byte{data}, eINVAL},
		// "if (test_and_set_bit(info.comp_idx, pq->req_in_use)) return -EBADSLT;" before:
		{"expected", with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Expected, 1) }), hdr, [][]byte{data}, eBADSLT},
		{"npkts 0", with(good, func(i *ReqInfo) { i.NPkts = 0 }), hdr, [][]byte{data}, eBADSLT},
		{"npkts wrong", with(good, func(i *ReqInfo) { i.NPkts = 4 }), hdr, [][]byte{data}, eBADSLT},
		{"empty vector", with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), hdr, [][]byte{data, {}}, eBADSLT},
		{"9 vectors", with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 9) }), hdr, make9(data), eBADSLT},
		{"verbs opcode", good, withH(hdr, func(h *Header) { h.setBTH(0, 0x04<<24) }), [][]byte{data}, eBADSLT},
		{"VL 9", good, withH(hdr, func(h *Header) { h.setPBC(0, 9<<12|h.pbc(0)&0xfff) }), [][]byte{data}, eBADSLT},
		{"SC != VL", good, withH(hdr, func(h *Header) { h.setLRH(0, 1<<12|2) }), [][]byte{data}, eBADSLT},
		{"GRH", good, withH(hdr, func(h *Header) { h.setLRH(0, 3) }), [][]byte{data}, eBADSLT},
		// check_header_template, on packet 0 after the claim
		{"fragsize not 64s", with(good, func(i *ReqInfo) { i.FragSize = 4000 }), hdr, [][]byte{data}, eBADSLT},
		// (no MTU check in the kernel: sdma_txinit fails an over-long packet later, -EMSGSIZE)
		{"fragsize over MTU", with(good, func(i *ReqInfo) { i.FragSize = 8192 }), hdr, [][]byte{data}, eBADSLT},
		{"template too long", good, withH(hdr, func(h *Header) { h.setLRH(2, uint16(lrhLen(8192)/4)) }), [][]byte{data}, eBADSLT},
		// user_sdma_send_pkts: "Request has data but pkt len is 0" (-EFAULT), after the claim
		{"template no payload", good, withH(hdr, func(h *Header) { h.setLRH(2, 15) }), [][]byte{data}, eBADSLT},
	} {
		err := pq.Submit(context.Background(), tc.info, &tc.hdr, tc.vecs...)
		var re *ReqError
		require.ErrorAs(t, err, &re, tc.name)
		got := eINVAL
		if errors.Is(err, ErrSlotInUse) {
			got = eBADSLT
		} else {
			require.ErrorIs(t, err, ErrInvalid, tc.name)
		}
		assert.Equal(t, tc.want, got, "%s: %v", tc.name, err)
		assert.Equal(t, busy, pq.Comp(1), "%s: the busy slot changed", tc.name)
	}
	assert.EqualValues(t, 1, pq.Stats().Requests)
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
}
