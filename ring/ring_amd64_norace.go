//go:build amd64 && gc && !purego && !race

package ring

import "github.com/gosdma/gosdma/desc"

// Outside -race builds, EnqueueSP and Dequeue publish and release indices with the plain MOV
// stores of their assembly (ring_amd64_norace.s), store-releases under x86-TSO (package doc,
// "Memory ordering", O5); see ring_amd64_race.go.

// enqueueSP is EnqueueSP's worker, EnqueueSP in one assembly call, for the single producer: if
// 1 <= len(ds) <= mask and the room (against the cached head, refreshed from swHead when short)
// covers len(ds), it writes ds at start = reserved as the writers do (skip < 0 taken as 0; AVX or MOVQ stores as curImpl
// says), then stores start+len(ds) to reserved and then to tail with plain MOVs (O1, O5), and
// returns start, nil. No room: 0,
// ErrFull, nothing written (headCache may have been refreshed). A bad batch size, a tail short of
// the reservation index (a reservation unpublished, or a closed word), or curImpl == implGo: it
// tail-calls enqueueSPGo, whose signature it shares.
//
//go:noescape
func enqueueSP(r *Ring, ds []desc.Desc, skip int) (start uint64, err error)

// dequeue is Dequeue's worker, Dequeue in one assembly call: n = min(len(dst), tail - hwHead)
// (the cached tail when it covers len(dst), else a fresh load, cached), the copy of [hwHead, hwHead+n) into dst[0:n]
// (16-byte SSE2 loads and stores, wrap handled), then, with plain MOVs and in this order,
// hwHead = h+n, seq += 1, swHead = h+n, seq += 1 (Dequeue's ordering argument in ring.go); it
// returns n. When curImpl == implGo it tail-calls dequeueGo, whose signature it shares. The
// caller is the single consumer and the single head seqcount writer.
//
//go:noescape
func dequeue(r *Ring, dst []desc.Desc) int

// The assembly tail-calls enqueueSPGo and dequeueGo with its own arguments, which works only
// while each fallback has its assembly's exact signature: these declarations check that at
// compile time, and tell staticcheck, which does not read assembly, that the fallbacks are used.
var (
	_ func(*Ring, []desc.Desc, int) (uint64, error) = enqueueSP
	_ func(*Ring, []desc.Desc, int) (uint64, error) = enqueueSPGo
	_ func(*Ring, []desc.Desc) int                  = dequeue
	_ func(*Ring, []desc.Desc) int                  = dequeueGo
)
