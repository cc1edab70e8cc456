package scenarios

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePNG draws the result's i-th plot into a PNG file at path.
func (r *Result) WritePNG(i int, path string) error {
	b, err := r.PNG(i)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// PNG draws the result's i-th plot and returns the PNG file's bytes, for a
// caller that writes them its own way (mrbench replaces the file whole).
func (r *Result) PNG(i int) ([]byte, error) {
	if i < 0 || i >= len(r.Plots) {
		return nil, fmt.Errorf("scenarios: %s has no plot %d", r.Scenario, i)
	}
	spec := r.Plots[i]
	t := r.Table(spec.Table)
	if t == nil {
		return nil, fmt.Errorf("scenarios: no table %q", spec.Table)
	}
	col := func(name string) int {
		for k, c := range t.Columns {
			if c == name {
				return k
			}
		}
		return -1
	}
	xi, yi := col(spec.X), col(spec.Y)
	if xi < 0 || yi < 0 {
		return nil, fmt.Errorf("scenarios: table %q lacks %q or %q", spec.Table, spec.X, spec.Y)
	}
	var sis []int
	if spec.Series != "" {
		for _, name := range strings.Split(spec.Series, "+") {
			k := col(name)
			if k < 0 {
				return nil, fmt.Errorf("scenarios: table %q lacks series column %q", spec.Table, name)
			}
			sis = append(sis, k)
		}
	}
	var order []string
	series := map[string]plotter.XYs{}
	for _, row := range t.Rows {
		x, err1 := strconv.ParseFloat(row[xi], 64)
		y, err2 := strconv.ParseFloat(row[yi], 64)
		if err1 != nil || err2 != nil || math.IsNaN(x+y) || math.IsInf(x+y, 0) {
			continue // a cell without a value (Jain's index of no traffic)
		}
		if spec.LogX && x <= 0 {
			continue // no place on a logarithmic axis
		}
		parts := make([]string, len(sis))
		for k, si := range sis {
			parts[k] = seriesLabel(t.Columns[si], row[si])
		}
		s := strings.Join(parts, " ")
		if _, ok := series[s]; !ok {
			order = append(order, s)
		}
		series[s] = append(series[s], plotter.XY{X: x, Y: y})
	}
	p := plot.New()
	p.Title.Text = spec.Title
	p.X.Label.Text = spec.X
	p.Y.Label.Text = spec.Y
	if spec.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if spec.Fraction {
		p.Y.Min, p.Y.Max = 0, 1
	}
	var args []any
	for _, s := range order {
		args = append(args, s, series[s])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	c, err := draw.NewFormattedCanvas(plotWidth, plotHeight, "png")
	if err != nil {
		return nil, err
	}
	area, leg := legendBeside(p, draw.New(c))
	p.Draw(area)
	leg.Draw()
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The size of a plot's PNG, which holds the legend in a column right of
// the axes.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 3.5 * vg.Inch
)

// placedLegend is a legend with the canvas it is drawn into.
type placedLegend struct {
	plot.Legend
	c draw.Canvas
}

// Draw draws the legend into its canvas.
func (l placedLegend) Draw() { l.Legend.Draw(l.c) }

// legendBeside moves p's legend out of the plot, into a column at the
// right of c, and returns the canvas left for the plot (title, axes and
// data) and the legend with its place, at the top of the column. Inside
// the axes the legend covered some curve wherever it sat: in its default
// corner, bottom right, it hid go-back-N's goodput, which runs along the
// axis there at loss of a few percent, and a curve that rises to the
// right passes through a top corner.
func legendBeside(p *plot.Plot, c draw.Canvas) (draw.Canvas, placedLegend) {
	leg := p.Legend
	p.Legend = plot.NewLegend() // p draws none
	leg.Top, leg.Left = true, true
	em := leg.TextStyle.Rectangle(" ").Max.X
	w := leg.Rectangle(c).Size().X + 2*em
	top := vg.Length(0)
	if p.Title.Text != "" {
		// Level with the top of the axes, below the title.
		top = p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	}
	area := draw.Crop(c, 0, -w, 0, 0)
	col := draw.Crop(c, c.Size().X-w+em, 0, 0, -top)
	return area, placedLegend{Legend: leg, c: col}
}

// seriesLabel is a cell as a legend shows it: a number without the
// table's trailing zeros, with "%" for a percentage column ("0.1%", not
// "0.1000").
func seriesLabel(col, v string) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return v
	}
	v = strconv.FormatFloat(f, 'g', -1, 64)
	if strings.HasSuffix(col, "_pct") {
		v += "%"
	}
	return v
}
