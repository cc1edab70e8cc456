package scenarios

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePNG draws the result's i-th plot into a PNG file at path.
func (r *Result) WritePNG(i int, path string) error {
	if i < 0 || i >= len(r.Plots) {
		return fmt.Errorf("scenarios: %s has no plot %d", r.Scenario, i)
	}
	spec := r.Plots[i]
	t := r.Table(spec.Table)
	if t == nil {
		return fmt.Errorf("scenarios: no table %q", spec.Table)
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
		return fmt.Errorf("scenarios: table %q lacks %q or %q", spec.Table, spec.X, spec.Y)
	}
	var sis []int
	if spec.Series != "" {
		for _, name := range strings.Split(spec.Series, "+") {
			k := col(name)
			if k < 0 {
				return fmt.Errorf("scenarios: table %q lacks series column %q", spec.Table, name)
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
		// The curves of a size sweep rise to the right.
		p.Legend.Top, p.Legend.Left = true, true
	}
	var args []any
	for _, s := range order {
		args = append(args, s, series[s])
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 3.5*vg.Inch, path)
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
