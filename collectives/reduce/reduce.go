package reduce

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrInvalid is wrapped by every argument error of this package, so callers can
// tell bad input (errors.Is(err, ErrInvalid)) from anything else.
var ErrInvalid = errors.New("reduce: invalid argument")

// checkArgs validates a dtype, op and buffer pair.
func checkArgs(dst, src []byte, dt DType, op Op) error {
	if !dt.Valid() {
		return fmt.Errorf("%w: unknown data type %d", ErrInvalid, uint8(dt))
	}
	if !op.Valid() {
		return fmt.Errorf("%w: unknown operation %d", ErrInvalid, uint8(op))
	}
	if len(dst) != len(src) {
		return fmt.Errorf("%w: dst is %d bytes but src is %d", ErrInvalid, len(dst), len(src))
	}
	if len(dst)%dt.Size() != 0 {
		return fmt.Errorf("%w: %d bytes is not a whole number of %s elements (%d bytes each)", ErrInvalid, len(dst), dt, dt.Size())
	}
	return nil
}

// Reduce combines src into dst elementwise: dst[i] = dst[i] op src[i]. Both
// buffers hold elements of dt in host byte order, must have the same length, and
// that length must be a multiple of dt.Size(). OpAvg combines as OpSum; finish an
// average with DivideBy. dst and src may be the same slice but must not partially
// overlap. Reduce allocates nothing.
func Reduce(dst, src []byte, dt DType, op Op) error {
	if err := checkArgs(dst, src, dt, op); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	op = op.Elementwise()
	if useAVX2 {
		nb := len(dst) &^ 127
		if nb > 0 && avx2Reduce(dt, op, unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), nb) {
			dst, src = dst[nb:], src[nb:]
			if len(dst) == 0 {
				return nil
			}
		}
	}
	reduceGo(dst, src, dt, op)
	return nil
}

// reduceGo is the portable fast path: typed, unrolled loops over the byte buffers
// reinterpreted in place. The reinterpretation needs element alignment (the Go
// memory model and checkptr both demand it), so misaligned buffers fall back to
// the byte-wise reference, which is slower but equal in result.
func reduceGo(dst, src []byte, dt DType, op Op) {
	size := dt.Size()
	if !aligned(dst, size) || !aligned(src, size) {
		reduceReference(dst, src, dt, op)
		return
	}
	n := len(dst) / size
	d, s := unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0])
	switch dt {
	case Int8:
		typedOp(unsafe.Slice((*int8)(d), n), unsafe.Slice((*int8)(s), n), op)
	case Uint8:
		typedOp(dst, src, op)
	case Int32:
		typedOp(unsafe.Slice((*int32)(d), n), unsafe.Slice((*int32)(s), n), op)
	case Uint32:
		typedOp(unsafe.Slice((*uint32)(d), n), unsafe.Slice((*uint32)(s), n), op)
	case Int64:
		typedOp(unsafe.Slice((*int64)(d), n), unsafe.Slice((*int64)(s), n), op)
	case Uint64:
		typedOp(unsafe.Slice((*uint64)(d), n), unsafe.Slice((*uint64)(s), n), op)
	case Float16:
		f16Op(unsafe.Slice((*uint16)(d), n), unsafe.Slice((*uint16)(s), n), op)
	case BFloat16:
		bf16Op(unsafe.Slice((*uint16)(d), n), unsafe.Slice((*uint16)(s), n), op)
	case Float32:
		typedOp(unsafe.Slice((*float32)(d), n), unsafe.Slice((*float32)(s), n), op)
	case Float64:
		typedOp(unsafe.Slice((*float64)(d), n), unsafe.Slice((*float64)(s), n), op)
	}
}

// f16Op reduces binary16 elements by widening to float32, combining, and
// rounding back once per element. The conversions are called directly (not
// through func values) so that they inline into the loop.
func f16Op(d, s []uint16, op Op) {
	s = s[:len(d)]
	for i := range d {
		d[i] = F32ToF16(combineF32(F16ToF32(d[i]), F16ToF32(s[i]), op))
	}
}

// bf16Op is f16Op for bfloat16.
func bf16Op(d, s []uint16, op Op) {
	s = s[:len(d)]
	for i := range d {
		d[i] = F32ToBF16(combineF32(BF16ToF32(d[i]), BF16ToF32(s[i]), op))
	}
}

// aligned reports whether b starts on a multiple of size bytes.
func aligned(b []byte, size int) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(size) == 0
}
