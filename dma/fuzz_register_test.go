package dma

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// modelReg is the model's view of one live registration.
type modelReg struct {
	r         *Registration
	addr      Addr // its bus address, as Register made it
	off, size int  // where its bytes are in the fuzz region
	dir       Direction
}

// FuzzRegister drives a mapper (Direct or IOMMU) with random register, deregister (with and
// without a use in flight), map, unmap (single or batched) and translate calls on one region's
// memory, against a model of what the device may read: Translate succeeds exactly when a live
// mapping or a live registration holds the whole range and allows the access, and then returns
// exactly those bytes (with no capacity beyond them); otherwise it faults. Register refuses exactly
// the overlaps, and a registration has the buffer's bytes and direction, and its CPU address
// (Direct) or one with the same offset in the page (IOMMU); Registered and AddrOf find exactly the
// live registration holding a buffer; a Deregister with a use in flight gives up on its context
// and changes nothing; LiveCount counts both kinds after every step, and Live lists exactly the
// model's mappings and registrations (address, length, direction, kind) after every step that
// changes them; at the end everything is undone and the region is released. The table's index varies with the input's
// length as in FuzzMapper.
func FuzzRegister(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 16, 16, 0, 0, 1, 0, 5, 0, 0, 0, 9, 0, 1, 0, 3, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 32, 0, 0, 0, 0, 3, 0, 16, 0, 40, 0, 1, 0, 5, 0, 0, 0, 7, 0, 1, 0, 0, 0, 2})
	f.Add(slices.Repeat([]byte{0, 1, 2, 3, 5, 0, 7, 1, 4, 6, 0, 9}, 20))
	// A registration from the device (FromDevice) read by the device (a fault) and written (its
	// bytes), on Direct and the IOMMU: the seeds before caught no mutant that dropped the
	// direction check of the registrations' lookups (review rv3).
	for mapper := range uint16(2) {
		var seed []byte
		for _, n := range []uint16{mapper, 0, 16, 99, 2, 5, 0, 0, 1, 0, 0, 5, 0, 0, 1, 0, 1} {
			seed = append(seed, byte(n>>8), byte(n))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzOps{b: data}
		const pages = 8
		region, err := AllocPages(pages)
		if err != nil {
			t.Fatal(err)
		}
		mem := region.Bytes()
		for i := range mem {
			mem[i] = byte(i * 11)
		}
		var m testMapper
		direct := in.next(2) == 0
		if direct {
			m = NewDirect()
		} else if m, err = NewIOMMU(IOMMUConfig{IOVABits: 24}); err != nil {
			t.Fatal(err)
		}
		fuzzIndex(tableOf(t, m), len(data))
		rg := m.(Registrar)
		base := sliceAddr(mem)
		dirs := []Direction{Bidirectional, ToDevice, FromDevice}
		var regs []modelReg
		var maps []modelMapping

		// readable is the model: the bytes at [addr, addr+size) for access, as an offset in mem.
		readable := func(addr Addr, size int, access Direction) (int, bool) {
			for _, x := range maps {
				if addr >= x.addr && addr+Addr(size) <= x.end() && x.dir.Allows(access) {
					return x.off + int(addr-x.addr), true
				}
			}
			for _, x := range regs {
				a := x.addr
				if addr >= a && addr+Addr(size) <= a+Addr(x.size) && x.dir.Allows(access) {
					return x.off + int(addr-a), true
				}
			}
			return 0, false
		}

		// checkLive: Live lists exactly the model's mappings and registrations.
		checkLive := func() {
			want := make([]Mapping, 0, len(maps)+len(regs))
			for _, x := range maps {
				want = append(want, Mapping{x.addr, x.size, x.dir, x.kind})
			}
			for _, x := range regs {
				want = append(want, Mapping{x.addr, x.size, x.dir, KindRegistered})
			}
			if got := m.Live(); !sameMappings(got, want) {
				t.Fatalf("Live() = %v, model %v", got, want)
			}
		}

		for step := 0; in.more() && step < 200; step++ {
			op := in.next(7)
			switch op {
			case 0: // Register
				off := in.next(len(mem))
				size := 1 + in.next(len(mem)-off)
				dir := dirs[in.next(3)]
				r, err := rg.Register(mem[off:off+size], dir)
				overlap := slices.ContainsFunc(regs, func(x modelReg) bool { return off < x.off+x.size && x.off < off+size })
				switch {
				case overlap:
					if !errors.Is(err, ErrInvalid) {
						t.Fatalf("Register of [%d,+%d) over a registration: %v, want ErrInvalid", off, size, err)
					}
				case err != nil:
					t.Fatalf("Register [%d,+%d): %v", off, size, err)
				default:
					if a, ok := r.AddrOf(mem[off : off+1]); !ok || a != r.Addr() {
						t.Fatalf("AddrOf of the first byte: %#x %v, want %#x", a, ok, r.Addr())
					}
					if _, ok := r.AddrOf(mem[off : off+size+min(1, len(mem)-off-size)]); ok && off+size < len(mem) {
						t.Fatal("AddrOf of a buffer running past the registration")
					}
					if b := r.Bytes(); len(b) != size || &b[0] != &mem[off] || r.Dir() != dir {
						t.Fatalf("Register [%d,+%d) %v: a registration of %d bytes %v", off, size, dir, len(b), r.Dir())
					}
					if gmask := Addr(PageSize - 1); direct && r.Addr() != Addr(base)+Addr(off) ||
						r.Addr()&gmask != Addr(base+uintptr(off))&gmask {
						t.Fatalf("Register [%d,+%d): bus address %#x, CPU address %#x", off, size, r.Addr(), base+uintptr(off))
					}
					regs = append(regs, modelReg{r, r.Addr(), off, size, dir})
				}
			case 1: // Deregister, possibly with a use in flight
				if len(regs) == 0 {
					break
				}
				i := in.next(len(regs))
				r := regs[i].r
				if in.next(3) == 0 {
					if !r.Acquire() {
						t.Fatal("Acquire of a live registration refused")
					}
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if err := rg.Deregister(ctx, r); !errors.Is(err, context.Canceled) {
						t.Fatalf("Deregister with a use in flight: %v, want context.Canceled", err)
					}
					r.Release()
					if !r.Live() {
						t.Fatal("a cancelled Deregister left the registration dead")
					}
					break
				}
				if err := rg.Deregister(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if err := rg.Deregister(context.Background(), r); !errors.Is(err, ErrNotMapped) {
					t.Fatalf("second Deregister: %v", err)
				}
				regs = slices.Delete(regs, i, i+1)
			case 2: // MapSingle
				off := in.next(len(mem))
				size := 1 + in.next(min(len(mem)-off, 2*PageSize))
				dir := dirs[in.next(3)]
				a, err := m.MapSingle(mem[off:off+size], dir)
				if err != nil {
					t.Fatalf("MapSingle: %v", err)
				}
				maps = append(maps, modelMapping{addr: a, off: off, size: size, dir: dir, kind: KindSingle})
			case 3: // unmap one or several, batched or not
				if len(maps) == 0 {
					break
				}
				n := 1 + in.next(len(maps))
				var us []Unmap
				for _, x := range maps[:n] {
					us = append(us, Unmap{Addr: x.addr, Size: x.size, Dir: x.dir, Kind: x.kind})
				}
				if in.next(2) == 0 {
					err = m.(BatchUnmapper).UnmapBatch(us)
				} else {
					err = UnmapAll(noBatch{m}, us)
				}
				if err != nil {
					t.Fatalf("unmap of %d live mappings: %v", n, err)
				}
				maps = slices.Delete(maps, 0, n)
			case 4: // Registered of a buffer
				off := in.next(len(mem))
				size := 1 + in.next(min(len(mem)-off, 3*PageSize))
				got := rg.Registered(mem[off : off+size])
				var want *Registration
				for _, x := range regs {
					if off >= x.off && off+size <= x.off+x.size {
						want = x.r
					}
				}
				if got != want {
					t.Fatalf("Registered [%d,+%d) = %p, model %p", off, size, got, want)
				}
			default: // Translate near a registration, a mapping, or anywhere
				var addr Addr
				switch k := in.next(3); {
				case k == 0 && len(regs) > 0:
					x := regs[in.next(len(regs))]
					addr = x.addr + Addr(in.next(x.size+2)) - 1
				case k == 1 && len(maps) > 0:
					x := maps[in.next(len(maps))]
					addr = x.addr + Addr(in.next(x.size+2)) - 1
				default:
					addr = Addr(base) + Addr(in.next(len(mem)))
				}
				size := 1 + in.next(2*PageSize)
				access := dirs[1+in.next(2)]
				b, err := m.Translate(addr, size, access)
				off, ok := readable(addr, size, access)
				if ok {
					if err != nil || len(b) != size || cap(b) != size || &b[0] != &mem[off] {
						t.Fatalf("Translate %#x+%d %v: %v, want the bytes at +%d", addr, size, access, err, off)
					}
				} else if !errors.Is(err, ErrFault) || b != nil {
					t.Fatalf("Translate %#x+%d %v: %v, the model reads nothing there", addr, size, access, err)
				}
			}
			if n := m.LiveCount(); n != len(maps)+len(regs) {
				t.Fatalf("LiveCount %d, model %d mappings + %d registrations", n, len(maps), len(regs))
			}
			if op <= 3 { // the steps that change what is live
				checkLive()
			}
		}
		checkLive()
		for _, x := range regs {
			if err := rg.Deregister(context.Background(), x.r); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range maps {
			if err := m.UnmapSingle(x.addr, x.size, x.dir); err != nil {
				t.Fatal(err)
			}
		}
		if m.LiveCount() != 0 {
			t.Fatalf("LiveCount %d after undoing everything", m.LiveCount())
		}
		if err := region.Close(); err != nil {
			t.Fatalf("region still pinned: %v", err)
		}
	})
}
