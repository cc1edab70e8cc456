package reduce

import (
	"fmt"
	"math"
)

// DivideBy finishes an average in place: every element of buf becomes buf[i] / n.
// It is the second half of an integer OpAvg (the first is an OpSum reduction
// over the n ranks); floating-point averages pre-multiply instead
// (PreMultiply), but DivideBy takes floats too. Floats are divided and rounded once (half and bfloat16 through float32);
// integers are divided with truncation toward zero, as NCCL's integer average
// does. n must be at least 1; n == 1 leaves buf unchanged. DivideBy allocates
// nothing.
func DivideBy(buf []byte, dt DType, n int) error {
	if err := checkArgs(buf, buf, dt, OpSum); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w: divisor %d, want at least 1", ErrInvalid, n)
	}
	if n == 1 {
		return nil
	}
	switch dt {
	case Int8:
		for i := range buf {
			buf[i] = byte(int64(int8(buf[i])) / int64(n))
		}
	case Uint8:
		for i := range buf {
			buf[i] = byte(uint64(buf[i]) / uint64(n))
		}
	case Int32:
		for i := 0; i < len(buf); i += 4 {
			ne.PutUint32(buf[i:], uint32(int64(int32(ne.Uint32(buf[i:])))/int64(n)))
		}
	case Uint32:
		for i := 0; i < len(buf); i += 4 {
			ne.PutUint32(buf[i:], uint32(uint64(ne.Uint32(buf[i:]))/uint64(n)))
		}
	case Int64:
		for i := 0; i < len(buf); i += 8 {
			ne.PutUint64(buf[i:], uint64(int64(ne.Uint64(buf[i:]))/int64(n)))
		}
	case Uint64:
		for i := 0; i < len(buf); i += 8 {
			ne.PutUint64(buf[i:], ne.Uint64(buf[i:])/uint64(n))
		}
	case Float16:
		for i := 0; i < len(buf); i += 2 {
			ne.PutUint16(buf[i:], F32ToF16(F16ToF32(ne.Uint16(buf[i:]))/float32(n)))
		}
	case BFloat16:
		for i := 0; i < len(buf); i += 2 {
			ne.PutUint16(buf[i:], F32ToBF16(BF16ToF32(ne.Uint16(buf[i:]))/float32(n)))
		}
	case Float32:
		for i := 0; i < len(buf); i += 4 {
			ne.PutUint32(buf[i:], math.Float32bits(math.Float32frombits(ne.Uint32(buf[i:]))/float32(n)))
		}
	case Float64:
		for i := 0; i < len(buf); i += 8 {
			ne.PutUint64(buf[i:], math.Float64bits(math.Float64frombits(ne.Uint64(buf[i:]))/float64(n)))
		}
	}
	return nil
}
