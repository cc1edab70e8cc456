package reduce

import (
	"fmt"
	"strings"
)

// Op is a reduction operation. All operations are commutative and, for integers,
// associative; float results depend on the order of reduction only through
// rounding (sum, prod).
type Op uint8

// The supported operations, in nccl-tests order.
const (
	OpSum Op = iota
	OpProd
	OpMax
	OpMin
	OpAvg // floats: PreMultiply by 1/nranks, then sum; integers: sum, then DivideBy(nranks)
	numOps
)

var opNames = [numOps]string{"sum", "prod", "max", "min", "avg"}

// AllOps lists every supported Op in order.
func AllOps() []Op {
	out := make([]Op, numOps)
	for i := range out {
		out[i] = Op(i)
	}
	return out
}

// Valid reports whether o names a supported operation.
func (o Op) Valid() bool { return o < numOps }

// String returns the nccl-tests name of o.
func (o Op) String() string {
	if !o.Valid() {
		return fmt.Sprintf("op(%d)", uint8(o))
	}
	return opNames[o]
}

// Elementwise returns the operation Reduce applies for o: OpSum for OpAvg (whose
// scaling happens once per input, in PreMultiply, or once at the end, in
// DivideBy), o itself otherwise.
func (o Op) Elementwise() Op {
	if o == OpAvg {
		return OpSum
	}
	return o
}

// ParseOp parses an operation name (sum prod min max avg; also "mean" and "product"),
// ignoring case and surrounding space.
func ParseOp(s string) (Op, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	switch k {
	case "mean":
		return OpAvg, nil
	case "product", "mul":
		return OpProd, nil
	}
	for i, n := range opNames {
		if n == k {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("reduce: unknown operation %q (want one of %s)", s, strings.Join(opNames[:], " "))
}
