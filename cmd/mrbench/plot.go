package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/metaroce/metaroce/internal/bytesize"
)

// plotFormat returns "png" or "svg" from path's extension, or "" when the
// extension is neither.
func plotFormat(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		return "png"
	case ".svg":
		return "svg"
	}
	return ""
}

// checkPlotName refuses a --plot path whose file name is its extension
// alone (".png", "out/.svg"): plotFormat takes the format from it, but
// the file would be a hidden one named after the format, which no one
// asks for on purpose (and mrbench sim's second plot would be "-2.png").
// The error says what to give instead, with the path's own extension; the
// caller names the flag.
func checkPlotName(path string) error {
	ext := filepath.Ext(path)
	if filepath.Base(path) != ext {
		return nil
	}
	return fmt.Errorf("the file name is the extension %s alone, which would write a hidden file named %s: give the plot a name, such as %s",
		ext, ext, filepath.Join(filepath.Dir(path), "plot"+ext))
}

// writePlot draws bus bandwidth (GB/s, out-of-place) against message size
// (bytes, log scale) with one line per table, i.e. per transport, and per
// data type and operation where a table holds several (-d all, -o all), and
// saves it as PNG or SVG according to path's extension.
func writePlot(path string, title string, tables []Table) error {
	if plotFormat(path) == "" {
		return fmt.Errorf("plot %q: want a .png or .svg file name", path)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "size (bytes)"
	p.Y.Label.Text = "bus bandwidth (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, t := range tables {
		label := t.Transport
		if t.Backend != backendHost && t.Backend != "" {
			label = t.Backend
		}
		for _, s := range seriesOf(t.Rows) {
			name := label
			if s.name != "" {
				name += " " + s.name
			}
			args = append(args, name, s.pts)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("plot %q: no rows to plot", path)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, plotFormat(path))
	if err != nil {
		return fmt.Errorf("plot %q: %w", path, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return fmt.Errorf("plot %q: %w", path, err)
	}
	if err := writeFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// sizeTicks labels a log-scaled byte axis with powers of four and binary
// suffixes (16, 256, 4K, 64K, 1M, ...).
type sizeTicks struct{}

// Ticks implements plot.Ticker.
func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for v := 1.0; v <= max*1.0001; v *= 4 {
		if v < min*0.9999 {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: bytesize.Format(int64(v))})
	}
	if len(ticks) < 2 {
		return plot.LogTicks{}.Ticks(min, max)
	}
	return ticks
}

// series is one line of a plot: a table's rows of one data type and
// operation.
type series struct {
	name string // "" when the table has one kind of row
	pts  plotter.XYs
}

// seriesOf splits rows by data type and operation, in order of first
// appearance, naming each series by what differs between them.
func seriesOf(rows []Row) []series {
	type key struct{ typ, op string }
	var order []key
	byKey := map[key]plotter.XYs{}
	types, ops := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		if r.Bytes <= 0 {
			continue // log scale
		}
		k := key{r.Type, r.RedOp}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], plotter.XY{X: float64(r.Bytes), Y: r.OutOfPlace.BusBW})
		types[r.Type], ops[r.RedOp] = true, true
	}
	out := make([]series, 0, len(order))
	for _, k := range order {
		var parts []string
		if len(types) > 1 {
			parts = append(parts, k.typ)
		}
		if len(ops) > 1 {
			parts = append(parts, k.op)
		}
		out = append(out, series{name: strings.Join(parts, " "), pts: byKey[k]})
	}
	return out
}
