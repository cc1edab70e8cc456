package scenarios

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONNumbers: a result's JSON holds the cells and parameters given as
// numbers as JSON numbers, with the digits the text table prints, NaN and
// ±Inf as null, and every other cell as a string; the text and CSV forms
// keep the formatted strings.
func TestJSONNumbers(t *testing.T) {
	res := &Result{Scenario: "x", Seed: 3}
	res.param("hosts", 8)
	res.param("pmax", 0.2)
	tb := res.table("t", "label", "cell")
	for _, v := range []any{"plane", 7, int64(-1), uint64(1) << 40, 0.5, -1.0, math.NaN(), math.Inf(1), "12"} {
		tb.Add("row", v)
	}
	// A row set by hand carries no types: strings.
	tb.Rows = append(tb.Rows, []string{"raw", "5"})
	tb.Add("after", 2)

	var b bytes.Buffer
	require.NoError(t, res.WriteJSON(&b))
	assert.Contains(t, b.String(), `"value": 0.2000`, "the table's fixed precision")

	var doc struct {
		Seed   uint64 `json:"seed"`
		Params []struct {
			Name  string `json:"name"`
			Value any    `json:"value"`
		} `json:"params"`
		Tables []struct {
			Name    string   `json:"name"`
			Columns []string `json:"columns"`
			Rows    [][]any  `json:"rows"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	assert.EqualValues(t, 3, doc.Seed)
	require.Len(t, doc.Params, 2)
	assert.Equal(t, 8.0, doc.Params[0].Value)
	assert.Equal(t, 0.2, doc.Params[1].Value)
	require.Len(t, doc.Tables, 1)
	assert.Equal(t, []string{"label", "cell"}, doc.Tables[0].Columns)

	want := []any{"plane", 7.0, -1.0, float64(uint64(1) << 40), 0.5, -1.0, nil, nil, "12", "5", 2.0}
	rows := doc.Tables[0].Rows
	require.Len(t, rows, len(want))
	for i, w := range want {
		assert.IsType(t, "", rows[i][0], "row %d label", i)
		assert.Equal(t, w, rows[i][1], "row %d", i)
	}

	var csv bytes.Buffer
	require.NoError(t, res.WriteCSV(&csv))
	assert.Contains(t, csv.String(), "row,0.5000\nrow,-1.0000\nrow,NaN\nrow,+Inf\nrow,12\nraw,5\n")
}
