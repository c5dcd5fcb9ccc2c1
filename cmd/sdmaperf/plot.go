package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot size.
const (
	plotW = 7 * vg.Inch
	plotH = 6 * vg.Inch
)

// writePlot draws rep to path (-plot): for a sweep, bandwidth and message rate against size
// (-mode bw, msg) or the median and 99th percentile latency against size (-mode lat, as
// ib_send_lat -a's rows); for one size, the latency distribution as HdrHistogram's plotters draw it (latency against
// percentile, the percentile axis logarithmic in 1/(1-p), so the tail is spread out). The
// format follows the extension: .svg, .png, or .html (the SVG inside a page, with the command).
func writePlot(path string, rep Report) error {
	plots, err := plotsOf(rep)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	ext := strings.ToLower(filepath.Ext(path))
	if err := renderPlots(&buf, ext, plots); err != nil {
		return err
	}
	if ext == ".html" {
		page := "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sdmaperf</title></head><body>\n<p><code>sdmaperf " +
			html.EscapeString(strings.Join(rep.Config.Args, " ")) + "</code></p>\n" + buf.String() + "\n</body></html>\n"
		buf.Reset()
		buf.WriteString(page)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("-plot: %w", err)
	}
	return nil
}

// renderPlots draws the plots one above the other in the format of ext.
func renderPlots(w io.Writer, ext string, plots []*plot.Plot) error {
	h := plotH / 2 * vg.Length(len(plots))
	if len(plots) == 1 {
		h = plotH * 2 / 3
	}
	var c vg.CanvasWriterTo
	switch ext {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.New(plotW, h)}
	default: // .svg, .html
		c = vgsvg.New(plotW, h)
	}
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, draw.New(c))
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	_, err := c.WriteTo(w)
	return err
}

// plotsOf chooses what to draw: a sweep's rates (a latency sweep's latencies), or one size's
// latency distribution.
func plotsOf(rep Report) ([]*plot.Plot, error) {
	if len(rep.Results) == 0 {
		return nil, fmt.Errorf("-plot: no result to draw")
	}
	if len(rep.Results) > 1 && rep.Config.Mode == ModeLat {
		if p, err := latencySweepPlot(rep); p != nil || err != nil {
			return []*plot.Plot{p}, err
		}
	}
	if len(rep.Results) > 1 && !rep.Config.RunInfinitely && rep.Config.Mode != ModeLat {
		return sweepPlots(rep)
	}
	p, err := latencyPlot(rep)
	return []*plot.Plot{p}, err
}

// sweepPlots: bandwidth and message rate against packet size, log2 size axis.
func sweepPlots(rep Report) ([]*plot.Plot, error) {
	unit, k := bwUnit(rep.Config)
	bw, rate := make(plotter.XYs, len(rep.Results)), make(plotter.XYs, len(rep.Results))
	var ticks []plot.Tick
	for i, r := range rep.Results {
		bw[i] = plotter.XY{X: float64(r.Bytes), Y: r.BWAvg * k}
		rate[i] = plotter.XY{X: float64(r.Bytes), Y: r.MsgRate}
		ticks = append(ticks, plot.Tick{Value: float64(r.Bytes), Label: sizeLabel(r.Bytes)})
	}
	title := runTitle(rep.Config)
	pb := plot.New()
	pb.Title.Text = "Bandwidth: " + title
	pb.Y.Label.Text = "BW average [" + unit + "]"
	pm := plot.New()
	pm.Title.Text = "Message rate: " + title
	pm.Y.Label.Text = "Mpps"
	for _, p := range []*plot.Plot{pb, pm} {
		p.X.Label.Text = "packet size [bytes]"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Add(plotter.NewGrid())
	}
	if err := plotutil.AddLinePoints(pb, bw); err != nil {
		return nil, err
	}
	if err := plotutil.AddLinePoints(pm, rate); err != nil {
		return nil, err
	}
	return []*plot.Plot{pb, pm}, nil
}

// latencySweepPlot: a -mode lat sweep's median (perftest's t_typical) and 99th percentile
// latency against packet size, log2 size axis: what ib_send_lat -a measures. Sizes that recorded
// no latency are left out; with fewer than two left it returns nil (a log axis needs two X
// values), and plotsOf draws the distribution instead.
func latencySweepPlot(rep Report) (*plot.Plot, error) {
	var p50, p99 plotter.XYs
	var ticks []plot.Tick
	for _, r := range rep.Results {
		if r.Latency.Count == 0 {
			continue
		}
		p50 = append(p50, plotter.XY{X: float64(r.Bytes), Y: r.Latency.P50})
		p99 = append(p99, plotter.XY{X: float64(r.Bytes), Y: r.Latency.P99})
		ticks = append(ticks, plot.Tick{Value: float64(r.Bytes), Label: sizeLabel(r.Bytes)})
	}
	if len(p50) < 2 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Latency: " + runTitle(rep.Config)
	p.X.Label.Text = "packet size [bytes]"
	p.Y.Label.Text = "latency [us]"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if slices.IndexFunc(p50, func(xy plotter.XY) bool { return xy.Y <= 0 }) < 0 {
		// Logarithmic, so that a median of a microsecond shows beside a tail of a hundred.
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLinePoints(p, "median (t_typical)", p50, "99th percentile", p99); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// latencyPlot: latency against percentile, one line per result, HdrHistogram's convention.
func latencyPlot(rep Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency by percentile: " + runTitle(rep.Config)
	if rep.Config.Mode == ModeBW {
		p.Title.Text += fmt.Sprintf("\n(bw mode: submit to completion at depth %d, i.e. queueing)", rep.Config.Depth)
	}
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency [us]"
	p.X.Scale = plot.LogScale{}
	maxInv := 10.0
	var lines []any
	for _, r := range rep.Results {
		if r.hist == nil || r.hist.TotalCount() == 0 {
			continue
		}
		var xys plotter.XYs
		for _, b := range r.hist.CumulativeDistributionWithTicks(5) {
			q := b.Quantile / 100
			if q >= 1 {
				break // 1/(1-q) is infinite: the max is the last point before
			}
			xys = append(xys, plotter.XY{X: 1 / (1 - q), Y: float64(b.ValueAt) / 1e3})
			maxInv = max(maxInv, 1/(1-q))
		}
		if len(xys) < 2 {
			// Every sample in one bucket (one packet, or equal latencies): the points are at the
			// 100th percentile, which the axis cannot place, and a line of fewer than two X
			// values leaves the log scale no range (gonum panics). The distribution is flat.
			v := float64(r.hist.Max()) / 1e3
			xys = plotter.XYs{{X: 1, Y: v}, {X: maxInv, Y: v}}
		}
		lines = append(lines, fmt.Sprintf("%d bytes", r.Bytes), xys)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("-plot: the run recorded no latency")
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return nil, err
	}
	p.X.Tick.Marker = plot.ConstantTicks(percentileTicks(maxInv))
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// percentileTicks labels the 1/(1-p) axis in percentiles: 0%, 90%, 99%, 99.9%...
func percentileTicks(maxInv float64) []plot.Tick {
	ticks := []plot.Tick{{Value: 1, Label: "0%"}}
	for n, inv := 1, 10.0; inv <= maxInv*10; n, inv = n+1, inv*10 {
		ticks = append(ticks, plot.Tick{Value: inv, Label: strconv.FormatFloat(100-100/inv, 'f', max(0, n-2), 64) + "%"})
	}
	return ticks
}

// sizeLabel writes a size as 64, 4K, 8K.
func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + "K"
	}
	return strconv.Itoa(n)
}

// runTitle names the run: mode, engines, producers, sink.
func runTitle(cfg Config) string {
	return fmt.Sprintf("sdmaperf -mode %s, %d engine(s), %d producer(s), sink %s", cfg.Mode, cfg.Engines, cfg.Producers, cfg.Sink)
}
