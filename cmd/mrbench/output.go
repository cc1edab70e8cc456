package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
)

// writeJSON writes the report to path, indented, per SCHEMA.md.
func writeJSON(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// csvHeader names the CSV columns: one line per row of every table, with the
// table's transport and backend first. Times are µs, bandwidths GB/s, wrong
// is -1 when unchecked. table_status is the row's table's status, "ok" or
// "failed" (wrong values, writes out of bounds, or a stop whose reason the
// JSON gives), so that a CSV alone tells a failed run from a good one.
var csvHeader = []string{"transport", "backend", "collective", "ranks", "bytes", "count", "type", "redop", "root",
	"oop_time_us", "oop_algbw_gbps", "oop_busbw_gbps", "oop_wrong",
	"ip_time_us", "ip_algbw_gbps", "ip_busbw_gbps", "ip_wrong", "table_status"}

// writeCSV writes every table's rows to path.
func writeCSV(path string, tables []Table) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(csvHeader)
	ff := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, t := range tables {
		if len(t.Rows) == 0 {
			// A table that failed before its first row (while
			// connecting) still leaves a line, its figures empty.
			_ = w.Write([]string{t.Transport, t.Backend, t.Collective, strconv.Itoa(t.Ranks),
				"", "", "", "", "", "", "", "", "", "", "", "", "", t.Status})
			continue
		}
		for _, r := range t.Rows {
			_ = w.Write([]string{t.Transport, t.Backend, t.Collective, strconv.Itoa(t.Ranks),
				strconv.FormatInt(r.Bytes, 10), strconv.FormatInt(r.Count, 10), r.Type, r.RedOp, strconv.Itoa(r.Root),
				ff(r.OutOfPlace.TimeUs), ff(r.OutOfPlace.AlgBW), ff(r.OutOfPlace.BusBW), strconv.FormatInt(r.OutOfPlace.Wrong, 10),
				ff(r.InPlace.TimeUs), ff(r.InPlace.AlgBW), ff(r.InPlace.BusBW), strconv.FormatInt(r.InPlace.Wrong, 10),
				t.Status})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	if err := writeFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}
