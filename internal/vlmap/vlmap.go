// Package vlmap lays out the hfi1 driver's VL maps, the one layout its two maps share (hfi1:
// sdma_map_init for struct sdma_vl_map, pio_map_init for struct pio_vl_map): package sdma maps
// VLs to engines with it, package verbs maps VLs to PIO send contexts. Being internal, it is
// reachable only from inside the module.
package vlmap

// Split returns how many of n resources each of numVLs VLs gets when the caller gives no per-VL
// counts (sdma_map_init's and pio_map_init's "truncate divide"): n / numVLs each, the extras
// handed out one a VL from the last VL down.
func Split(n, numVLs int) []int {
	count := make([]int, numVLs)
	per, extra := n/numVLs, n%numVLs
	for i := numVLs - 1; i >= 0; i, extra = i-1, extra-1 {
		count[i] = per
		if extra > 0 {
			count[i]++
		}
	}
	return count
}

// Layout builds the map for per-VL counts: a table of RoundPow2(len(counts)) VL slots, where the
// slots past the actual VLs re-use slot i % len(counts) (the same slice, as the kernel re-uses
// the entry without allocating). VL i's slot is a table of RoundPow2(counts[i]) entries filled
// round robin over the VL's own run of resources, at(first) .. at(first+counts[i]-1), where
// first is the sum of the counts before it: entry j is at(first + j%counts[i]). A VL with no
// resource gets an empty table (the kernel's NULL entries), and uses none of the run.
func Layout[T any](counts []int, at func(int) T) [][]T {
	m := make([][]T, RoundPow2(len(counts)))
	first := 0
	for i := range m {
		if i >= len(counts) {
			m[i] = m[i%len(counts)]
			continue
		}
		if c := counts[i]; c > 0 {
			t := make([]T, RoundPow2(c))
			for j := range t {
				t[j] = at(first + j%c) // wraps back to the VL's first resource
			}
			m[i] = t
		}
		first += counts[i]
	}
	return m
}

// RoundPow2 is the kernel's roundup_pow_of_two for n >= 1: the least power of two at least n. It
// returns 1 for n <= 0.
func RoundPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
