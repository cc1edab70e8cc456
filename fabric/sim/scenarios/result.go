package scenarios

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table is one block of results: named columns and rows of formatted cells.
// Cells are strings so that output is byte-identical across runs and
// platforms (numbers are formatted once, with fixed precision: integers
// as such, floats with 4 decimals). The JSON form writes a cell that Add
// got as a number as a JSON number with those same digits (null for
// NaN and ±Inf, which JSON lacks) and every other cell as a string.
type Table struct {
	Name    string
	Columns []string
	Rows    [][]string
	// num[i][k] says that Rows[i][k] was added as a number; a row
	// appended to Rows directly has none and is written as strings.
	num [][]bool
}

// Add appends a row; values are formatted with cell.
func (t *Table) Add(vals ...any) {
	row := make([]string, len(vals))
	num := make([]bool, len(vals))
	for i, v := range vals {
		row[i], num[i] = cell(v)
	}
	for len(t.num) < len(t.Rows) {
		t.num = append(t.num, nil)
	}
	t.Rows = append(t.Rows, row)
	t.num = append(t.num, num)
}

// MarshalJSON writes {"name", "columns", "rows"}, the rows' numeric cells
// as JSON numbers (see Table).
func (t Table) MarshalJSON() ([]byte, error) {
	rows := make([][]any, len(t.Rows))
	for i, row := range t.Rows {
		rows[i] = make([]any, len(row))
		for k, c := range row {
			rows[i][k] = jsonCell(c, i < len(t.num) && k < len(t.num[i]) && t.num[i][k])
		}
	}
	return json.Marshal(struct {
		Name    string   `json:"name"`
		Columns []string `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}{t.Name, t.Columns, rows})
}

// cell formats v for a table or parameter and says whether it is a
// number.
func cell(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, false
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', 4, 64), true
	}
	return fmt.Sprint(v), false
}

// jsonCell is a formatted cell as JSON writes it: a number cell as a
// json.Number of its very digits (so the JSON keeps the table's
// precision and stays byte-identical), nil (null) for a number cell that
// JSON cannot hold (NaN, ±Inf), any other cell as its string.
func jsonCell(c string, num bool) any {
	if !num {
		return c
	}
	f, err := strconv.ParseFloat(c, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return json.Number(c)
}

// Param is one named scenario parameter, formatted as a table cell is.
type Param struct {
	Name  string
	Value string
	num   bool // Value was given as a number: a JSON number
}

// MarshalJSON writes {"name", "value"}, a numeric value as a JSON number
// (see Table).
func (p Param) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	}{p.Name, jsonCell(p.Value, p.num)})
}

// Perf is how fast the simulator ran: wall-clock figures, never part of
// the deterministic output.
type Perf struct {
	Events      uint64
	WallSeconds float64
}

// EventsPerSec is the simulator's speed.
func (p Perf) EventsPerSec() float64 {
	if p.WallSeconds <= 0 {
		return 0
	}
	return float64(p.Events) / p.WallSeconds
}

// PlotSpec says which table a PNG plot draws: Y against X, one line per
// distinct value of Series (columns joined by "+" name a line by several,
// e.g. "case+protocol").
type PlotSpec struct {
	Table, X, Y, Series string
	Title               string
	LogX                bool // logarithmic x axis (a size sweep)
	// Fraction says that y is a fraction of a whole, at most 1: the y
	// axis runs from 0 to 1, so that the figure shows how far a curve
	// stays from the whole.
	Fraction bool
}

// Result is a scenario's output.
type Result struct {
	Scenario string     `json:"scenario"`
	Seed     uint64     `json:"seed"`
	Params   []Param    `json:"params"`
	Tables   []*Table   `json:"tables"`
	Notes    []string   `json:"notes,omitempty"`
	Plots    []PlotSpec `json:"-"`
	Perf     Perf       `json:"-"`
}

func (r *Result) param(name string, v any) {
	c, num := cell(v)
	r.Params = append(r.Params, Param{Name: name, Value: c, num: num})
}

func (r *Result) table(name string, cols ...string) *Table {
	t := &Table{Name: name, Columns: cols}
	r.Tables = append(r.Tables, t)
	return t
}

// Table returns the table called name, or nil.
func (r *Result) Table(name string) *Table {
	for _, t := range r.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// WriteText writes the result as aligned text tables.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s  seed %d\n", r.Scenario, r.Seed)
	for _, p := range r.Params {
		fmt.Fprintf(&b, "  %s = %s\n", p.Name, p.Value)
	}
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n[%s]\n", t.Name)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(t.Columns, "\t")+"\t")
		for _, row := range t.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes every table as CSV, each preceded by a "# table NAME"
// line and separated by a blank line.
func (r *Result) WriteCSV(w io.Writer) error {
	for i, t := range r.Tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "# table %s\n", t.Name); err != nil {
			return err
		}
		cw := csv.NewWriter(w)
		if err := cw.Write(t.Columns); err != nil {
			return err
		}
		if err := cw.WriteAll(t.Rows); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
