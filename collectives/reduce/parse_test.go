package reduce

import (
	"strings"
	"testing"
)

func TestParseNames(t *testing.T) {
	for _, dt := range AllDTypes() {
		got, err := ParseDType(dt.String())
		if err != nil || got != dt {
			t.Fatalf("ParseDType(%q) = %v, %v", dt.String(), got, err)
		}
	}
	for _, op := range AllOps() {
		got, err := ParseOp(strings.ToUpper(op.String()))
		if err != nil || got != op {
			t.Fatalf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
	}
	aliases := map[string]DType{"float32": Float32, "float16": Float16, "bf16": BFloat16, "float64": Float64, " FP32 ": Float32}
	for s, want := range aliases {
		if got, err := ParseDType(s); err != nil || got != want {
			t.Fatalf("ParseDType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "float8", "int16", "floaty"} {
		if _, err := ParseDType(bad); err == nil {
			t.Fatalf("ParseDType(%q) accepted", bad)
		}
	}
	if _, err := ParseOp("xor"); err == nil {
		t.Fatal("ParseOp(xor) accepted")
	}
	if DType(200).String() == "" || Op(200).String() == "" || DType(200).Size() != 0 {
		t.Fatal("invalid values must still print")
	}
}

// FuzzParseDType checks that any accepted name round-trips through String.
func FuzzParseDType(f *testing.F) {
	for _, s := range []string{"float", "half", "bf16", "float64", "int8", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dt, err := ParseDType(s)
		if err != nil {
			return
		}
		if !dt.Valid() {
			t.Fatalf("%q parsed to invalid %d", s, dt)
		}
		if back, err := ParseDType(dt.String()); err != nil || back != dt {
			t.Fatalf("%q: %v does not round-trip", s, dt)
		}
	})
}

// FuzzParseOp checks that any accepted name round-trips through String.
func FuzzParseOp(f *testing.F) {
	for _, s := range []string{"sum", "prod", "min", "max", "avg", "mean", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, err := ParseOp(s)
		if err != nil {
			return
		}
		if back, err := ParseOp(op.String()); err != nil || back != op || !op.Valid() {
			t.Fatalf("%q: %v does not round-trip", s, op)
		}
	})
}
