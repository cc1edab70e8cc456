package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ncclTable is one table as a reader of nccl-tests output sees it.
type ncclTable struct {
	Header      string // the "# nThread ..." line
	Rows        []Row
	OutOfBounds int64
	Status      string
	AvgBusBW    float64
	Closed      bool // the closing "#" line was seen
}

// ncclColumnEnds are the end offsets of the 13 right-aligned fields of an
// nccl-tests data line (%12li  %12li  %8s  %6s  %6i, then twice
// %7s  %6.2f  %6.2f  %5g, two spaces apart): fixed-width readers slice
// lines at these offsets.
var ncclColumnEnds = []int{12, 26, 36, 44, 52, 61, 69, 77, 84, 93, 101, 109, 116}

// parseNCCLTests reads nccl-tests output the strict way: a table starts at
// "# nThread", data lines have every field right-aligned at nccl-tests'
// offsets, and a table ends with the out-of-bounds, average and "#" lines.
func parseNCCLTests(text string) ([]ncclTable, error) {
	var tables []ncclTable
	var cur *ncclTable
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "# nThread "):
			tables = append(tables, ncclTable{Header: l})
			cur = &tables[len(tables)-1]
		case cur == nil:
			return nil, fmt.Errorf("line %d: output before the first header", line)
		case strings.HasPrefix(l, "# Out of bounds values : "):
			f := strings.Fields(strings.TrimPrefix(l, "# Out of bounds values : "))
			if len(f) != 2 {
				return nil, fmt.Errorf("line %d: bad out-of-bounds line %q", line, l)
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			cur.OutOfBounds, cur.Status = v, f[1]
		case strings.HasPrefix(l, "# Avg bus bandwidth    : "):
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, "# Avg bus bandwidth    : ")), 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			cur.AvgBusBW = v
		case l == "#" && cur.Status != "":
			cur.Closed = true
		case strings.HasPrefix(l, "#"):
		default:
			r, err := parseNCCLRow(l)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			cur.Rows = append(cur.Rows, r)
		}
	}
	return tables, sc.Err()
}

// parseNCCLRow parses one data line by nccl-tests' fixed columns.
func parseNCCLRow(l string) (Row, error) {
	if len(l) != ncclColumnEnds[len(ncclColumnEnds)-1] {
		return Row{}, fmt.Errorf("data line of %d characters, want %d: %q", len(l), ncclColumnEnds[len(ncclColumnEnds)-1], l)
	}
	var f []string
	start := 0
	for _, end := range ncclColumnEnds {
		cell := l[start:end]
		if cell[len(cell)-1] == ' ' || strings.TrimSpace(cell) == "" || strings.Contains(strings.TrimLeft(cell, " "), " ") {
			return Row{}, fmt.Errorf("field %q at %d..%d is not right-aligned", cell, start, end)
		}
		f = append(f, strings.TrimSpace(cell))
		start = end
	}
	var r Row
	var err error
	ints := func(s string) int64 {
		v, e := strconv.ParseInt(s, 10, 64)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	floats := func(s string) float64 {
		v, e := strconv.ParseFloat(s, 64)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	wrong := func(s string) int64 {
		if s == "N/A" {
			return -1
		}
		return ints(s)
	}
	r.Bytes, r.Count, r.Type, r.RedOp, r.Root = ints(f[0]), ints(f[1]), f[2], f[3], int(ints(f[4]))
	r.OutOfPlace = Measure{TimeUs: floats(f[5]), AlgBW: floats(f[6]), BusBW: floats(f[7]), Wrong: wrong(f[8])}
	r.InPlace = Measure{TimeUs: floats(f[9]), AlgBW: floats(f[10]), BusBW: floats(f[11]), Wrong: wrong(f[12])}
	return r, err
}

// TestFormatMatchesNCCLTests compares our lines with nccl-tests' own layout,
// written out by hand from its printf formats.
func TestFormatMatchesNCCLTests(t *testing.T) {
	var b strings.Builder
	writeTableHeader(&b)
	want := "#                                                              out-of-place                       in-place          \n" +
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"
	assert.Equal(t, want, b.String())
	for _, tc := range []struct {
		row  Row
		want string
	}{
		{Row{Bytes: 8, Count: 2, Type: "float", RedOp: "sum", Root: -1, OutOfPlace: Measure{TimeUs: 12.34}, InPlace: Measure{TimeUs: 11.22}},
			"           8             2     float     sum      -1    12.34    0.00    0.00      0    11.22    0.00    0.00      0"},
		{Row{Bytes: 134217728, Count: 33554432, Type: "bfloat16", RedOp: "none", Root: 3,
			OutOfPlace: Measure{TimeUs: 123456.7, AlgBW: 1.087, BusBW: 1.9025, Wrong: 12},
			InPlace:    Measure{TimeUs: 456.78, AlgBW: 293.83, BusBW: 514.2, Wrong: -1}},
			"   134217728      33554432  bfloat16    none       3   123457    1.09    1.90     12    456.8  293.83  514.20    N/A"},
	} {
		assert.Equal(t, tc.want, formatRow(tc.row))
	}
	var f strings.Builder
	tab := Table{OutOfBounds: 0, AvgBusBW: 40.93941234}
	writeTableFooter(&f, &tab)
	assert.Equal(t, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 40.9394 \n#\n", f.String())
}

// TestRowRoundTrip: what formatRow writes, the fixed-column parser reads back
// to the printed precision.
func TestRowRoundTrip(t *testing.T) {
	r := Row{Bytes: 1 << 20, Count: 1 << 18, Type: "float", RedOp: "avg", Root: -1,
		OutOfPlace: Measure{TimeUs: 1505.46, AlgBW: 0.6965, BusBW: 1.0448, Wrong: 0},
		InPlace:    Measure{TimeUs: 15.055, AlgBW: 69.65, BusBW: 104.48, Wrong: 3}}
	got, err := parseNCCLRow(formatRow(r))
	require.NoError(t, err)
	assert.Equal(t, r.Bytes, got.Bytes)
	assert.Equal(t, r.Count, got.Count)
	assert.Equal(t, r.RedOp, got.RedOp)
	assert.InDelta(t, r.OutOfPlace.TimeUs, got.OutOfPlace.TimeUs, 0.05)
	assert.InDelta(t, r.InPlace.TimeUs, got.InPlace.TimeUs, 0.005)
	assert.InDelta(t, r.InPlace.BusBW, got.InPlace.BusBW, 0.005)
	assert.Equal(t, r.InPlace.Wrong, got.InPlace.Wrong)
}

// FuzzParseNCCLRow: the reference parser never panics, and every row we
// format from fuzzed values parses back with the same integers.
func FuzzParseNCCLRow(f *testing.F) {
	f.Add(int64(8), int64(2), "float", "sum", -1, 12.34, 0.5, int64(0))
	f.Add(int64(1<<26), int64(1<<24), "bfloat16", "none", 0, 99999.0, 12.5, int64(-1))
	f.Add(int64(0), int64(0), "x", "y", 7, 0.0, 0.0, int64(3))
	f.Fuzz(func(t *testing.T, bytes, count int64, typ, redop string, root int, us, bw float64, wrong int64) {
		_, _ = parseNCCLRow(typ + redop) // arbitrary text: no panic
		if bytes < 0 || bytes > 1<<40 || count < 0 || count > 1<<40 || root < -1 || root > 99999 ||
			!(us >= 0 && us < 1e6) || !(bw >= 0 && bw < 999) || wrong < -1 || wrong > 99999 ||
			len(typ) == 0 || len(typ) > 8 || len(redop) == 0 || len(redop) > 6 ||
			strings.ContainsAny(typ+redop, " \t\n\r") || !isPrintableASCII(typ+redop) {
			return
		}
		r := Row{Bytes: bytes, Count: count, Type: typ, RedOp: redop, Root: root,
			OutOfPlace: Measure{TimeUs: us, AlgBW: bw, BusBW: bw, Wrong: wrong}, InPlace: Measure{TimeUs: us, Wrong: wrong}}
		got, err := parseNCCLRow(formatRow(r))
		require.NoError(t, err, "%q", formatRow(r))
		assert.Equal(t, r.Bytes, got.Bytes)
		assert.Equal(t, r.Count, got.Count)
		assert.Equal(t, r.Type, got.Type)
		assert.Equal(t, r.Root, got.Root)
		assert.Equal(t, r.OutOfPlace.Wrong, got.OutOfPlace.Wrong)
	})
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
