package main

import (
	"fmt"
	"io"
	"strings"
)

// The table layout below reproduces nccl-tests' printf formats column for
// column (size %12d, count %12d, type %8s, redop %6s, root %6d, then per
// half time %7s, algbw %6.2f, busbw %6.2f, #wrong %5g, two spaces apart), so
// that scripts written for nccl-tests output parse ours unchanged.

// writeTableHeader prints the three column-title lines.
func writeTableHeader(w io.Writer) {
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
		"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n",
		"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

// formatTime renders microseconds with nccl-tests' precision: no decimals
// from 10 ms, one from 100 µs, two below.
func formatTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

func formatMeasure(m Measure) string {
	wrong := "  N/A"
	if m.Wrong >= 0 {
		wrong = fmt.Sprintf("%5g", float64(m.Wrong))
	}
	return fmt.Sprintf("  %7s  %6.2f  %6.2f  %5s", formatTime(m.TimeUs), m.AlgBW, m.BusBW, wrong)
}

// formatRow renders one data line, without the newline.
func formatRow(r Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.RedOp, r.Root)
	b.WriteString(formatMeasure(r.OutOfPlace))
	b.WriteString(formatMeasure(r.InPlace))
	return b.String()
}

// writeTableFooter prints nccl-tests' closing lines. Like nccl-tests, the
// "Out of bounds values" line counts every wrong value, the wrong elements
// and the bytes written past a buffer, and says FAILED for any: scripts
// that grep it for OK must not pass a failed check.
func writeTableFooter(w io.Writer, t *Table) {
	bad := max(t.Wrong, 0) + t.OutOfBounds
	status := "OK"
	if bad != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", bad, status)
	fmt.Fprintf(w, "# Avg bus bandwidth    : %.6g \n", t.AvgBusBW)
	fmt.Fprintf(w, "#\n")
}
