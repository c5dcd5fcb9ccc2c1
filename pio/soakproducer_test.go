package pio

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// soakSend is what the producers and the manual chips' drivers of a pio soak share
// (TestRVSoakPIOFaultSchedules, TestFaultSoakPIOCloseFromCallbacks): the ledger, the contexts and
// the counters, and what differs between the soaks.
type soakSend struct {
	l      *rvpLedger
	scs    []*SendContext
	ctx    context.Context // the sends' contexts derive from it; its end ends the producers, as stop does
	stop   *atomic.Bool    // set once the test's Close of every context returned
	manual bool            // the contexts have manual chips: producers drive them too, drive starts drivers
	// panicky: one packet in 40 has a Releaser that panics (rvpRec.panicky). creditReturns: one
	// segmented copy in 4 asks for a credit return in its PBC. processAfter: with a manual chip,
	// one packet taken in 3 is followed by a Process of its context.
	panicky, creditReturns, processAfter bool
	// rel returns the Releaser of rec (rec.rel(l), or one around it), drawing from the producer's
	// r if it likes.
	rel func(r *rand.Rand, rec *rvpRec) Releaser
	// parkBound bounds a parked producer's wait for its wake-up, besides ctx (0: ctx alone).
	parkBound                   time.Duration
	accepted, parks, wokenParks *atomic.Int64 // packets taken; parks of the producers' Waiters; those woken
	fail                        func(format string, args ...any)
}

// produce is producer p, on its goroutine: until stop or ctx's end it sends packets of its own
// (ids p<<32 | seq, seq counting the packets taken) on contexts it picks with r, each in one of
// three ways: SendWait under a context that may expire; BufferAlloc and a segmented copy,
// parking its Waiter of the context (ws[i], whose wake-up must signal woke) with QueueWait on
// ErrNoCredits, or, with a manual chip, half the time driving the chip itself instead; or
// BufferAllocWait and one copy. Every packet is in the ledger while it is sent, and taken out if
// it was not taken; a context that answered ErrClosed gets no more (the producer returns once
// every context has). A park that no wake-up ends within parkBound (or before ctx's end) fails
// the soak and ends the producer.
func (s *soakSend) produce(p int, r *rand.Rand, ws []Waiter, woke <-chan struct{}) {
	l, nctx := s.l, len(s.scs)
	closedCtx := make([]bool, nctx)
	for seq := uint64(0); !s.stop.Load() && s.ctx.Err() == nil; {
		ci := r.IntN(nctx)
		for k := 0; closedCtx[ci] && k < nctx; k++ {
			ci = (ci + 1) % nctx
		}
		if closedCtx[ci] {
			return
		}
		sc := s.scs[ci]
		maxN := min(sc.Credits()*BlockSize-8, 1500)
		rec := &rvpRec{id: uint64(p)<<32 | seq, ctx: ci, n: 8 + r.IntN(max(maxN-7, 1)), panicky: s.panicky && r.IntN(40) == 0}
		l.mu.Lock()
		l.recs[rec.id] = rec
		l.mu.Unlock()
		payload := rvpPayload(rec.id, rec.n)
		rel := s.rel(r, rec)
		var err error
		took := false
		switch r.IntN(3) {
		case 0: // SendWait under a context that may expire
			ctx, cancel := context.WithTimeout(s.ctx, time.Duration(1+r.IntN(500))*time.Microsecond)
			k := r.IntN(rec.n)
			err = sc.SendWait(ctx, 0, 0, [][]byte{payload[:k], payload[k:]}, rel)
			cancel()
			took = err == nil
		case 1: // BufferAlloc, a segmented copy, and our own Waiter on no credits
			dw := 2 + (rec.n+3)/4
			for {
				s0 := sc.ReleaseSeq()
				var b *Buf
				b, err = sc.BufferAlloc(dw, rel)
				if err == nil {
					took = true
					var flags PBC
					if s.creditReturns && r.IntN(4) == 0 {
						flags = PBCCreditReturn
					}
					k := r.IntN(rec.n)
					if e := b.CopyStart(CreatePBC(flags, 0, 0, uint32(dw)), payload[:k]); e != nil {
						s.fail("CopyStart: %v", e)
					}
					if e := b.CopyMid(payload[k:]); e != nil {
						s.fail("CopyMid: %v", e)
					}
					if e := b.CopyEnd(); e != nil {
						s.fail("CopyEnd: %v", e)
					}
					break
				}
				if !errors.Is(err, ErrNoCredits) || s.stop.Load() {
					break
				}
				if s.manual && r.IntN(2) == 0 { // drive the chip, or park: a driver's Process wakes
					sc.Process()
					sc.ReturnCredits()
					sc.Process()
					continue
				}
				if !sc.QueueWait(&ws[ci], s0) {
					continue
				}
				s.parks.Add(1)
				if !s.awaitWake(woke) {
					s.fail("producer %d: parked on context %d and never woken (waiting %d, enabled %v, halted %v)", p, ci, sc.Waiting(), sc.Enabled(), sc.Halted())
					sc.CancelWait(&ws[ci])
					return
				}
				s.wokenParks.Add(1)
			}
		default: // BufferAllocWait and one copy
			ctx, cancel := context.WithTimeout(s.ctx, time.Duration(1+r.IntN(2000))*time.Microsecond)
			dw := 2 + (rec.n+3)/4
			var b *Buf
			b, err = sc.BufferAllocWait(ctx, dw, rel)
			cancel()
			if err == nil {
				took = true
				src := payload
				if len(src)%4 != 0 {
					src = append(src, make([]byte, 4-len(src)%4)...)
				}
				if e := b.Copy(CreatePBC(0, 0, 0, uint32(dw)), src); e != nil {
					s.fail("Copy: %v", e)
				}
			}
		}
		if took {
			s.accepted.Add(1)
			seq++
			if s.processAfter && s.manual && r.IntN(3) == 0 {
				sc.Process()
			}
			continue
		}
		l.mu.Lock()
		delete(l.recs, rec.id) // never handed out: never released, never delivered
		l.mu.Unlock()
		switch {
		case errors.Is(err, ErrClosed):
			closedCtx[ci] = true
		case errors.Is(err, ErrNotRunning):
			time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
		case errors.Is(err, ErrNoCredits), errors.Is(err, context.DeadlineExceeded):
		default:
			s.fail("producer %d: send: %v", p, err)
			return
		}
	}
}

// awaitWake waits for a parked producer's wake-up (woke); false: parkBound passed, or ctx ended,
// first.
func (s *soakSend) awaitWake(woke <-chan struct{}) bool {
	var bound <-chan time.Time
	if s.parkBound > 0 {
		bound = time.After(s.parkBound)
	}
	select {
	case <-woke:
		return true
	case <-bound:
	case <-s.ctx.Done():
	}
	return false
}

// drive starts, with manual chips, a driver goroutine per context (counted in bg) that runs its
// chip until stop, sleeping a little after a Process that sent nothing.
func (s *soakSend) drive(bg *sync.WaitGroup) {
	if !s.manual {
		return
	}
	for _, sc := range s.scs {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for !s.stop.Load() {
				if sc.Process() == 0 {
					time.Sleep(5 * time.Microsecond)
				}
			}
		}()
	}
}

// closeAll Closes every context, in order, on a goroutine of its own, or on two at once if twice,
// each Close of context i setting closedAt[i] once it returned (nil, or the soak fails); the
// channel is closed once every Close returned.
func (s *soakSend) closeAll(closedAt []atomic.Bool, twice bool) <-chan struct{} {
	closeEach := func() {
		for i, sc := range s.scs {
			if err := sc.Close(); err != nil {
				s.fail("Close %d: %v", i, err)
			}
			closedAt[i].Store(true)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if twice {
			var cw sync.WaitGroup
			cw.Go(closeEach)
			closeEach()
			cw.Wait()
			return
		}
		closeEach()
	}()
	return done
}
