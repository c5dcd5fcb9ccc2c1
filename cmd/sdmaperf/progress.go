package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMin is the shortest run that gets a progress line.
const progressMin = time.Second

// isTerminal reports whether w is a terminal (golang.org/x/term on its file descriptor).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is the live progress line of one size's run, or nothing: every method is a no-op on
// a nil *progress, which is what newProgress returns unless the run is long and stderr a terminal.
type progress struct {
	size     int
	bar      *progressbar.ProgressBar
	byPacket bool // the bar counts packets (-n); otherwise milliseconds (-D)
}

// newProgress returns a progress line for a run of size bytes, or nil when there should be none:
// disabled, not a terminal, or a short run.
func newProgress(cfg Config, size int, stderr io.Writer, expected time.Duration) *progress {
	if !cfg.Progress || !isTerminal(stderr) || expected < progressMin {
		return nil
	}
	p := &progress{size: size, byPacket: cfg.Iterations > 0}
	max := int64(cfg.Duration / time.Millisecond)
	if p.byPacket {
		max = int64(cfg.Iterations)
	}
	p.bar = progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%6d bytes", size)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionShowDescriptionAtLineEnd(),
	)
	return p
}

// update moves the bar to packets done (or elapsed) and shows the current rate.
func (p *progress) update(packets uint64, elapsed time.Duration, mibps float64) {
	if p == nil {
		return
	}
	p.bar.Describe(fmt.Sprintf("%6d bytes %10.2f MiB/sec", p.size, mibps))
	if p.byPacket {
		_ = p.bar.Set64(int64(packets))
	} else {
		_ = p.bar.Set64(int64(elapsed / time.Millisecond))
	}
}

// finish clears the line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	_ = p.bar.Finish()
	_ = p.bar.Clear()
}
