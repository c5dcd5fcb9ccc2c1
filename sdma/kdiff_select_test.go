package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// A literal model of hfi1's engine selection (sdma.c: sdma_map_init, which lays out struct
// sdma_vl_map, and sdma_select_engine_vl, which reads it), for TestSelectEngineMatchesKernel.
// Engines are their indexes (&dd->per_sdma[i] - dd->per_sdma).

// kVLMap is struct sdma_vl_map: map[i] is struct sdma_map_elem's sde[], its mask
// len(map[i])-1. (Its engine_to_vl back-map, for sdma_engine_get_vl, has no counterpart.)
type kVLMap struct {
	vls      int // roundup_pow_of_two(num_vls)
	mask     int
	elemMask []int
	sde      [][]int
}

func kRoundupPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// kSDMAMapInit is sdma_map_init(dd, port, num_vls, vl_engines) on a device of numSDMA engines:
//
//	if (!vl_engines) {
//		sde_per_vl = dd->num_sdma / num_vls;          /* truncate divide */
//		extra = dd->num_sdma % num_vls;               /* extras */
//		for (i = num_vls - 1; i >= 0; i--, extra--)   /* add extras from last vl down */
//			vl_engines[i] = sde_per_vl + (extra > 0 ? 1 : 0);
//	}
//	newmap->actual_vls = num_vls;
//	newmap->vls = roundup_pow_of_two(num_vls);
//	newmap->mask = (1 << ilog2(newmap->vls)) - 1;
//	for (i = 0; i < TXE_NUM_SDMA_ENGINES; i++) newmap->engine_to_vl[i] = -1;
//	for (i = 0; i < newmap->vls; i++) {
//		int first_engine = engine;                    /* save for wrap around */
//		if (i < newmap->actual_vls) {
//			int sz = roundup_pow_of_two(vl_engines[i]);
//			newmap->map[i]->mask = (1 << ilog2(sz)) - 1;
//			for (j = 0; j < sz; j++) {
//				newmap->map[i]->sde[j] = &dd->per_sdma[engine];
//				if (++engine >= first_engine + vl_engines[i])
//					engine = first_engine;         /* wrap back to first engine */
//			}
//			for (j = 0; j < vl_engines[i]; j++)    /* assign back-map */
//				newmap->engine_to_vl[first_engine + j] = i;
//		} else {
//			newmap->map[i] = newmap->map[i % num_vls]; /* re-use entry without allocating */
//		}
//		engine = first_engine + vl_engines[i];
//	}
//
// (The last line reads vl_engines[i] past num_vls too, a value that then goes unused.)
func kSDMAMapInit(numSDMA, numVLs int, vlEngines []int) *kVLMap {
	if vlEngines == nil {
		vlEngines = make([]int, numVLs)
		perVL, extra := numSDMA/numVLs, numSDMA%numVLs
		for i := numVLs - 1; i >= 0; i, extra = i-1, extra-1 {
			vlEngines[i] = perVL
			if extra > 0 {
				vlEngines[i]++
			}
		}
	}
	m := &kVLMap{vls: kRoundupPow2(numVLs)}
	m.mask = m.vls - 1
	m.elemMask = make([]int, m.vls)
	m.sde = make([][]int, m.vls)
	engine := 0
	for i := 0; i < m.vls; i++ {
		first := engine
		if i < numVLs {
			sz := kRoundupPow2(vlEngines[i])
			m.elemMask[i] = sz - 1
			m.sde[i] = make([]int, sz)
			for j := 0; j < sz; j++ {
				m.sde[i][j] = engine
				if engine++; engine >= first+vlEngines[i] {
					engine = first
				}
			}
			engine = first + vlEngines[i]
		} else {
			m.elemMask[i], m.sde[i] = m.elemMask[i%numVLs], m.sde[i%numVLs]
		}
	}
	return m
}

// kSelectEngineVL is sdma_select_engine_vl with num_vls (the module parameter) at its default,
// HFI1_MAX_VLS_SUPPORTED:
//
//	if (vl >= num_vls) { rval = NULL; goto done; }
//	e = m->map[vl & m->mask];
//	rval = e->sde[selector & e->mask];
//	done:
//	rval = !rval ? &dd->per_sdma[0] : rval;
func (m *kVLMap) kSelectEngineVL(selector uint32, vl uint8) int {
	if int(vl) >= MaxVLs {
		return 0
	}
	i := int(vl) & m.mask
	return m.sde[i][int(selector)&m.elemMask[i]]
}

// TestSelectEngineMatchesKernel builds devices of 1..16 engines on 1..8 VLs, with the default
// split and with random per-VL engine counts (Config.VLEngines, sdma_map_init's vl_engines), and
// compares the engine SelectEngine picks with the model's for every vl 0..255 and random
// selectors (the low bits that the masks read, and the high ones they drop).
func TestSelectEngineMatchesKernel(t *testing.T) {
	rng, n := kdiffRand(0x73656c, 300, 60)
	for c := range n {
		engines := 1 + rng.IntN(MaxEngines)
		numVLs := 1 + rng.IntN(min(engines, MaxVLs))
		var vlEngines []int
		if rng.IntN(2) == 0 {
			vlEngines = make([]int, numVLs)
			left := engines - numVLs // each VL has one; hand out some of the rest
			for i := range vlEngines {
				vlEngines[i] = 1
				if left > 0 {
					k := rng.IntN(left + 1)
					vlEngines[i] += k
					left -= k
				}
			}
		}
		dev, err := NewDevice(Config{Mapper: dma.NewDirect(), Manual: true, Engines: engines, NumVLs: numVLs, VLEngines: vlEngines})
		require.NoError(t, err, "case %d", c)
		require.Equal(t, numVLs, dev.NumVLs())
		m := kSDMAMapInit(engines, numVLs, vlEngines)
		for vl := range 256 {
			for range 8 {
				sel := rng.Uint32()
				if rng.IntN(2) == 0 {
					sel = uint32(rng.IntN(64))
				}
				got := dev.SelectEngine(sel, uint8(vl))
				require.NotNil(t, got, "case %d: vl %d selector %d", c, vl, sel)
				require.Equal(t, m.kSelectEngineVL(sel, uint8(vl)), got.Index(),
					"case %d: %d engines, %d VLs, vl_engines %v: vl %d selector %#x", c, engines, numVLs, vlEngines, vl, sel)
			}
		}
		require.NoError(t, dev.Close())
	}
}
