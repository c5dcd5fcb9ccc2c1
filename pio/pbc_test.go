package pio

import "testing"

// The PBC and credit-return bits against values worked out by hand from hfi.h's layout.
func TestPBCBitsByHand(t *testing.T) {
	cases := []struct {
		name  string
		got   PBC
		want  uint64
		dw    int
		vl    uint8
		delay uint16
	}{
		// IHCRC none (2 << 26 = 0x0800_0000) | 18 dwords.
		{"plain", CreatePBC(0, 0, 0, 18), 0x0000_0000_0800_0012, 18, 0, 0},
		// DC_INFO (bit 30) | CREDIT_RETURN (bit 25) | IHCRC none | VL 3 << 12 | 0x123 dwords,
		// delay 5 << 32: 0x4000_0000 + 0x0200_0000 + 0x0800_0000 + 0x3000 + 0x123.
		{"flags", CreatePBC(PBCDCInfo|PBCCreditReturn, 5, 3, 0x123), 0x0000_0005_4A00_3123, 0x123, 3, 5},
		// VL and length are masked to 4 and 12 bits: 0x1f → 0xf, 0x1fff → 0xfff.
		{"masked", CreatePBC(0, 0, 0x1f, 0x1fff), 0x0000_0000_0800_FFFF, 0xfff, 0xf, 0},
		// INTR (bit 31) | PACKET_BYPASS (28) | INSERT_BYPASS_ICRC (24) | FECN (22), delay 0xffff.
		{"bypass", CreatePBC(PBCIntr|PBCPacketBypass|PBCInsertBypassICRC|PBCFECN, 0xffff, 0, 2), 0x0000_FFFF_9940_0002, 2, 0, 0xffff},
	}
	for _, c := range cases {
		if uint64(c.got) != c.want {
			t.Errorf("%s: PBC %#016x, want %#016x", c.name, uint64(c.got), c.want)
		}
		if c.got.LengthDWs() != c.dw || c.got.VL() != c.vl || c.got.StaticRate() != c.delay || c.got.InsertHCRC() != IHCRCNone {
			t.Errorf("%s: fields len %d vl %d delay %d ihcrc %d", c.name, c.got.LengthDWs(), c.got.VL(), c.got.StaticRate(), c.got.InsertHCRC())
		}
	}
	// The flag constants themselves.
	flags := map[PBC]uint64{PBCIntr: 0x8000_0000, PBCDCInfo: 0x4000_0000, PBCTestEBP: 0x2000_0000,
		PBCPacketBypass: 0x1000_0000, PBCCreditReturn: 0x0200_0000, PBCInsertBypassICRC: 0x0100_0000,
		PBCTestBadICRC: 0x0080_0000, PBCFECN: 0x0040_0000}
	for f, v := range flags {
		if uint64(f) != v {
			t.Errorf("flag %#x, want %#x", uint64(f), v)
		}
	}
}

func TestFillCodeByHand(t *testing.T) {
	cases := map[uint64]ReleaseCode{
		0x07ff: PRCOK,        // counter only
		0x0800: PRCStatusErr, // CR_STATUS, bit 11
		0x1000: PRCPBC,       // due to PBC, bit 12
		0x2000: PRCThreshold, // due to threshold, bit 13
		0x4000: PRCFillErr,   // due to error, bit 14
		0x8000: PRCSCDisable, // due to force, bit 15: the kernel reports SC_DISABLE
		0xf800: PRCStatusErr | PRCPBC | PRCThreshold | PRCFillErr | PRCSCDisable,
	}
	for hw, want := range cases {
		if got := fillCode(hw); got != want {
			t.Errorf("fillCode(%#x) = %v, want %v", hw, got, want)
		}
	}
	if s := (PRCPBC | PRCSCDisable).String(); s != "pbc|sc-disable" {
		t.Errorf("String %q", s)
	}
	if !PRCSCDisable.Err() || PRCThreshold.Err() || PRCOK.String() != "ok" {
		t.Error("Err/String")
	}
}

func TestContextSizesKernelRules(t *testing.T) {
	// 160 KiB: 2560 blocks, less block 0 = 2559.
	sz, err := ContextSizes(SizeConfig{SDMA: true, RcvContexts: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Kernel: 2 per VL × 8, 3 × (256 + 128) / 64 = 18 blocks. VL15 1 × 102, ACK 1 × 32.
	// User: 1 context, the pool 2559 − (16×18 + 102 + 32) = 2137, clipped to 1024.
	want := [NumTypes]TypeSize{Kernel: {16, 18}, VL15: {1, 102}, ACK: {1, 32}, User: {1, 1024}}
	if sz != want {
		t.Errorf("SDMA on: %+v, want %+v", sz, want)
	}
	// SDMA off: kernel contexts share pool 0 with the users: (2559 − 134) / 17 = 142.
	sz, _ = ContextSizes(SizeConfig{RcvContexts: 2})
	if sz[Kernel] != (TypeSize{16, 142}) || sz[User] != (TypeSize{1, 142}) {
		t.Errorf("SDMA off: %+v", sz)
	}
	// The threshold is capped at PIO_THRESHOLD_CEILING: 3 × (4096 + 128) / 64 = 198.
	sz, _ = ContextSizes(SizeConfig{SDMA: true, PIOThreshold: 10000, NumVLs: 1, RcvContexts: 2})
	if sz[Kernel] != (TypeSize{2, 198}) {
		t.Errorf("ceiling: %+v", sz[Kernel])
	}
	// Counts are clipped to the chip's contexts in type order.
	sz, _ = ContextSizes(SizeConfig{SDMA: true, SendContexts: 17, RcvContexts: 10})
	if sz[Kernel].Count != 16 || sz[VL15].Count != 1 || sz[ACK].Count != 0 || sz[User].Count != 0 {
		t.Errorf("clip: %+v", sz)
	}
	// Over-commit.
	if _, err := ContextSizes(SizeConfig{SDMA: true, MemSize: 64 * 100}); err == nil {
		t.Error("over-committed memory accepted")
	}
	// Thresholds (sc_mtu_to_threshold, sc_percent_to_threshold, sc_alloc's choice).
	if got := MTUToThreshold(18, 10240, 32); got != 1 {
		t.Errorf("MTUToThreshold(18, 10240, 32) = %d", got)
	}
	if got := MTUToThreshold(1024, 4096, 32); got != 1024-66 { // (4096 + 128 + 63) / 64 = 66
		t.Errorf("MTUToThreshold(1024, 4096, 32) = %d", got)
	}
	if DefaultCreditThreshold(ACK, 32, 0, 0) != 16 || DefaultCreditThreshold(User, 1024, 0, 0) != 337 ||
		DefaultCreditThreshold(Kernel, 1024, 4096, 32) != 512 || DefaultCreditThreshold(Kernel, 18, 10240, 32) != 1 {
		t.Error("DefaultCreditThreshold")
	}
}
