package vlmap

import (
	"reflect"
	"testing"
)

func id(i int) int { return i }

// TestLayoutAsKernel: Split and Layout give the tables sdma_map_init (and pio_map_init, with
// contexts for engines) builds for n engines on numVLs VLs without vl_engines: the counts n /
// numVLs with the extras from the last VL down, each VL's table a power of two filled round
// robin over its own run, the VL table a power of two whose slots past the actual VLs repeat
// slot i % numVLs. The wants are worked out by hand from the kernel's loops.
func TestLayoutAsKernel(t *testing.T) {
	for _, c := range []struct {
		n, vls int
		counts []int
		want   [][]int
	}{
		{1, 1, []int{1}, [][]int{{0}}},
		{3, 1, []int{3}, [][]int{{0, 1, 2, 0}}},
		{4, 2, []int{2, 2}, [][]int{{0, 1}, {2, 3}}},
		{5, 2, []int{2, 3}, [][]int{{0, 1}, {2, 3, 4, 2}}},
		{4, 3, []int{1, 1, 2}, [][]int{{0}, {1}, {2, 3}, {0}}},
		{7, 5, []int{1, 1, 1, 2, 2}, [][]int{{0}, {1}, {2}, {3, 4}, {5, 6}, {0}, {1}, {2}}},
		{8, 8, []int{1, 1, 1, 1, 1, 1, 1, 1}, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{16, 3, []int{5, 5, 6}, [][]int{
			{0, 1, 2, 3, 4, 0, 1, 2}, {5, 6, 7, 8, 9, 5, 6, 7}, {10, 11, 12, 13, 14, 15, 10, 11},
			{0, 1, 2, 3, 4, 0, 1, 2}}},
		{16, 8, []int{2, 2, 2, 2, 2, 2, 2, 2}, [][]int{
			{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}},
		{1, 2, []int{0, 1}, [][]int{nil, {0}}}, // pio_map_init with fewer contexts than VLs
	} {
		counts := Split(c.n, c.vls)
		if !reflect.DeepEqual(counts, c.counts) {
			t.Errorf("Split(%d, %d) = %v, kernel's %v", c.n, c.vls, counts, c.counts)
			continue
		}
		m := Layout(counts, id)
		if !reflect.DeepEqual(m, c.want) {
			t.Errorf("%d on %d VLs: %v, kernel's %v", c.n, c.vls, m, c.want)
		}
		for i := c.vls; i < len(m); i++ {
			if len(m[i]) > 0 && &m[i][0] != &m[i%c.vls][0] {
				t.Errorf("%d on %d VLs: slot %d is a copy of slot %d, not the same table", c.n, c.vls, i, i%c.vls)
			}
		}
	}
}

// TestLayoutGivenCounts: sdma_map_init with vl_engines (sdma.Config.VLEngines), which need not
// use every engine: each VL's run follows the previous one's, and at maps the indices.
func TestLayoutGivenCounts(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, c := range []struct {
		counts []int
		want   [][]string
	}{
		{[]int{1, 3}, [][]string{{"a"}, {"b", "c", "d", "b"}}},
		{[]int{2, 1, 1}, [][]string{{"a", "b"}, {"c"}, {"d"}, {"a", "b"}}},
		{[]int{3}, [][]string{{"a", "b", "c", "a"}}},
	} {
		if m := Layout(c.counts, func(i int) string { return names[i] }); !reflect.DeepEqual(m, c.want) {
			t.Errorf("counts %v: %v, kernel's %v", c.counts, m, c.want)
		}
	}
}

// kernelMap transcribes sdma_map_init's loops (pio_map_init's are the same, from context 1
// rather than 0): the running engine index wraps back to the VL's first engine, and the VL
// boundary moves on by vl_engines[i].
func kernelMap(n, numVLs int) [][]int {
	vlEngines := make([]int, numVLs)
	per, extra := n/numVLs, n%numVLs
	for i := numVLs - 1; i >= 0; i-- {
		vlEngines[i] = per
		if extra > 0 {
			vlEngines[i]++
		}
		extra--
	}
	vls := RoundPow2(numVLs)
	m := make([][]int, vls)
	engine := 0
	for i := 0; i < vls; i++ {
		first := engine
		if i < numVLs {
			if vlEngines[i] == 0 {
				continue // pio_map_init's NULL entries; sdma needs an engine a VL
			}
			sz := RoundPow2(vlEngines[i])
			m[i] = make([]int, sz)
			for j := 0; j < sz; j++ {
				m[i][j] = engine
				if engine++; engine >= first+vlEngines[i] {
					engine = first
				}
			}
			engine = first + vlEngines[i]
		} else {
			m[i] = m[i%numVLs]
		}
	}
	return m
}

// TestLayoutMatchesKernelLoops compares Layout with the transcription for every engine count
// up to 16 (TXE_NUM_SDMA_ENGINES) and every VL count up to 8.
func TestLayoutMatchesKernelLoops(t *testing.T) {
	for n := 1; n <= 16; n++ {
		for vls := 1; vls <= 8; vls++ {
			if got, want := Layout(Split(n, vls), id), kernelMap(n, vls); !reflect.DeepEqual(got, want) {
				t.Errorf("%d on %d VLs: %v, kernel's %v", n, vls, got, want)
			}
		}
	}
}

func TestRoundPow2(t *testing.T) {
	for n, want := range map[int]int{-1: 1, 0: 1, 1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 8: 8, 9: 16} {
		if got := RoundPow2(n); got != want {
			t.Errorf("RoundPow2(%d) = %d, want %d", n, got, want)
		}
	}
}
