package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodesAs checks that path holds a valid file of its extension's format.
func decodesAs(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	switch filepath.Ext(path) {
	case ".png":
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, "%s is a PNG", path)
		assert.Greater(t, img.Bounds().Dx(), 100)
	case ".svg":
		var root struct{ XMLName xml.Name }
		require.NoError(t, xml.Unmarshal(b, &root), "%s is XML", path)
		assert.Equal(t, "svg", root.XMLName.Local)
	case ".html":
		s := string(b)
		assert.True(t, strings.HasPrefix(s, "<!DOCTYPE html>"))
		i, j := strings.Index(s, "<svg"), strings.LastIndex(s, "</svg>")
		require.True(t, i >= 0 && j > i, "the page holds the SVG")
		var root struct{ XMLName xml.Name }
		require.NoError(t, xml.Unmarshal([]byte(s[i:j+len("</svg>")]), &root))
	}
}

// TestPlotFiles: -plot draws a sweep's rates and one size's latency distribution, in each
// format, into files that decode as what their names say.
func TestPlotFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct {
		name string
		rep  Report
	}{
		{"sweep.svg", goldenReport(t)},
		{"lat.svg", sampleReport(t, "-mode", "lat")},
		{"sweep.png", goldenReport(t)}, // (TestRunPlotAndHist draws a latency PNG)
		{"lat.html", sampleReport(t, "-mode", "lat")},
	} {
		path := filepath.Join(dir, f.name)
		require.NoError(t, writePlot(path, f.rep))
		decodesAs(t, path)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "Message rate", "the sweep draws the message rate")
	b, err = os.ReadFile(filepath.Join(dir, "lat.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "99.9%", "the latency plot's axis is in percentiles")

	require.Error(t, writePlot(filepath.Join(dir, "none.svg"), Report{}), "nothing to draw")
}

// TestRunPlotAndHist: a real run writes its plot and its histogram file; -H prints the
// histogram in HdrHistogram's format.
func TestRunPlotAndHist(t *testing.T) {
	dir := t.TempDir()
	plot, hist := filepath.Join(dir, "lat.png"), filepath.Join(dir, "lat.hgrm")
	code, _, errOut := runTool(t, "-mode", "lat", "-n", "300", "-warmup", "0", "-size", "64", "-frags", "1", "-plot", plot, "-hist", hist)
	require.Equal(t, exitOK, code, errOut)
	decodesAs(t, plot)
	b, err := os.ReadFile(hist)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), " Value\tPercentile\tTotalCount\t1/(1-Percentile)\n\n"), string(b))
	assert.Regexp(t, `#\[Max     = +[0-9.]+, Total count    = +300\]`, string(b))

	code, out, errOut := runTool(t, "-H", "-n", "100", "-warmup", "0", "-size", "64", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, " Latency histogram of 64 bytes, in microseconds:\n Value\tPercentile")
}

// TestHistogramGolden: -H's text for a known distribution (1..1000 us).
func TestHistogramGolden(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, writeHist(&out, sampleReport(t).Results[0].hist))
	golden(t, "hist.hgrm", out.String())
}
