// Package relaxed holds the two cheap stores that gosdma's per-packet path uses where a
// sequentially consistent sync/atomic store or read-modify-write would buy nothing: a counter
// for a single writer (Counter) and a store-release (StoreRelease64, StoreRelease32).
//
// Why: on amd64 every sync/atomic store compiles to XCHG and every Add to LOCK XADD, locked
// instructions that drain the store buffer (about 6 ns each on the project's 2-core machine),
// while a plain MOV costs under 1 ns. Under x86-TSO (Intel SDM vol. 3A §9.2.2; AMD APM vol. 2
// §7.2) a plain MOV store is already a store-release: stores are not reordered with earlier
// loads or stores, and become visible to all other cores in one order. So on amd64, outside
// -race and the purego tag, this package's operations are ordinary Go stores through
// unsafe.Pointer (a plain MOV, or a plain ADD to memory, no LOCK prefix) that inline into the
// caller: no call. The Go compiler keeps them after the caller's earlier loads and stores (the
// argument is in relaxed_amd64.go).
//
// Everywhere else (other architectures, gccgo, the purego tag) and in -race builds, the
// operations are the sync/atomic ones they stand for (v.Add, p.Store): stronger than needed,
// and, under -race, visible to the race detector, which does not see the plain stores as
// synchronisation.
//
// # What is NOT promised
//
// StoreRelease64 and StoreRelease32 are not sequentially consistent. A later load by the same
// goroutine may be satisfied before the store is visible to other cores (the store waits in the
// store buffer). A Dekker-style handshake (I store my flag, then load yours; you store yours,
// then load mine) therefore needs a sequentially consistent operation between the store and the
// load: a sync/atomic Add, CompareAndSwap, Swap or Store, or a mutex. Message passing (write
// the data, then StoreRelease the index; the reader loads the index with sync/atomic, then reads
// the data) needs nothing more.
//
// Counter.Add is not an atomic read-modify-write: TWO GOROUTINES ADDING TO ONE COUNTER AT THE
// SAME TIME LOSE COUNTS. A Counter must have one writer at a time: the only goroutine that ever
// adds to it, or whoever holds the lock that all its writers take. Readers need no lock.
//
// This package imports nothing from the module; any package may use it.
package relaxed

import "sync/atomic"

// Counter is a uint64 statistics counter with ONE WRITER AT A TIME and any number of readers.
// Add is a load, an add and a store-release of the sum, with no lock prefix on amd64: two
// concurrent Adds can both load the same value and one increment is then lost. Load may run
// on any goroutine at any time and returns some value that the counter held (never a torn
// one), and successive Loads on one goroutine never go backwards.
//
// The zero value is a counter at 0. A Counter must not be copied (go vet's copylocks check
// catches copies, through the atomic.Uint64 inside).
type Counter struct {
	// v: written only by the counter's single writer (Add: a plain store-release of the sum on
	// amd64, an atomic add elsewhere), read by anyone (Load: an atomic load).
	v atomic.Uint64
}

// Add adds n to the counter. The caller must be the counter's only writer at this moment (see
// Counter); it does not allocate.
func (c *Counter) Add(n uint64) { add64(&c.v, n) }

// Load returns the counter's value (an atomic load-acquire), safe from any goroutine.
func (c *Counter) Load() uint64 { return c.v.Load() }

// StoreRelease64 stores v to *p with release semantics: every load and store that the calling
// goroutine made before the call happens before any load of *p that observes v. It is NOT
// sequentially consistent (see the package documentation): a load by the caller after the
// call may be satisfied before the store is visible to other goroutines. Readers load *p with
// p.Load. A plain MOV on amd64 outside -race and purego; p.Store(v) elsewhere.
func StoreRelease64(p *atomic.Uint64, v uint64) { store64(p, v) }

// StoreRelease32 is StoreRelease64 for a 32-bit word.
func StoreRelease32(p *atomic.Uint32, v uint32) { store32(p, v) }
