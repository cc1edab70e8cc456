package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// TestLegendBeside: the legend sits in a column right of the plot's
// canvas, top-aligned below the title, and fits there, so it covers no
// curve whatever the data: inside the axes, in gonum's default corner
// (bottom right), it hid the loss plot's go-back-N curve.
func TestLegendBeside(t *testing.T) {
	p := plot.New()
	p.Title.Text = "goodput vs random loss (fraction of line-rate payload)"
	require.NoError(t, plotutil.AddLinePoints(p,
		"metaroce", plotter.XYs{{X: 0, Y: 1}, {X: 10, Y: 0.9}},
		"rocev2-pfc", plotter.XYs{{X: 0, Y: 1}, {X: 10, Y: 0.004}}))
	c := draw.New(vgimg.New(plotWidth, plotHeight))
	area, leg := legendBeside(p, c)
	assert.Equal(t, c.Min, area.Min)
	assert.Less(t, area.Max.X, leg.c.Min.X, "the legend's column starts right of the plot")
	assert.Equal(t, c.Max.X, leg.c.Max.X)
	assert.Less(t, leg.c.Max.Y, c.Max.Y, "below the title")
	r := leg.Rectangle(leg.c)
	assert.GreaterOrEqual(t, r.Min.X, leg.c.Min.X)
	assert.LessOrEqual(t, r.Max.X, leg.c.Max.X, "the legend fits its column")
	assert.Equal(t, leg.c.Max.Y, r.Max.Y, "at the top")
	assert.Zero(t, p.Legend.Rectangle(area).Size().X, "the plot draws no legend of its own")
}
