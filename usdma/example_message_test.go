package usdma_test

import (
	"errors"
	"fmt"

	"github.com/gosdma/gosdma/usdma"
)

// Message computes what PSM computes before its writev: a 20000-byte message in 8 KiB
// fragments is three packets (8192, 8192, 3616 bytes), the first one's length in the header
// template (PBC length: 64 header bytes and 8192 payload bytes in dwords; LRH length: from the
// LRH on, ICRC included). The request's io vectors are the header and the message's two pieces.
func ExampleMessage() {
	part1, part2 := make([]byte, 12000), make([]byte, 8000)
	tmpl := usdma.Template{VL: 1, DLID: 7, SLID: 3, Opcode: 0xc0, PKey: 0xffff, DestQP: 0x80, PSN: 100}
	info, hdr := usdma.Message(5, 8192, tmpl, part1, part2)

	fmt.Println("slot", info.CompIdx, "packets", info.NPkts, "frag", info.FragSize)
	fmt.Println("opcode", info.Opcode() == usdma.Eager, "iovcnt", info.IOVCnt())
	fmt.Println("first packet: PBC", hdr.PBCLenDWs(), "dwords, LRH", hdr.PktLen(), "dwords, PSN", hdr.PSN())
	// Output:
	// slot 5 packets 3 frag 8192
	// opcode true iovcnt 3
	// first packet: PBC 2064 dwords, LRH 2063 dwords, PSN 100
}

// Ctrl packs a request's opcode and vector count into ReqInfo.Ctrl the way the uapi lays it out
// (opcode in bits 7:4, iovcnt in 15:8, header vector included); ReqInfo's Opcode and IOVCnt read
// it back (hfi1: req_opcode, req_iovcnt).
func ExampleCtrl() {
	info := usdma.ReqInfo{Ctrl: usdma.Ctrl(usdma.Eager, 2), NPkts: 1, FragSize: 4096, CompIdx: 0}
	fmt.Printf("ctrl %#04x: eager %v, %d vectors\n", info.Ctrl, info.Opcode() == usdma.Eager, info.IOVCnt())
	// Output:
	// ctrl 0x0310: eager true, 3 vectors
}

// Template.Header builds a header template for a first packet of the given payload length; a
// length whose header lengths do not fit their fields (outside 0..MaxFirstLen) is refused with
// ErrInvalid.
func ExampleTemplate_Header() {
	tmpl := usdma.Template{VL: 1, DLID: 7, SLID: 3, Opcode: 0xc0, PKey: 0xffff, DestQP: 0x80, PSN: 100}
	hdr, err := tmpl.Header(4096)
	fmt.Println("PBC", hdr.PBCLenDWs(), "dwords, LRH", hdr.PktLen(), "dwords,", err)
	_, err = tmpl.Header(usdma.MaxFirstLen + 1)
	fmt.Println(errors.Is(err, usdma.ErrInvalid), err)
	// Output:
	// PBC 1040 dwords, LRH 1039 dwords, <nil>
	// true usdma: Template.Header: first packet length 16317 out of 0..16316: usdma: invalid request
}
