package reduce

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// specialBits are float patterns every float kernel must handle: signed zeros,
// infinities, NaNs, subnormals, and the extremes.
var (
	special16 = []uint16{0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x8001, 0x7bff, 0xfbff, 0x3c00, 0xbc00,
		0x7f80, 0xff80, 0x7fc0, 0x0080, 0x7f7f, 0x3f80}
	special32 = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1, -1}
	special64 = []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1, -1}
)

// fillRandom fills b with random elements of dt; a quarter of the float elements
// are special values, and the rest random finite-ish patterns.
func fillRandom(rng *rand.Rand, b []byte, dt DType) {
	size := dt.Size()
	for i := 0; i+size <= len(b); i += size {
		special := rng.IntN(4) == 0
		switch dt {
		case Float16, BFloat16:
			v := uint16(rng.Uint32())
			if special {
				v = special16[rng.IntN(len(special16))]
			}
			ne.PutUint16(b[i:], v)
		case Float32:
			v := float32(rng.NormFloat64() * 100)
			if special {
				v = special32[rng.IntN(len(special32))]
			}
			ne.PutUint32(b[i:], math.Float32bits(v))
		case Float64:
			v := rng.NormFloat64() * 1e6
			if special {
				v = special64[rng.IntN(len(special64))]
			}
			ne.PutUint64(b[i:], math.Float64bits(v))
		default:
			for j := range size {
				b[i+j] = byte(rng.Uint32())
			}
		}
	}
}

// sameElements compares two buffers of dt element by element; two NaNs are equal
// whatever their payloads, everything else must match bit for bit.
func sameElements(a, b []byte, dt DType) (int, bool) {
	size := dt.Size()
	for i := 0; i < len(a); i += size {
		if bytes.Equal(a[i:i+size], b[i:i+size]) {
			continue
		}
		if dt.IsFloat() && isNaN(a[i:], dt) && isNaN(b[i:], dt) {
			continue
		}
		return i / size, false
	}
	return 0, true
}

func isNaN(b []byte, dt DType) bool {
	switch dt {
	case Float16:
		return math.IsNaN(float64(F16ToF32(ne.Uint16(b))))
	case BFloat16:
		return math.IsNaN(float64(BF16ToF32(ne.Uint16(b))))
	case Float32:
		return math.IsNaN(float64(math.Float32frombits(ne.Uint32(b))))
	case Float64:
		return math.IsNaN(math.Float64frombits(ne.Uint64(b)))
	}
	return false
}

// TestReduceMatchesReference runs every dtype × op through Reduce (with and
// without the assembly kernels, aligned and misaligned, odd lengths) and
// compares with the scalar reference.
func TestReduceMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	lengths := []int{0, 1, 3, 7, 8, 31, 32, 33, 127, 128, 129, 255, 1000, 4099}
	kernels := []bool{false}
	if useAVX2 {
		kernels = append(kernels, true)
	}
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	for _, asm := range kernels {
		useAVX2 = asm
		for _, dt := range AllDTypes() {
			for _, op := range AllOps() {
				for _, n := range lengths {
					for _, shift := range []int{0, 1, 3} {
						size := dt.Size()
						backing := make([]byte, 3*(n*size+8))
						dst := backing[shift : shift+n*size]
						src := backing[n*size+8+shift*2 : n*size+8+shift*2+n*size]
						fillRandom(rng, dst, dt)
						fillRandom(rng, src, dt)
						want := append([]byte(nil), dst...)
						reduceReference(want, src, dt, op)
						if err := Reduce(dst, src, dt, op); err != nil {
							t.Fatal(err)
						}
						if i, ok := sameElements(want, dst, dt); !ok {
							t.Fatalf("asm=%v %s %s n=%d shift=%d: element %d differs", asm, dt, op, n, shift, i)
						}
					}
				}
			}
		}
	}
}

// TestReduceSemantics pins the documented semantics on hand-picked values.
func TestReduceSemantics(t *testing.T) {
	negZero := math.Copysign(0, -1)
	f64 := func(vs ...float64) []byte {
		b := make([]byte, 8*len(vs))
		for i, v := range vs {
			ne.PutUint64(b[8*i:], math.Float64bits(v))
		}
		return b
	}
	cases := []struct {
		name     string
		dt       DType
		op       Op
		dst, src []byte
		want     []byte
	}{
		{"int8 sum wraps", Int8, OpSum, []byte{127, 0x80}, []byte{1, 0xff}, []byte{0x80, 0x7f}},
		{"int8 min is signed", Int8, OpMin, []byte{0x80, 5}, []byte{1, 0xff}, []byte{0x80, 0xff}},
		{"uint8 min is unsigned", Uint8, OpMin, []byte{0x80, 5}, []byte{1, 0xff}, []byte{1, 5}},
		{"uint8 prod wraps", Uint8, OpProd, []byte{16}, []byte{17}, []byte{16}},
		{"avg combines as sum", Uint8, OpAvg, []byte{3}, []byte{4}, []byte{7}},
		{"max -0 +0", Float64, OpMax, f64(negZero, 0), f64(0, negZero), f64(0, 0)},
		{"min -0 +0", Float64, OpMin, f64(negZero, 0), f64(0, negZero), f64(negZero, negZero)},
		{"max NaN propagates", Float64, OpMax, f64(math.NaN(), 1), f64(1, math.NaN()), f64(math.NaN(), math.NaN())},
		{"inf sum", Float64, OpSum, f64(math.Inf(1), math.Inf(1)), f64(math.Inf(-1), 1), f64(math.NaN(), math.Inf(1))},
		{"half 1+2^-11 rounds to even", Float16, OpSum, []byte{0x00, 0x3c}, []byte{0x00, 0x10}, []byte{0x00, 0x3c}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Reduce(c.dst, c.src, c.dt, c.op); err != nil {
				t.Fatal(err)
			}
			if i, ok := sameElements(c.want, c.dst, c.dt); !ok {
				t.Fatalf("element %d: got % x, want % x", i, c.dst, c.want)
			}
		})
	}
}

func TestReduceErrors(t *testing.T) {
	cases := []struct {
		name     string
		dst, src []byte
		dt       DType
		op       Op
	}{
		{"length mismatch", make([]byte, 8), make([]byte, 4), Float32, OpSum},
		{"partial element", make([]byte, 6), make([]byte, 6), Float32, OpSum},
		{"bad dtype", make([]byte, 4), make([]byte, 4), DType(99), OpSum},
		{"bad op", make([]byte, 4), make([]byte, 4), Float32, Op(99)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Reduce(c.dst, c.src, c.dt, c.op)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want an ErrInvalid", err)
			}
		})
	}
	if err := DivideBy(make([]byte, 4), Int32, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("DivideBy 0: got %v", err)
	}
}

func TestDivideBy(t *testing.T) {
	i32 := func(vs ...int32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			ne.PutUint32(b[4*i:], uint32(v))
		}
		return b
	}
	f32 := func(vs ...float32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			ne.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	cases := []struct {
		name      string
		dt        DType
		n         int
		buf, want []byte
	}{
		{"int32 truncates toward zero", Int32, 4, i32(7, -7, 8, math.MinInt32), i32(1, -1, 2, math.MinInt32/4)},
		{"int8 by more than 127", Int8, 200, []byte{0x80, 127}, []byte{0, 0}},
		{"uint8", Uint8, 3, []byte{255, 2}, []byte{85, 0}},
		{"float32 divides", Float32, 3, f32(1, -6, 0), f32(1.0/3, -2, 0)},
		{"half", Float16, 4, []byte{0x00, 0x3c}, []byte{0x00, 0x34}},
		{"bfloat16", BFloat16, 2, []byte{0x80, 0x3f}, []byte{0x00, 0x3f}},
		{"n=1 is identity", Float64, 1, make([]byte, 8), make([]byte, 8)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := DivideBy(c.buf, c.dt, c.n); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.buf, c.want) {
				t.Fatalf("got % x, want % x", c.buf, c.want)
			}
		})
	}
}

// TestReduceAllocs asserts the zero-allocation budget of Reduce and DivideBy.
func TestReduceAllocs(t *testing.T) {
	dst, src := make([]byte, 4096), make([]byte, 4096)
	for _, dt := range AllDTypes() {
		for _, op := range AllOps() {
			if a := testing.AllocsPerRun(20, func() { _ = Reduce(dst, src, dt, op) }); a != 0 {
				t.Errorf("Reduce %s %s: %v allocs per call", dt, op, a)
			}
		}
		if a := testing.AllocsPerRun(20, func() { _ = DivideBy(dst, dt, 3) }); a != 0 {
			t.Errorf("DivideBy %s: %v allocs per call", dt, a)
		}
	}
}

func TestFeatures(t *testing.T) {
	f := Features()
	if f == "" || KernelSet() == "" {
		t.Fatal("empty feature report")
	}
	t.Log(f)
}
