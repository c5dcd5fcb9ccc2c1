package main

import (
	"fmt"
	"io"
	"os"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// writeExtras writes what the run asked for beside the report: -H's histogram on stdout, the
// -hist file and the -plot file.
func writeExtras(stdout io.Writer, rep Report) error {
	cfg := rep.Config
	if cfg.Histogram {
		for _, r := range rep.Results {
			fmt.Fprintf(stdout, " Latency histogram of %d bytes, in microseconds:\n", r.Bytes)
			if err := writeHist(stdout, r.hist); err != nil {
				return err
			}
		}
	}
	if cfg.HistFile != "" {
		if err := writeHistFile(cfg.HistFile, rep); err != nil {
			return err
		}
	}
	if cfg.Plot != "" {
		return writePlot(cfg.Plot, rep)
	}
	return nil
}

// writeHist prints h in HdrHistogram's percentile distribution format (Value, Percentile,
// TotalCount, 1/(1-Percentile), then the #[Mean...] footer), values in microseconds.
func writeHist(w io.Writer, h *hdrhistogram.Histogram) error {
	if h == nil {
		h = newHistogram()
	}
	_, err := h.PercentilesPrint(w, 5, 1e3)
	return err
}

// writeHistFile writes -hist: the latency distribution of the run (of all its sizes merged: a
// file in this format holds one distribution). A run that recorded no latency (every packet
// failed or was dropped) is an error, as for -plot, and writes no file.
func writeHistFile(path string, rep Report) error {
	h := newHistogram()
	for _, r := range rep.Results {
		if r.hist != nil {
			h.Merge(r.hist)
		}
	}
	if h.TotalCount() == 0 {
		return fmt.Errorf("-hist: the run recorded no latency")
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-hist: %w", err)
	}
	if err := writeHist(f, h); err != nil {
		_ = f.Close()
		return fmt.Errorf("-hist: %w", err)
	}
	return f.Close()
}
