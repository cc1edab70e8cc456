package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestF16RoundTripExhaustive widens every binary16 pattern and narrows it back:
// every non-NaN value must come back bit for bit, every NaN must stay a NaN.
func TestF16RoundTripExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		back := F32ToF16(f)
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		if isNaN {
			check(t, math.IsNaN(float64(f)), "%#04x", h)
			equal(t, uint16(0x7c00), back&0x7c00, "%#04x", h)
			check(t, back&0x3ff != 0, "%#04x", h)
			continue
		}
		equal(t, uint16(h), back, "%#04x -> %v", h, f)
	}
}

// TestF16Values pins well-known binary16 encodings (IEEE 754-2008 §3.6).
func TestF16Values(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {1e9, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {6.103515625e-05, 0x0400}, {5.9604645e-08, 0x0001},
		{2.9802322e-08, 0x0000},        // exactly half the smallest subnormal: ties to even (0)
		{2.9802326e-08, 0x0001},        // just above half: rounds up
		{1.0009765625 / 2 * 2, 0x3c01}, // 1 + 2^-10
		{1 + 1.0/4096, 0x3c00},         // a quarter ulp above 1
		{1 + 1.0/2048, 0x3c00},         // exactly half an ulp above 1: even is 0x3c00
		{1 + 3.0/2048, 0x3c02},         // half an ulp above 0x3c01: even is 0x3c02
		{0.333333343, 0x3555},
	}
	for _, c := range cases {
		equal(t, c.h, F32ToF16(c.f), "F32ToF16(%v)", c.f)
	}
}

// nearestHalf is the dumb reference for F32ToF16: binary search over the sorted
// table of every non-negative finite binary16 value, ties to the even pattern.
// 0x7c00 (Inf) takes the value 2^16, which gives IEEE's overflow threshold.
func nearestHalf(table []float64, f float32) uint16 {
	a := math.Abs(float64(f))
	sign := uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	i := sort.Search(len(table), func(i int) bool { return table[i] > a }) - 1
	if i == len(table)-1 {
		return sign | uint16(i)
	}
	lo, hi := a-table[i], table[i+1]-a
	if lo < hi || (lo == hi && i%2 == 0) {
		return sign | uint16(i)
	}
	return sign | uint16(i+1)
}

func halfTable() []float64 {
	table := make([]float64, 0x7c01)
	for h := range 0x7c00 {
		table[h] = float64(F16ToF32(uint16(h)))
	}
	table[0x7c00] = 65536
	return table
}

// TestF32ToF16AgainstReference compares the narrowing with the reference on
// random float32 patterns concentrated on half's range, plus the tie cases.
func TestF32ToF16AgainstReference(t *testing.T) {
	table := halfTable()
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		if math.IsNaN(float64(f)) {
			return
		}
		want := nearestHalf(table, f)
		if math.IsInf(float64(f), 0) || math.Abs(float64(f)) >= 65536 {
			want = want&0x8000 | 0x7c00
		}
		equal(t, want, F32ToF16(f), "F32ToF16(%v = %#08x)", f, math.Float32bits(f))
	}
	for range 200000 {
		// Exponents 100..150 cover half's subnormals, normals and overflow.
		bits := rng.Uint32()&0x807fffff | (100+rng.Uint32N(51))<<23
		check(math.Float32frombits(bits))
	}
	for h := range 0x7c00 { // every midpoint between neighbours, and its neighbours
		m := float32((table[h] + table[h+1]) / 2)
		check(m)
		check(math.Nextafter32(m, 0))
		check(math.Nextafter32(m, 1e9))
	}
}

// TestBF16 checks the bfloat16 conversions: exhaustive round trip, and narrowing
// against a reference that picks the nearer of the two truncation neighbours.
func TestBF16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			check(t, math.IsNaN(float64(BF16ToF32(F32ToBF16(f)))))
			continue
		}
		equal(t, uint16(h), F32ToBF16(f))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		bits := rng.Uint32()
		f := math.Float32frombits(bits)
		if math.IsNaN(float64(f)) {
			check(t, math.IsNaN(float64(BF16ToF32(F32ToBF16(f)))), "%#08x", bits)
			continue
		}
		lo := uint16(bits >> 16)
		a := math.Abs(float64(f))
		vlo := math.Abs(float64(BF16ToF32(lo)))
		vhi := math.Abs(float64(BF16ToF32(lo + 1)))
		if lo&0x7fff == 0x7f7f { // the neighbour above the largest finite is Inf
			vhi = math.Ldexp(1, 128)
		}
		want := lo
		if a-vlo > vhi-a || (a-vlo == vhi-a && lo&1 == 1) {
			want = lo + 1
		}
		equal(t, want, F32ToBF16(f), "%#08x", bits)
	}
	equal(t, uint16(0x3f80), F32ToBF16(1))
	equal(t, uint16(0x7f80), F32ToBF16(math.MaxFloat32))
}

// check fails the test with the formatted message when ok is false.
func check(t *testing.T, ok bool, msgAndArgs ...any) {
	t.Helper()
	if !ok {
		t.Fatal(describe(msgAndArgs))
	}
}

// equal fails the test when want != got.
func equal[T comparable](t *testing.T, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		t.Fatalf("want %#v, got %#v: %s", want, got, describe(msgAndArgs))
	}
}

func describe(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return "check failed"
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}
