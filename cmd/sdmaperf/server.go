package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	if err := checkFrames(rep, stderr); err != nil {
		return err
	}
	if !rep.Ended {
		fmt.Fprintln(stderr, "sdmaperf: warning: the receiver saw no end-of-run marker")
	}
	return nil
}

// checkFrames is checkReceiver but for the end marker, which a -server sweep's row says its own
// way (sweepRow).
func checkFrames(rep *udpsink.Report, stderr io.Writer) error {
	if rep.Dups != 0 || rep.Beyond != 0 || rep.BadChecksum != 0 || rep.BadFrames != 0 {
		return fmt.Errorf("%w: %s", errReceiverSaw, rep)
	}
	if rep.Lost != 0 {
		fmt.Fprintf(stderr, "sdmaperf: warning: the receiver lost %d of %d packets (a full socket receive buffer: see net.core.rmem_max)\n", rep.Lost, rep.Lost+rep.Packets-rep.Dups)
	}
	return nil
}

// waitForever is -idle 0's idle timeout: longer than anyone waits.
const waitForever = 100 * 365 * 24 * time.Hour

// endsWaitIdle0 is how long -idle 0 waits for a run to begin after a single run's end markers
// alone (onlyEnds), -idle's default: with no limit, a run that had ended would be reported at
// Ctrl-C only. A run that began within it is received without limit, as -idle 0 receives any.
const endsWaitIdle0 = 5 * time.Second

// runServer is sdmaperf -server: receive one run over loopback UDP, check it, report. With the
// client's -sweep it receives one run per size (the client ends each with its markers) and
// prints a row per size as each ends. A report that could not be written to stdout fails.
//
// A run superseded by a newer one (a datagram of another run before its end markers: the client
// was restarted, or killed and run again) does not end the server: it warns, naming the run it
// gives up on, and serves the new run, whose report decides the exit status. One run: the
// superseded run's report is printed as it stands (text; -json prints the run served only,
// ServerRun), and the new run is received. A sweep: the superseded size is no row, and the sweep starts again
// at its first size, where a restarted client starts. Each size's run ID names the client's
// sweep and the size's index (sweepRunID), which tells the cases apart: a size superseded by a
// later size of the same sweep is a size whose end markers were all lost (the client went on),
// its row kept and marked not ended, with a warning; a client killed between two sizes' runs
// supersedes none (each size is a new run), and its new sweep's first size starts the sweep
// again all the same, with a warning; a size out of its sweep's order is refused, naming it. A
// size's run that ends without its markers (-idle, Ctrl-C: the last size's markers lost, say)
// is its row, marked, and then an error. The -json of a sweep holds the rows of the sweep
// served only (ServerSweep); both carry the host (Host), as the client's -json does. The
// superseded run's packets still arriving are stale (udpsink.Report.Stale), noted after the run
// they arrive in. End markers alone of a run none of whose packets arrived,
// followed by another run, are an earlier run's, resent by its sink as its client restarted
// (onlyEnds): noted, no report, no row, not a restart, and the run that follows is served; a
// sweep tells them by their sweep (serveSweep's earlier).
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
	for err == nil && (rep.Superseded || onlyEnds(&rep)) {
		if onlyEnds(&rep) { // an earlier run's markers if another run follows (earlierEnds)
			waitAfterEnds(cfg, &rep, stderr)
			next, nerr := runAfterEnds(ctx, cfg, r)
			if !heardOf(&next) { // nothing followed: the run received, its packets lost
				err = cmp.Or(nerr, ctx.Err())
				break
			}
			earlierEnds("", &rep, stderr)
			rep, err = next, nerr
			continue
		}
		// A newer run: report what arrived of this one, serve that.
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
		if err := writeJSONValue(stdout, ServerRun{Tool: "sdmaperf", Host: hostInfo(cfg), Receiver: rep}); err != nil {
			return err
		}
	} else {
		writeReceiverReport(stdout, &rep)
	}
	noteStale("", &rep, stderr) // after a superseded run: its client may go on sending
	if ctx.Err() != nil {
		return errInterrupted // Ctrl-C: what arrived so far is printed above
	}
	if !heardOf(&rep) {
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
	}
	of, where := "", ""
	if engines := markersLost(rep); engines != "" {
		of, where = " of "+engines, ", where the other engines' arrived"
	}
	if cfg.Idle == 0 {
		return fmt.Errorf("the run did not end: %d packets arrived, then no end-of-run marker%s%s", rep.Packets, of, where)
	}
	return fmt.Errorf("the run did not end: %d packets arrived, then no end-of-run marker%s within %v%s (the client stopped, or went quiet for longer than -idle: -idle 0 waits without limit)", rep.Packets, of, cfg.Idle, where)
}

// heardOf reports whether anything of rep's run arrived: a packet or an end marker (an engine
// heard from). A run of no packet whose markers arrived, some or all, was sent (its packets
// lost, or none delivered): it is reported as any run, its loss counted from the markers, not
// as no packets.
func heardOf(rep *udpsink.Report) bool {
	return len(rep.Engines) > 0
}

// onlyEnds reports whether only end markers of rep's run arrived, counting packets none of
// which did (it ended, or a datagram of another run superseded it). Followed by another run,
// such markers are an earlier run's, resent by its sink's Close (udpsink.Sink.Close repeats them
// for 85ms) after the run had been sent to nobody listening: its client restarted on the port,
// or this server started during the run. They are no run received (earlierEnds): a run's
// packets precede its markers on the one socket, so a run of which this receiver heard the end
// only was not sent to it. With nothing after them within -idle (a single run's with -idle 0:
// endsWaitIdle0), or before Ctrl-C, they are the run, its packets lost, reported as any run.
// Markers counting no packet (a client that delivered none, warnEmptyRun) are a whole run,
// reported at once. A run cut by -idle or Ctrl-C before it ended is neither: nothing followed it.
func onlyEnds(rep *udpsink.Report) bool {
	return heardOf(rep) && rep.Packets == 0 && rep.Lost > 0 && (rep.Ended || rep.Superseded)
}

// earlierEnds notes a run of which only the end markers arrived, another run following: an
// earlier run's markers (onlyEnds), counted nowhere.
func earlierEnds(prefix string, rep *udpsink.Report, stderr io.Writer) {
	run := fmt.Sprintf("run %016x", rep.Run)
	if sw, idx, ok := sweepOf(rep); ok {
		run = fmt.Sprintf("size #%d of sweep %08x", idx+1, sw)
	}
	fmt.Fprintf(stderr, "sdmaperf: %sthe end markers of %s arrived (%d packets sent) and none of its packets, then another run: an earlier run's markers, resent (its client restarted, or ran before this server listened); not counted\n",
		prefix, run, rep.Lost)
}

// waitAfterEnds says, as runServerTo starts to wait for a run after end markers alone
// (onlyEnds), that it waits and for how long: the client has ended and printed its results, and
// the server's report comes only when -idle (with -idle 0, endsWaitIdle0) passed with nothing
// after them.
func waitAfterEnds(cfg Config, rep *udpsink.Report, stderr io.Writer) {
	wait := fmt.Sprintf("%v (-idle)", cfg.Idle)
	if cfg.Idle == 0 {
		wait = fmt.Sprintf("%v (-idle 0's limit on this wait)", endsWaitIdle0)
	}
	fmt.Fprintf(stderr, "sdmaperf: the end markers of run %016x arrived (%d packets sent) and none of its packets: waiting %s for another run: if one comes, they were a previous run's, resent; if none, the report of their run follows, its packets missing\n",
		rep.Run, rep.Lost, wait)
}

// runAfterEnds is runServerTo's Run after end markers alone (onlyEnds): with -idle 0, the wait
// for a run to begin is endsWaitIdle0, not without limit; a run begun is received as any.
func runAfterEnds(ctx context.Context, cfg Config, r *udpsink.Receiver) (udpsink.Report, error) {
	if cfg.Idle == 0 {
		return r.RunWithin(ctx, endsWaitIdle0)
	}
	return r.Run(ctx)
}

// noPackets is the error of a Run of which nothing arrived (heardOf false: no packet, no end
// marker): nothing did, or only datagrams that are not sdmaperf frames (another program sending
// to the port).
func noPackets(cfg Config, rep *udpsink.Report) error {
	if rep.BadFrames > 0 {
		return fmt.Errorf("no sdmaperf packets arrived in %v: %d datagrams were not sdmaperf frames (another program sends to this port?)", cfg.Idle, rep.BadFrames)
	}
	return fmt.Errorf("no packets arrived in %v", cfg.Idle)
}

// ServerRun is -server -json's output for one run: the tool and the host as the client's -json
// has them (Report.Tool, Report.Host: the same Host, the -server's flags as given in its args),
// and the receiver's report of the run served, as the client's -json has its in-process
// receiver's (Report.Receiver).
type ServerRun struct {
	Tool     string         `json:"tool"`
	Host     *Host          `json:"host"`
	Receiver udpsink.Report `json:"receiver"`
}

// ServerSweep is -server -sweep -json's output: the tool and the host as ServerRun's, and a row
// per size of the sweep served ([] for none).
type ServerSweep struct {
	Tool  string       `json:"tool"`
	Host  *Host        `json:"host"`
	Sizes []SizeReport `json:"sizes"`
}

// SizeReport is what the receiver saw of one size of a sweep.
type SizeReport struct {
	Bytes  int            `json:"bytes"` // the packet size the client sent (the payloads carry its pad too)
	Report udpsink.Report `json:"report"`
	// NotEnded says why the size's run has no end-of-run marker, "" for a run that ended: its
	// markers were all lost (the same sweep's next size began), none came within -idle, or
	// Ctrl-C; where some engines' markers arrived, it names the engines whose did not. The row counts the packets that arrived; its lost counts the numbers missing below
	// the last one received only, not packets lost after it (the marker's count would have told).
	NotEnded string `json:"not_ended,omitempty"`
}

// sweepServer is serveSweep's state; one goroutine's.
type sweepServer struct {
	cfg            Config
	r              *udpsink.Receiver
	stdout, stderr io.Writer
	reps           []SizeReport // the rows of the sweep served
	sweep          uint32       // the client's sweep ID, of its first size's run (sweepOf)
	// ahead is a run read before its turn: the one after a superseded run, which tells what that
	// run was (endsLost). next returns it first, with aheadErr, its Run's error.
	ahead    *udpsink.Report
	aheadErr error
}

// serveSweep receives a run per size of cfg.Sizes, streaming a row for each. A run whose ID
// names a sweep (sweepOf, as the client's sizeSink gives them) must be the size due: a new
// sweep's first size starts the sweep again (the client restarted between sizes), any other
// size is an error naming the size it is and the one due. A run superseded by a run of the
// same sweep's next size is that size without its end markers (endsLost): its row is kept,
// marked not ended, with a warning; by any other run (a restarted client, a second one), the
// sweep starts again at its first size. A size's run that did not end for want of its markers
// alone (-idle, Ctrl-C) is its row, marked so, and then an error. End markers alone of a size
// of a sweep not served (an earlier sweep's, resent: sweepServer.earlier) are noted and skipped.
func serveSweep(ctx context.Context, cfg Config, r *udpsink.Receiver, stdout, stderr io.Writer) error {
	if !cfg.JSON {
		fmt.Fprintln(stdout, rule)
		fmt.Fprintf(stdout, " %-8s %-12s %-14s %-9s %-7s %-13s %-18s %s\n", "#bytes", "#packets", "#bytes-recv", "lost", "dups", "bad-checksum", "BW[MiB/sec]", "MsgRate[Mpps]")
	}
	s := &sweepServer{cfg: cfg, r: r, stdout: stdout, stderr: stderr}
	runErr := s.serve(ctx)
	if cfg.JSON {
		out := ServerSweep{Tool: "sdmaperf", Host: hostInfo(cfg), Sizes: s.reps}
		if out.Sizes == nil {
			out.Sizes = []SizeReport{} // no row: [], not null
		}
		if err := writeJSONValue(stdout, out); err != nil {
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

// next returns the next run: the one read ahead, or the receiver's next.
func (s *sweepServer) next(ctx context.Context) (udpsink.Report, error) {
	if s.ahead != nil {
		rep, err := *s.ahead, s.aheadErr
		s.ahead, s.aheadErr = nil, nil
		return rep, err
	}
	return s.r.Run(ctx)
}

// serve receives the sweep's runs into s.reps, printing the rows, up to the first that fails.
func (s *sweepServer) serve(ctx context.Context) error {
	cfg := s.cfg
	for i := 0; i < len(cfg.Sizes); i++ {
		size := cfg.Sizes[i]
		rep, err := s.next(ctx)
		cut := err != nil && ctx.Err() != nil && heardOf(&rep) // Ctrl-C mid-run: a row, not ended
		if (err != nil && !cut) || !heardOf(&rep) {
			return cmp.Or(err, s.noRun(i, &rep))
		}
		if s.earlier(ctx, i, &rep) {
			earlierEnds(fmt.Sprintf("%d bytes: ", size), &rep, s.stderr)
			i--
			continue
		}
		lost := rep.Superseded && s.endsLost(ctx, i, &rep)
		if rep.Superseded && !lost { // a restarted client: its sweep starts again at the first size
			s.restart(size, &rep)
			i = -1
			continue
		}
		if sw, idx, ok := sweepOf(&rep); ok {
			if idx == 0 && i > 0 { // a new sweep's first size: the client restarted between sizes
				if !cfg.JSON {
					fmt.Fprintf(s.stdout, " (%d bytes: a new sweep began; it starts again at %d bytes)\n", size, cfg.Sizes[0])
				}
				fmt.Fprintf(s.stderr, "sdmaperf: warning: %d bytes: the run is the first size of a new sweep (the client restarted after its %d-byte run); the sweep starts again at %d bytes\n", size, cfg.Sizes[i-1], cfg.Sizes[0])
				s.reps, i, size = nil, 0, cfg.Sizes[0]
			}
			if idx != i || (i > 0 && sw != s.sweep) {
				due := "a sweep's first size"
				if i > 0 {
					due = fmt.Sprintf("size #%d of sweep %08x", i+1, s.sweep)
				}
				noteStale(fmt.Sprintf("%d bytes: ", size), &rep, s.stderr)
				return fmt.Errorf("%d bytes: the client's run is size #%d of sweep %08x, where %s was due (a second client sends to this port, or a size's run never arrived)", size, idx+1, sw, due)
			}
			s.sweep = sw
		}
		row, ok, err := sweepRow(cfg, size, &rep, lost, s.stdout, s.stderr)
		if ok {
			s.reps = append(s.reps, row)
		}
		noteStale(fmt.Sprintf("%d bytes: ", size), &rep, s.stderr) // a failed run's too: a second client's packets may be why
		if err != nil {
			return err
		}
	}
	if s.ahead != nil && heardOf(s.ahead) { // read after the last size, whose markers were lost: the same sweep's
		sw, idx, _ := sweepOf(s.ahead)
		return fmt.Errorf("%d bytes: the client's next run is size #%d of sweep %08x, past this sweep's %d sizes: give -server the client's -sweep and -size",
			cfg.Sizes[len(cfg.Sizes)-1], idx+1, sw, len(cfg.Sizes))
	}
	return nil
}

// noRun is the error of size index i's run, in which no packet arrived. After a size whose run
// ended, the likeliest cause is a client whose sweep ended there (a smaller -size than the
// server's): the error says so, naming that size as the client's -size, when the size's packets
// showed it (checkRunSize). A run of which no packet arrived (its end markers alone) showed no
// size: the client's sweep may start above the server's first size (another -frags), or the run
// may be another client's (a single run's), so that the hint would name a size the client never
// sent, smaller than its own; the error says that its size is unknown instead.
func (s *sweepServer) noRun(i int, rep *udpsink.Report) error {
	err := fmt.Errorf("%d bytes: %w", s.cfg.Sizes[i], noPackets(s.cfg, rep))
	if i == 0 || rep.BadFrames > 0 || len(s.reps) != i || s.reps[i-1].NotEnded != "" {
		return err
	}
	last, prev := s.cfg.Sizes[i-1], &s.reps[i-1].Report
	if prev.Packets == 0 {
		return fmt.Errorf("%w, after the %d-byte run ended with none of its packets received (%d sent): no packet showed its size, so the client's sweep may not be this one: give -server the client's -sweep, -size and -frags", err, last, prev.Lost)
	}
	return fmt.Errorf("%w, after the %d-byte run ended: if the client's sweep stopped there, give -server the client's -size: -size %d", err, last, last)
}

// endsLost tells what rep was, a run of size index i superseded by a datagram of another run:
// when rep is the size due of the sweep served, or a sweep's first size (which serve takes at
// any i: a client restarted between sizes), it reads the next run (s.ahead, served next), and
// if that is a later size of rep's sweep (the client went on: a restarted client draws a new
// sweep ID and starts at the first size), rep is a size whose end markers were all lost on
// the way (a lossy link: Close repeats them, so rare) and endsLost reports true. Anything else
// (the next run a sweep's first size, another sweep's, a run ID naming no sweep) is a restarted
// client or a second one: false.
func (s *sweepServer) endsLost(ctx context.Context, i int, rep *udpsink.Report) bool {
	sw, idx, ok := sweepOf(rep)
	if !ok || (idx != 0 && (idx != i || sw != s.sweep)) {
		return false // not the size due, nor a sweep's first size (which serve takes at any i)
	}
	nsw, nidx, ok := sweepOf(s.peek(ctx))
	return ok && nsw == sw && nidx > 0
}

// earlier reports whether rep, the run read for size index i, is end markers alone of a sweep
// not served (onlyEnds): an earlier sweep's, resent, which serve notes and skips. A run of the
// sweep served (i > 0) is its size's, whatever came of it. A sweep's first size (a new sweep's
// at any i) is a restarted client's unless the run after it is a later size of its sweep (the
// client went on: its packets were lost); it reads that run ahead (s.ahead, served next). A
// later size of a sweep not served is an earlier sweep's at once: a sweep is received from its
// first size. A run naming no sweep (an older client's) is taken as before: each of its sizes
// is a new run, so the run after it tells nothing.
func (s *sweepServer) earlier(ctx context.Context, i int, rep *udpsink.Report) bool {
	sw, idx, ok := sweepOf(rep)
	if !ok || !onlyEnds(rep) || (i > 0 && sw == s.sweep) {
		return false
	}
	if idx != 0 {
		return true
	}
	next := s.peek(ctx)
	nsw, nidx, nok := sweepOf(next)
	return heardOf(next) && !(nok && nsw == sw && nidx > 0)
}

// peek returns the next run, read ahead into s.ahead (served next) unless it already was.
func (s *sweepServer) peek(ctx context.Context) *udpsink.Report {
	if s.ahead == nil {
		next, err := s.r.Run(ctx)
		s.ahead, s.aheadErr = &next, err
	}
	return s.ahead
}

// restart reports a run of size superseded by a restarted client's (or a second client's) and
// drops the sweep's rows: the sweep starts again at its first size.
func (s *sweepServer) restart(size int, rep *udpsink.Report) {
	if !s.cfg.JSON {
		fmt.Fprintf(s.stdout, " (%d bytes: superseded by a new run; the sweep starts again at %d bytes)\n", size, s.cfg.Sizes[0])
	}
	fmt.Fprintf(s.stderr, "sdmaperf: warning: %d bytes: %v; the sweep starts again at %d bytes\n", size, unended(s.cfg, rep), s.cfg.Sizes[0])
	noteStale(fmt.Sprintf("%d bytes: ", size), rep, s.stderr)
	s.reps = nil
}

// sweepRunTag marks a run ID that names a -sweep client's sweep and size: its top 16 bits
// ("SW"), then the sweep's ID (32 bits, drawn at random by the client for its whole sweep), then
// the size's index in the sweep (16 bits, 0 for the first size). A client restarted between two
// sizes' runs supersedes no run (each size is a new run), so the new sweep ID at index 0 is how
// -server tells it from the next size. The client gives the ID (udpsink.Config.Run), so its
// frames carry udpsink.FlagRunGiven, and -server reads the tag only in a run that has it
// (sweepOf): a run ID drawn at random (a single run's, a sink's of an older client, which set no
// flag) is never taken for a sweep's, where its top 16 bits would be the tag 1 time in 65536.
// (A client that tagged its run IDs before the flag existed is served as an older client: a
// restart between its sizes is not told from the next size.)
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

// sweepOf returns the sweep ID and size index of the run rep reports (parseSweepRunID), if its
// sender gave the run ID (udpsink.Report.RunGiven); ok is false for a run ID drawn at random,
// even one whose top bits are the tag.
func sweepOf(rep *udpsink.Report) (sweep uint32, index int, ok bool) {
	if !rep.RunGiven {
		return 0, 0, false
	}
	return parseSweepRunID(rep.Run)
}

// sweepRow checks a run of a sweep and prints its row (text); ok says whether the run is the
// size's row. A run of another size is an error and no row. A run without its end markers is a
// row marked not ended (SizeReport.NotEnded; a note under the text row): with endsLost (they
// were all lost, the same sweep's next size began) a warning, otherwise (-idle, Ctrl-C) then an
// error (unended). One the receiver saw corrupted is a row, and then an error.
func sweepRow(cfg Config, size int, rep *udpsink.Report, endsLost bool, stdout, stderr io.Writer) (row SizeReport, ok bool, err error) {
	if err := checkRunSize(size, rep); err != nil {
		return SizeReport{}, false, err
	}
	row = SizeReport{Bytes: size, Report: *rep, NotEnded: notEnded(cfg, rep, endsLost)}
	if !cfg.JSON {
		bw, rate := rates(rep)
		fmt.Fprintf(stdout, " %-8d %-12d %-14d %-9d %-7d %-13d %-18.2f %.6f\n", size, rep.Packets, rep.Bytes, rep.Lost, rep.Dups, rep.BadChecksum, bw, rate)
		if row.NotEnded != "" {
			fmt.Fprintf(stdout, " (%d bytes: not ended, %s; a packet lost after the last one received is not counted as lost)\n", size, row.NotEnded)
		}
	}
	prefix := fmt.Sprintf("%d bytes: ", size)
	warnEmptyRun(prefix, rep, stderr)
	if err := checkFrames(rep, stderr); err != nil {
		return row, true, fmt.Errorf("%s%w", prefix, err)
	}
	if endsLost {
		what := "its end markers were all lost"
		if engines := markersLost(rep); engines != "" {
			what = "the end markers of " + engines + " were lost (the other engines' arrived)"
		}
		fmt.Fprintf(stderr, "sdmaperf: warning: %sthe run did not end: %d packets arrived, then the sweep's next size: %s; the row counts the packets that arrived (a packet lost after the last of them is not counted)\n", prefix, rep.Packets, what)
	} else if err := unended(cfg, rep); err != nil {
		return row, true, fmt.Errorf("%s%w", prefix, err)
	}
	return row, true, nil
}

// notEnded is SizeReport.NotEnded of a sweep's run: why it has no end marker, "" if it has;
// where some engines' markers arrived, it names those whose did not (markersLost).
func notEnded(cfg Config, rep *udpsink.Report, endsLost bool) string {
	if rep.Ended {
		return ""
	}
	engines := markersLost(rep)
	switch {
	case endsLost && engines != "":
		return "end markers of " + engines + " lost (the other engines' arrived): the sweep's next size began"
	case endsLost:
		return "end markers all lost: the sweep's next size began"
	case engines == "" && rep.IdleTimeout:
		return fmt.Sprintf("no end marker within -idle %v", cfg.Idle)
	case engines == "":
		return "interrupted before its end marker"
	case rep.IdleTimeout:
		return fmt.Sprintf("no end marker of %s within -idle %v (the other engines' arrived)", engines, cfg.Idle)
	}
	return "interrupted before the end marker of " + engines + " (the other engines' arrived)"
}

// markersLost names the engines of a run without its end whose end markers were lost where
// another engine's arrived ("engine 1", "engines 1, 3", or "the engines not heard from" when
// every engine heard from ended), and is "" when no end marker arrived: they were all lost.
func markersLost(rep *udpsink.Report) string {
	var missing []string
	ended := false
	for _, e := range rep.Engines {
		if e.Ended {
			ended = true
		} else {
			missing = append(missing, strconv.Itoa(e.Engine))
		}
	}
	switch {
	case !ended:
		return ""
	case len(missing) == 0:
		return "the engines not heard from"
	case len(missing) == 1:
		return "engine " + missing[0]
	}
	return "engines " + strings.Join(missing, ", ")
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
