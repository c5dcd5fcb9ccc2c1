package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/udpsink"
)

// errInterrupted is a run ended by Ctrl-C: the results so far were printed; exit 130.
var errInterrupted = errors.New("interrupted")

// runClient runs every size, streaming each size's row, and prints the report. A run whose
// results could not be written to stdout fails (a full disk, a closed pipe): the text tables and
// --output print with fmt, whose errors stickyWriter keeps.
func runClient(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	out := &stickyWriter{w: stdout}
	return out.check(runClientTo(ctx, cfg, out, stderr))
}

// runClientTo is runClient writing its results to stdout.
func runClientTo(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if cfg.Path == pathPIO || cfg.Path == pathAuto {
		return runPaths(ctx, cfg, stdout)
	}
	rep := Report{Tool: "sdmaperf", Config: cfg, Host: hostInfo(cfg)}
	if cfg.HTTP != "" {
		stopHTTP, err := serveDebug(cfg.HTTP, stderr)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	cs, err := openSink(ctx, cfg)
	if err != nil {
		return err
	}
	out := newReporter(cfg, stdout)
	out.begin()
	runErr := runSizes(ctx, cfg, cs, &rep, out, stderr)
	if err := cs.close(&rep); err != nil && runErr == nil {
		runErr = err
	}
	if errors.Is(runErr, errNoReceiver) && len(rep.Results) == 0 {
		return runErr // nothing was measured: perftest's one line, no tables
	}
	rep.Interrupted = errors.Is(runErr, errInterrupted)
	if err := out.end(rep); err != nil {
		return err
	}
	if err := writeExtras(stdout, rep); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	return verdict(cfg, rep, stderr)
}

// runSizes runs every size of cfg in turn, appending the results to rep and streaming them to
// out, and stops at the first size that fails. Ctrl-C (ctx done) keeps the partial result of
// the size it cut short and returns errInterrupted.
func runSizes(ctx context.Context, cfg Config, cs *clientSink, rep *Report, out reporter, stderr io.Writer) error {
	emit := func(res Result) {
		rep.Results = append(rep.Results, res)
		out.row(res)
	}
	for _, size := range cfg.Sizes {
		sink, err := cs.sizeSink(cfg)
		if err != nil {
			return err
		}
		err = runSize(ctx, cfg, size, sink, stderr, emit)
		if cerr := cs.sizeDone(); err == nil && cerr != nil {
			err = fmt.Errorf("udp sink: %w", cerr)
		}
		switch {
		case ctx.Err() != nil:
			return errInterrupted
		case errors.Is(err, errNoReceiver) && len(rep.Results) == 0:
			return err // nobody listened from the start
		case errors.Is(err, errNoReceiver):
			return fmt.Errorf("%d bytes: %w (the receiver took the results above, then stopped: a -server receives one run unless given the client's -sweep)", size, err)
		case err != nil:
			return fmt.Errorf("%d bytes: %w", size, err)
		}
	}
	return nil
}

// verdict fails a run that measured what it was not asked to: halts or failed deliveries
// beyond the injected ones, a receiver that saw corruption.
func verdict(cfg Config, rep Report, stderr io.Writer) error {
	for _, r := range rep.Results {
		if err := checkHalts(cfg, r, stderr); err != nil {
			return err
		}
	}
	for _, r := range rep.Results {
		if r.SinkErrors > r.SinkFailed { // beyond the ones -faults sinkfail asked for
			return fmt.Errorf("%d bytes: %d deliveries to the sink failed, the last: %s", r.Bytes, r.SinkErrors, r.SinkError)
		}
	}
	if rep.Receiver != nil {
		return checkReceiver(rep.Receiver, stderr)
	}
	return nil
}

// clientSink is the -sink the sizes share: nil (discard) or the UDP sink, with the in-process
// receiver when -udp-addr is empty.
type clientSink struct {
	sink     sdma.Sink
	udp      *udpsink.Sink
	recv     *udpsink.Receiver
	recvDone chan struct{} // closed when the receiver's Run returned
	recvRep  udpsink.Report
	recvErr  error
	perSize  bool // a UDP sink per size (sizeSink), for an external receiver and a sweep
	// sweep is the sweep's ID and index the next size's position in it, which sizeSink puts in
	// each size's run ID (sweepRunID) so that -server tells a restarted sweep's first size from
	// the next size of the one it serves. Written and read by the sweep's goroutine only.
	sweep uint32
	index int
}

// sizeSink returns the sink of the next size. A sweep to an external receiver (-server with the
// same -sweep) gets a UDP sink per size, whose end-of-run markers end that size's run at the
// receiver, so that it prints a row per size as perftest's server does.
func (cs *clientSink) sizeSink(cfg Config) (sdma.Sink, error) {
	if !cs.perSize {
		return cs.sink, nil
	}
	ucfg := udpConfig(cfg, cfg.UDPAddr)
	ucfg.Run = sweepRunID(cs.sweep, cs.index)
	udp, err := udpsink.New(ucfg)
	if err != nil {
		return nil, err
	}
	cs.udp = udp
	cs.index++
	return udp, nil
}

// udpConfig is the UDP sink's Config for -sink udp sending to addr: the one sink of a run, or
// each size's of a sweep to an external receiver (sizeSink), alike.
func udpConfig(cfg Config, addr string) udpsink.Config {
	return udpsink.Config{Addr: addr, Engines: cfg.Engines, Batch: cfg.UDPBatch, GSO: cfg.UDPGSO}
}

// sizeDone closes the size's sink when each size has its own (sending its end markers).
func (cs *clientSink) sizeDone() error {
	if !cs.perSize || cs.udp == nil {
		return nil
	}
	udp := cs.udp
	cs.udp = nil
	return udp.Close()
}

// openSink opens -sink: for udp, the sink and, without -udp-addr, a receiver in-process.
func openSink(ctx context.Context, cfg Config) (*clientSink, error) {
	cs := &clientSink{recvDone: make(chan struct{})}
	if cfg.Sink != "udp" {
		return cs, nil
	}
	addr := cfg.UDPAddr
	if addr != "" && len(cfg.Sizes) > 1 {
		cs.perSize = true // sizeSink opens one per size
		cs.sweep = rand.Uint32()
		return cs, nil
	}
	if addr == "" {
		// No idle timeout: the receiver lasts as long as the run, which close ends (its end
		// markers, or closing the receiver). A sink holding a batch of stalled deliveries
		// (-faults sinkstall) sends nothing for the batch's stalls, up to 1024 s.
		var err error
		if cs.recv, err = udpsink.Listen(udpsink.ReceiverConfig{Idle: waitForever}); err != nil {
			return nil, err
		}
		addr = cs.recv.Addr().String()
		go func() {
			defer close(cs.recvDone)
			// Not ctx: at Ctrl-C the sending stops and drains, and the receiver takes that up
			// to the end markers cs.close sends (or stops after close's wait).
			cs.recvRep, cs.recvErr = cs.recv.Run(context.WithoutCancel(ctx))
			cs.recv.Close() // the sink's repeated end markers then fail fast (ECONNREFUSED)
		}()
	}
	udp, err := udpsink.New(udpConfig(cfg, addr))
	if err != nil {
		if cs.recv != nil {
			cs.recv.Close()
			<-cs.recvDone
		}
		return nil, err
	}
	cs.sink, cs.udp = udp, udp
	return cs, nil
}

// close closes the UDP sink (which sends the end-of-run markers), once the in-process receiver
// has taken what reached it (awaitReceiver), and waits for that receiver, whose report goes into
// rep.
func (cs *clientSink) close(rep *Report) error {
	if cs.udp == nil {
		return nil
	}
	if cs.recv != nil {
		cs.awaitReceiver()
	}
	err := cs.udp.Close()
	if err != nil {
		err = fmt.Errorf("udp sink: %w", err)
	}
	if cs.recv == nil {
		return err
	}
	select {
	case <-cs.recvDone:
	case <-time.After(5 * time.Second):
		// Every end marker was lost (a receiver stuck with its buffer full, awaitReceiver gave
		// up): stop the receiver and report what it saw; checkReceiver warns of the missing
		// marker.
		cs.recv.Close()
		<-cs.recvDone
		if errors.Is(cs.recvErr, udpsink.ErrClosed) {
			cs.recvErr = nil
		}
	}
	if cs.recvErr != nil && err == nil {
		err = fmt.Errorf("receiver: %w", cs.recvErr)
	}
	rep.Receiver = &cs.recvRep
	return err
}

// recvStall bounds awaitReceiver: an in-process receiver that read nothing for this long while
// datagrams waited for it is stuck. A variable for the tests.
var recvStall = 5 * time.Second

// awaitReceiver waits, before the sink's Close sends the end-of-run markers, until the in-process
// receiver has taken every datagram that reached its socket: it read as many as the sink sent,
// or none waits unread (udpsink.Receiver.Pending: the others were dropped, a full receive
// buffer). The markers are datagrams too: a receiver starved while the sender ran (and across a
// Ctrl-C) has its buffer full, which dropped every repeat of them (Close repeats them for 85 ms);
// the receiver then saw no end marker, and its report did not count the packets dropped after
// the last it read as lost. It gives up when the receiver read nothing for recvStall while
// datagrams waited, or its Run returned; the markers then go as before.
func (cs *clientSink) awaitReceiver() {
	sent := cs.udp.Stats().Packets // the run is over: no packet is sent after this
	last, since := cs.recv.Received(), time.Now()
	for {
		got := cs.recv.Received()
		if got >= sent {
			return
		}
		if pending, err := cs.recv.Pending(); err != nil || !pending {
			return
		}
		select {
		case <-cs.recvDone:
			return
		default:
		}
		if got != last {
			last, since = got, time.Now()
		} else if time.Since(since) > recvStall {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// checkHalts fails a run whose engines halted beyond what -faults injected: with no halt
// injected, any halt; with haltat alone, more than one halt per engine or one of another cause.
// It warns when haltat asked for a halt and no engine read that many descriptors.
func checkHalts(cfg Config, r Result, stderr io.Writer) error {
	f := cfg.Faults
	if !f.InjectsHalts() {
		if r.Halts > 0 {
			last := "no record"
			if len(r.HaltCauses) > 0 {
				last = r.HaltCauses[0]
			}
			return fmt.Errorf("%d bytes: %d engine halts with no halt injected, the last: %s", r.Bytes, r.Halts, last)
		}
		return nil
	}
	if f.HaltRate > 0 {
		return nil // random causes: a real halt cannot be told from an injected one
	}
	want := f.haltCause().String()
	if r.Halts > uint64(cfg.Engines) || r.HaltsBy[want] != r.Halts {
		return fmt.Errorf("%d bytes: %d engine halts (%s) where haltat injects at most one per engine, %s",
			r.Bytes, r.Halts, haltsText(r.HaltsBy), want)
	}
	if r.Halts == 0 {
		fmt.Fprintf(stderr, "sdmaperf: %d bytes: -faults haltat=%d: no engine halted: none read %d descriptors in the measured run (raise -n or -D)\n",
			r.Bytes, f.HaltAt, f.HaltAt)
	}
	return nil
}

// newMapper builds the -mapper mapper, wrapped in a fault injector when -faults asks.
func newMapper(cfg Config) (dma.Mapper, *dma.FaultInjector, error) {
	var m dma.Mapper
	switch cfg.Mapper {
	case "iommu":
		im, err := dma.NewIOMMU(dma.IOMMUConfig{})
		if err != nil {
			return nil, nil, err
		}
		m = im
	default:
		m = dma.NewDirect()
	}
	if !cfg.Faults.Any() {
		return m, nil, nil
	}
	fi := dma.NewFaultInjector(m)
	return fi, fi, nil
}

// engineOptions maps the flags to the device's strategy and completion mode.
func engineOptions(cfg Config) (sdma.WaitStrategy, sdma.CompletionMode) {
	w := sdma.WaitSpinPark
	switch cfg.Wait {
	case "busy-poll":
		w = sdma.WaitBusyPoll
	case "park":
		w = sdma.WaitPark
	}
	c := sdma.CompleteInterrupt
	if cfg.Completion == "poll" {
		c = sdma.CompletePoll
	}
	return w, c
}
