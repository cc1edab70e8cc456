package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestCSVKeepsFailedTables: every row carries its table's status, and a
// table that failed before its first row still leaves a line saying so,
// with the same number of fields.
func TestCSVKeepsFailedTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	tables := []Table{
		{Transport: "metaroce", Backend: "host", Collective: "allreduce", Ranks: 2, Status: "ok",
			Rows: []Row{{Bytes: 8, Count: 2, Type: "float", RedOp: "sum", Root: -1}}},
		{Transport: "tcp", Backend: "host", Collective: "allreduce", Ranks: 2, Status: "failed", Error: "connect: refused"},
	}
	require.NoError(t, writeCSV(path, tables))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, r := range recs {
		assert.Len(t, r, len(csvHeader))
	}
	assert.Equal(t, "ok", recs[1][len(csvHeader)-1])
	assert.Equal(t, "tcp", recs[2][0])
	assert.Equal(t, "failed", recs[2][len(csvHeader)-1])
}
