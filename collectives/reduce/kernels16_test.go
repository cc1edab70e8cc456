package reduce

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// ptr is the address of b's first byte.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// TestSixteenBitKernelsExhaustive runs every binary16 and bfloat16 bit
// pattern through the assembly sum, product and scaling kernels, against
// 64 partners each (random patterns, and the specials), and compares with
// the scalar reference; NaNs compare equal whatever their payloads.
func TestSixteenBitKernelsExhaustive(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	all := make([]byte, 2<<16)
	for v := range 1 << 16 {
		ne.PutUint16(all[2*v:], uint16(v))
	}
	partners := append([]uint16(nil), special16...)
	for len(partners) < 64 {
		partners = append(partners, uint16(rng.Uint32()))
	}
	for _, dt := range []DType{Float16, BFloat16} {
		if dt == Float16 && !useF16C {
			continue
		}
		for _, op := range []Op{OpSum, OpProd} {
			for _, p := range partners {
				src := make([]byte, len(all))
				for i := 0; i < len(src); i += 2 {
					ne.PutUint16(src[i:], p)
				}
				got := append([]byte(nil), all...)
				if !avx2Reduce(dt, op, ptr(got), ptr(src), len(got)) {
					t.Fatalf("%s %s: no kernel", dt, op)
				}
				want := append([]byte(nil), all...)
				reduceReference(want, src, dt, op)
				if i, ok := sameElements(want, got, dt); !ok {
					t.Fatalf("%s %s: %#04x with %#04x: got %#04x, want %#04x", dt, op,
						ne.Uint16(all[2*i:]), p, ne.Uint16(got[2*i:]), ne.Uint16(want[2*i:]))
				}
			}
		}
		for _, n := range []int{2, 3, 5, 7, 8, 10, 64, 100, 1000, 65535} {
			got := make([]byte, len(all))
			if !avx2Scale(dt, ptr(got), ptr(all), len(all), PreMulScalar(dt, n)) {
				t.Fatalf("%s: no scaling kernel", dt)
			}
			want := make([]byte, len(all))
			saved := useAVX2
			useAVX2 = false
			err := PreMultiply(want, all, dt, n)
			useAVX2 = saved
			if err != nil {
				t.Fatal(err)
			}
			if i, ok := sameElements(want, got, dt); !ok {
				t.Fatalf("%s scale by 1/%d: %#04x: got %#04x, want %#04x", dt, n,
					ne.Uint16(all[2*i:]), ne.Uint16(got[2*i:]), ne.Uint16(want[2*i:]))
			}
		}
	}
}

// TestPreMultiplyKernelsMatchScalar compares PreMultiply with and without
// the assembly kernels for every float type over odd lengths and offsets.
func TestPreMultiplyKernelsMatchScalar(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []DType{Float16, BFloat16, Float32, Float64} {
		for _, length := range []int{1, 63, 64, 65, 127, 128, 129, 1000, 4099} {
			for _, shift := range []int{0, 2, 8} {
				size := dt.Size()
				backing := make([]byte, length*size+shift)
				src := backing[shift:]
				fillRandom(rng, src, dt)
				got := make([]byte, len(src))
				if err := PreMultiply(got, src, dt, 7); err != nil {
					t.Fatal(err)
				}
				saved := useAVX2
				useAVX2 = false
				want := make([]byte, len(src))
				err := PreMultiply(want, src, dt, 7)
				useAVX2 = saved
				if err != nil {
					t.Fatal(err)
				}
				if i, ok := sameElements(want, got, dt); !ok {
					t.Fatalf("%s length %d shift %d: element %d differs", dt, length, shift, i)
				}
			}
		}
	}
}
