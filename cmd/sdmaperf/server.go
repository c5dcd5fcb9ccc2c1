package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gosdma/gosdma/sdma/udpsink"
	"github.com/gosdma/gosdma/usdma"
)

// errReceiverSaw is returned when the receiver saw duplicated, reordered or corrupted packets, or
// packets numbered past the count the sender's end marker gives.
// Loss alone is reported, not an error: loopback UDP drops datagrams when the receiver's buffer
// is full, which a bandwidth run can cause.
var errReceiverSaw = errors.New("receiver saw duplicated, reordered or corrupted packets")

// checkReceiver turns a receiver's report into the tool's verdict: an error for corruption, a
// warning on stderr for loss.
func checkReceiver(rep *udpsink.Report, stderr io.Writer) error {
	if rep.Dups != 0 || rep.Beyond != 0 || rep.BadChecksum != 0 || rep.BadFrames != 0 {
		return fmt.Errorf("%w: %s", errReceiverSaw, rep)
	}
	if rep.Lost != 0 {
		fmt.Fprintf(stderr, "sdmaperf: warning: the receiver lost %d of %d packets (a full socket receive buffer: see net.core.rmem_max)\n", rep.Lost, rep.Lost+rep.Packets-rep.Dups)
	}
	if !rep.Ended {
		fmt.Fprintln(stderr, "sdmaperf: warning: the receiver saw no end-of-run marker")
	}
	return nil
}

// waitForever is -idle 0's idle timeout: longer than anyone waits.
const waitForever = 100 * 365 * 24 * time.Hour

// runServer is sdmaperf -server: receive one run over loopback UDP, check it, report. With the
// client's -sweep it receives one run per size (the client ends each with its markers) and
// prints a row per size as each ends. A report that could not be written to stdout fails.
//
// A run superseded by a newer one (a datagram of another run before its end markers: the client
// was restarted, or killed and run again) does not end the server: it warns, naming the run it
// gives up on, and serves the new run, whose report decides the exit status. One run: the
// superseded run's report is printed as it stands (text; -json prints the run served only), and
// the new run is received. A sweep: the superseded size is no row, and the sweep starts again
// at its first size, where a restarted client starts. A sweep's client killed between two sizes'
// runs supersedes none (each size is a new run): its run IDs name its sweep and each size's
// index (sweepRunID), so a new sweep's first size starts the sweep again all the same, with a
// warning, and a size out of its sweep's order is refused, naming it. The -json of a sweep holds
// the rows of the sweep served only. The superseded run's packets still arriving
// are stale (udpsink.Report.Stale), noted after the run they arrive in.
func runServer(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	out := &stickyWriter{w: stdout}
	return out.check(runServerTo(ctx, cfg, out, stderr))
}

// runServerTo is runServer writing its report to stdout.
func runServerTo(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	idle, until := cfg.Idle, fmt.Sprintf("%v idle", cfg.Idle)
	if idle == 0 { // -idle 0: wait for the client indefinitely (until Ctrl-C)
		idle, until = waitForever, "Ctrl-C"
	}
	if cfg.HTTP != "" { // /debug/pprof/ and the standard /debug/vars (no device here)
		stopHTTP, err := serveDebug(cfg.HTTP, stderr)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}
	r, err := udpsink.Listen(udpsink.ReceiverConfig{Addr: cfg.UDPAddr, Idle: idle})
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(stderr, "sdmaperf: receiving on %s (stops after %s or at the end-of-run marker)\n", r.Addr(), until)
	if len(cfg.Sizes) > 1 {
		return serveSweep(ctx, cfg, r, stdout, stderr)
	}
	rep, err := r.Run(ctx)
	for err == nil && rep.Superseded { // a newer run: report what arrived of this one, serve that
		if !cfg.JSON {
			writeReceiverReport(stdout, &rep)
		}
		fmt.Fprintf(stderr, "sdmaperf: warning: %v; receiving the new run\n", unended(cfg, &rep))
		noteStale("", &rep, stderr)
		rep, err = r.Run(ctx)
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	if cfg.JSON {
		if err := writeJSONValue(stdout, rep); err != nil {
			return err
		}
	} else {
		writeReceiverReport(stdout, &rep)
	}
	noteStale("", &rep, stderr) // after a superseded run: its client may go on sending
	if ctx.Err() != nil {
		return errInterrupted // Ctrl-C: what arrived so far is printed above
	}
	if rep.Packets == 0 && !rep.Ended {
		return noPackets(cfg, &rep)
	}
	if err := unended(cfg, &rep); err != nil {
		return err
	}
	warnEmptyRun("", &rep, stderr)
	return checkReceiver(&rep, stderr)
}

// unended is the error of a -server run whose packets arrived without the client's end-of-run
// markers: the client stopped (killed, or failed) or went quiet for longer than -idle, or a new
// run began (a client restarted: runServer warns with it and serves the new run). The in-process
// receiver only warns (checkReceiver): there, the client's own error says why; a -server has
// nobody else to say that its report is partial.
func unended(cfg Config, rep *udpsink.Report) error {
	switch {
	case rep.Ended:
		return nil
	case rep.Superseded:
		return fmt.Errorf("the run did not end: %d packets arrived, then a datagram of another run: the client restarted, or a second client sends to this port (-server takes one client at a time)", rep.Packets)
	case cfg.Idle == 0:
		return fmt.Errorf("the run did not end: %d packets arrived, then no end-of-run marker", rep.Packets)
	}
	return fmt.Errorf("the run did not end: %d packets arrived, then no end-of-run marker within %v (the client stopped, or went quiet for longer than -idle: -idle 0 waits without limit)", rep.Packets, cfg.Idle)
}

// noPackets is the error of a run in which no sdmaperf packet arrived: nothing did, or only
// datagrams that are not sdmaperf frames (another program sending to the port).
func noPackets(cfg Config, rep *udpsink.Report) error {
	if rep.BadFrames > 0 {
		return fmt.Errorf("no sdmaperf packets arrived in %v: %d datagrams were not sdmaperf frames (another program sends to this port?)", cfg.Idle, rep.BadFrames)
	}
	return fmt.Errorf("no packets arrived in %v", cfg.Idle)
}

// SizeReport is what the receiver saw of one size of a sweep.
type SizeReport struct {
	Bytes  int            `json:"bytes"` // the packet size the client sent (the payloads carry its pad too)
	Report udpsink.Report `json:"report"`
}

// serveSweep receives a run per size of cfg.Sizes, streaming a row for each. A run whose ID
// names a sweep (sweepRunID, as the client's sizeSink gives them) must be the size due: a new
// sweep's first size starts the sweep again (the client restarted between sizes), any other
// size is an error naming the size it is and the one due.
func serveSweep(ctx context.Context, cfg Config, r *udpsink.Receiver, stdout, stderr io.Writer) error {
	var reps []SizeReport
	if !cfg.JSON {
		fmt.Fprintln(stdout, rule)
		fmt.Fprintf(stdout, " %-8s %-12s %-14s %-9s %-7s %-13s %-18s %s\n", "#bytes", "#packets", "#bytes-recv", "lost", "dups", "bad-checksum", "BW[MiB/sec]", "MsgRate[Mpps]")
	}
	var runErr error
	var sweep uint32 // the client's sweep ID, of its first size's run (parseSweepRunID)
	for i := 0; i < len(cfg.Sizes); i++ {
		size := cfg.Sizes[i]
		rep, err := r.Run(ctx)
		if err != nil || (rep.Packets == 0 && !rep.Ended) {
			runErr = cmp.Or(err, fmt.Errorf("%d bytes: %w", size, noPackets(cfg, &rep)))
			break
		}
		if rep.Superseded { // a restarted client: its sweep starts again at the first size
			if !cfg.JSON {
				fmt.Fprintf(stdout, " (%d bytes: superseded by a new run; the sweep starts again at %d bytes)\n", size, cfg.Sizes[0])
			}
			fmt.Fprintf(stderr, "sdmaperf: warning: %d bytes: %v; the sweep starts again at %d bytes\n", size, unended(cfg, &rep), cfg.Sizes[0])
			noteStale(fmt.Sprintf("%d bytes: ", size), &rep, stderr)
			reps, i = nil, -1
			continue
		}
		if sw, idx, ok := parseSweepRunID(rep.Run); ok {
			if idx == 0 && i > 0 { // a new sweep's first size: the client restarted between sizes
				if !cfg.JSON {
					fmt.Fprintf(stdout, " (%d bytes: a new sweep began; it starts again at %d bytes)\n", size, cfg.Sizes[0])
				}
				fmt.Fprintf(stderr, "sdmaperf: warning: %d bytes: the run is the first size of a new sweep (the client restarted after its %d-byte run); the sweep starts again at %d bytes\n", size, cfg.Sizes[i-1], cfg.Sizes[0])
				reps, i, size = nil, 0, cfg.Sizes[0]
			}
			if idx != i || (i > 0 && sw != sweep) {
				due := "a sweep's first size"
				if i > 0 {
					due = fmt.Sprintf("size #%d of sweep %08x", i+1, sweep)
				}
				runErr = fmt.Errorf("%d bytes: the client's run is size #%d of sweep %08x, where %s was due (a second client sends to this port, or a size's run never arrived)", size, idx+1, sw, due)
				noteStale(fmt.Sprintf("%d bytes: ", size), &rep, stderr)
				break
			}
			sweep = sw
		}
		var row bool
		row, runErr = sweepRow(cfg, size, &rep, stdout, stderr)
		if row {
			reps = append(reps, SizeReport{size, rep})
		}
		noteStale(fmt.Sprintf("%d bytes: ", size), &rep, stderr) // a failed run's too: a second client's packets may be why
		if runErr != nil {
			break
		}
	}
	if cfg.JSON {
		if err := writeJSONValue(stdout, reps); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, rule)
	}
	if ctx.Err() != nil {
		return errInterrupted
	}
	return runErr
}

// sweepRunTag marks a run ID that names a -sweep client's sweep and size: its top 16 bits
// ("SW"), then the sweep's ID (32 bits, drawn at random by the client for its whole sweep), then
// the size's index in the sweep (16 bits, 0 for the first size). A client restarted between two
// sizes' runs supersedes no run (each size is a new run), so the new sweep ID at index 0 is how
// -server tells it from the next size. Other run IDs (a single run's: random) are untagged
// unless their top 16 bits are the tag by chance (1 in 65536).
const sweepRunTag = 0x5357

// sweepRunID is the run ID of size index of sweep.
func sweepRunID(sweep uint32, index int) uint64 {
	return sweepRunTag<<48 | uint64(sweep)<<16 | uint64(uint16(index))
}

// parseSweepRunID returns the sweep ID and size index a sweepRunID carries; ok is false for a
// run ID of another form.
func parseSweepRunID(run uint64) (sweep uint32, index int, ok bool) {
	if run>>48 != sweepRunTag {
		return 0, 0, false
	}
	return uint32(run >> 16), int(uint16(run)), true
}

// sweepRow checks a run of a sweep and prints its row (text); row says whether the run is the
// size's row. A run of another size or one that did not end is an error and no row; one the
// receiver saw corrupted is a row, and then an error.
func sweepRow(cfg Config, size int, rep *udpsink.Report, stdout, stderr io.Writer) (row bool, err error) {
	if err := checkRunSize(size, rep); err != nil {
		return false, err
	}
	if err := unended(cfg, rep); err != nil {
		return false, fmt.Errorf("%d bytes: %w", size, err)
	}
	if !cfg.JSON {
		bw, rate := rates(rep)
		fmt.Fprintf(stdout, " %-8d %-12d %-14d %-9d %-7d %-13d %-18.2f %.6f\n", size, rep.Packets, rep.Bytes, rep.Lost, rep.Dups, rep.BadChecksum, bw, rate)
	}
	warnEmptyRun(fmt.Sprintf("%d bytes: ", size), rep, stderr)
	if err := checkReceiver(rep, stderr); err != nil {
		return true, fmt.Errorf("%d bytes: %w", size, err)
	}
	return true, nil
}

// checkRunSize checks that a run of a sweep is the size its row names: each frame carries the
// packet, padded to 4 bytes as the SDMA engine pads it; or, from -mode msg, a message's packet:
// its 64 header bytes and its part of the padded message (a message longer than -mtu is cut into
// several), so that the frames of m messages of k packets each carry m*(size+64*k) bytes. With
// packets lost or repeated, a -mode msg run is only checked for packets no larger than a
// message's. The client sends no configuration, so this is where a client run of another size
// than the server's -sweep names shows. (A 64-byte packet and a 0-byte message's cannot be
// told apart; nor a message of size s and a packet of s+64: the sweep's earlier sizes tell.)
func checkRunSize(size int, rep *udpsink.Report) error {
	want := uint64(size+3) &^ 3
	n, b := rep.Packets, rep.Bytes
	if n == 0 || b == n*want {
		return nil
	}
	if b > n*usdma.HeaderSize && b <= n*(want+usdma.HeaderSize) {
		data := b - n*usdma.HeaderSize // the messages' padded bytes
		if rep.Lost != 0 || rep.Dups != 0 || (data%want == 0 && n%(data/want) == 0) {
			return nil
		}
	}
	each := fmt.Sprintf("%d bytes each", b/n)
	if b%n != 0 {
		each = fmt.Sprintf("%.1f bytes on average", float64(b)/float64(n))
	}
	return fmt.Errorf("%d bytes: the client's packets carry %s, where a %d-byte packet carries %d: give -server the client's -sweep, -size and -frags",
		size, each, size, want)
}

// noteStale says, after a run's report, how many datagrams of runs already reported arrived
// during it (Report.Stale), which the run does not count: packets of an earlier run (a second
// client sending to this port, whose run was superseded and goes on sending, or a late frame)
// and their end markers. End markers alone are not worth a line: every client repeats its
// markers after its run (udpsink.Sink.Close), so each run of a sweep after the first counts a
// few; JSON has both counts (stale, stale_ends). A superseded run is unended's error.
func noteStale(prefix string, rep *udpsink.Report, stderr io.Writer) {
	if pkts := rep.Stale - rep.StaleEnds; pkts > 0 {
		fmt.Fprintf(stderr, "sdmaperf: %s%d stale datagrams arrived during this run, not counted in it: %d packets and %d end markers of runs already reported (a second client sends to this port, or frames came late)\n",
			prefix, rep.Stale, pkts, rep.StaleEnds)
	}
}

// warnEmptyRun warns of a run that ended with no packet sent: its end markers alone arrived,
// counting no packet (a client whose every delivery was refused, as with -faults sinkfail=1).
// It is a run all the same, the row of its size in a sweep (an earlier version skipped it and took
// the next size's run for it). A run whose packets were all lost is warned of as loss.
func warnEmptyRun(prefix string, rep *udpsink.Report, stderr io.Writer) {
	if rep.Ended && rep.Packets == 0 && rep.Lost == 0 {
		fmt.Fprintf(stderr, "sdmaperf: warning: %sthe client's run ended with no packet sent (it delivered none: see its #failed and sink-errors)\n", prefix)
	}
}

// rates is the receiver's bandwidth (MiB/s) and message rate (Mpps), first packet to last.
func rates(rep *udpsink.Report) (bw, mpps float64) {
	if s := rep.Elapsed.Seconds(); s > 0 {
		return float64(rep.Bytes) / mib / s, float64(rep.Packets) / 1e6 / s
	}
	return 0, 0
}

// writeJSONValue prints v as indented JSON.
func writeJSONValue(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeReceiverReport prints the receiver's per-engine table.
func writeReceiverReport(w io.Writer, rep *udpsink.Report) {
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, " %-7s %-12s %-14s %-12s %-9s %-7s %-13s %-6s\n", "engine", "#packets", "#bytes", "sent", "lost", "dups", "bad-checksum", "ended")
	for _, e := range rep.Engines {
		fmt.Fprintf(w, " %-7d %-12d %-14d %-12d %-9d %-7d %-13d %-6v\n", e.Engine, e.Packets, e.Bytes, e.Sent, e.Lost, e.Dups, e.BadChecksum, e.Ended)
	}
	fmt.Fprintln(w, rule)
	fmt.Fprintln(w, indent(rep.String()))
	if rep.Elapsed > 0 {
		bw, mpps := rates(rep)
		fmt.Fprintf(w, " %.2f MiB/sec, %.6f Mpps at the receiver\n", bw, mpps)
	}
	fmt.Fprintln(w, rule)
}
