package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSeriesOfSplitsTypesAndOps: a table of several data types (or ops)
// gives one plot line each, named by what differs; a table of one kind
// gives one unnamed line, and rows of 0 bytes stay off the log scale.
func TestSeriesOfSplitsTypesAndOps(t *testing.T) {
	row := func(b int64, typ, op string) Row { return Row{Bytes: b, Type: typ, RedOp: op} }
	one := seriesOf([]Row{row(0, "float", "sum"), row(8, "float", "sum"), row(16, "float", "sum")})
	if assert.Len(t, one, 1) {
		assert.Equal(t, "", one[0].name)
		assert.Len(t, one[0].pts, 2)
	}
	mixed := seriesOf([]Row{row(8, "float", "sum"), row(8, "half", "sum"), row(16, "float", "sum"), row(16, "half", "sum")})
	if assert.Len(t, mixed, 2) {
		assert.Equal(t, "float", mixed[0].name)
		assert.Equal(t, "half", mixed[1].name)
		assert.Len(t, mixed[1].pts, 2)
	}
	both := seriesOf([]Row{row(8, "float", "sum"), row(8, "float", "max"), row(8, "half", "sum")})
	if assert.Len(t, both, 3) {
		assert.Equal(t, "float max", both[1].name)
	}
}
