package ring

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// SeqCount is a sequence counter (Linux seqcount_t, as used by hfi1's head_lock): one writer at
// a time brackets its updates with BeginWrite and EndWrite, which leave the count odd while the
// write section is open; readers take a snapshot with Begin and ask Retry afterwards whether a
// write section began since.
//
// The count is a sync/atomic word. Readers load it atomically. The single writer moves it with
// a load of its own count and a store-release of the count plus one (relaxed.StoreRelease32): a
// plain MOV on amd64 outside -race and purego, no locked instruction, since with one writer the
// increment needs no atomic read-modify-write, and x86-TSO keeps the writer's stores in program
// order (count odd, then the data, then count even), which is all a seqcount's writer needs
// (the kernel's smp_wmb is a compiler barrier on x86; Go's compiler keeps stores in program
// order). Under
// -race, purego and off amd64 the store is a sync/atomic store, so the race detector sees the
// writer's EndWrite synchronize before a reader's later Begin. Neither write is sequentially
// consistent (package doc, O4 and O6). Data protected by the count must itself be read and
// written atomically to be race-clean under the Go memory model; the ring's swHead is.
//
// Writers must be serialised by the caller (the kernel holds head_lock's spinlock; the engine
// runs one completion pass at a time). Readers are wait-free and may run concurrently with the
// writer and with each other. The zero value is ready to use (count 0). A SeqCount must not be
// copied after first use (go vet's copylocks check catches copies).
type SeqCount struct {
	_ noCopy
	// seq: written by the single writer (BeginWrite, EndWrite: store-release of seq+1, odd
	// inside a write section), read by any reader (Begin, Retry: atomic load-acquire).
	seq atomic.Uint32
}

// BeginWrite opens a write section: the count becomes odd (hfi1: write_seqlock's
// write_seqcount_begin). Its store-release comes before the section's later stores-release, so
// whoever sees one of those sees the odd count (O4). One writer at a time. BeginWrite inside an
// open section is a programmer error (a second writer, or a missing EndWrite): the count would
// turn even with the section open, and readers would take its half-written data for whole. It
// panics with an *Error matching ErrOrder and changes nothing.
func (s *SeqCount) BeginWrite() {
	c := s.seq.Load()
	if c&1 != 0 {
		panic(errBeginWrite)
	}
	relaxed.StoreRelease32(&s.seq, c+1)
}

// EndWrite closes the write section: the count becomes even again (write_seqcount_end). Its
// store-release orders every earlier store of the section before the count change. EndWrite with
// no section open is a programmer error: the count would turn odd with no writer to close it, and
// BeginWait (read_seqcount_begin) would wait for ever. It panics with an *Error matching
// ErrOrder and changes nothing.
func (s *SeqCount) EndWrite() {
	c := s.seq.Load()
	if c&1 == 0 {
		panic(errEndWrite)
	}
	relaxed.StoreRelease32(&s.seq, c+1)
}

// errBeginWrite and errEndWrite are the panics of a write section opened twice and of one closed
// unopened: values made once, so that BeginWrite and EndWrite stay within the inliner's budget.
var (
	errBeginWrite = &Error{Op: "BeginWrite", Msg: "a write section is open already", Err: ErrOrder}
	errEndWrite   = &Error{Op: "EndWrite", Msg: "no write section is open", Err: ErrOrder}
)

// Begin returns the count with its low bit cleared, without waiting for an open write section to
// close (hfi1: raw_seqcount_begin, as sdma_check_progress takes it). A snapshot taken inside a
// write section is therefore always reported stale by Retry once the section ends, or at once.
func (s *SeqCount) Begin() uint32 { return s.seq.Load() &^ 1 }

// BeginWait is read_seqcount_begin: it waits (spinning, then yielding) until no write section is
// open and returns the (even) count.
func (s *SeqCount) BeginWait() uint32 {
	for i := 0; ; i++ {
		if v := s.seq.Load(); v&1 == 0 {
			return v
		}
		backoff(i)
	}
}

// Retry reports whether a write section began since the snapshot seq was taken (hfi1:
// read_seqretry): true means data read after the snapshot may be inconsistent.
func (s *SeqCount) Retry(seq uint32) bool { return s.seq.Load() != seq }

// Count returns the raw count (odd while a write section is open). For tests and diagnostics.
func (s *SeqCount) Count() uint32 { return s.seq.Load() }

// noCopy makes go vet's copylocks check flag copies of the struct embedding it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
