package reduce

import (
	"fmt"
	"strings"
)

// DType is the element type of a reduction buffer. The zero value is Int8 so that
// an uninitialised DType is still a valid one; use Valid to check decoded values.
type DType uint8

// The supported element types, in nccl-tests order.
const (
	Int8 DType = iota
	Uint8
	Int32
	Uint32
	Int64
	Uint64
	Float16  // IEEE 754 binary16 ("half")
	BFloat16 // the upper half of a float32 ("bfloat16")
	Float32  // IEEE 754 binary32 ("float")
	Float64  // IEEE 754 binary64 ("double")
	numDTypes
)

// dtypeNames are the names nccl-tests prints, indexed by DType.
var dtypeNames = [numDTypes]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"}

// dtypeSizes are element sizes in bytes, indexed by DType.
var dtypeSizes = [numDTypes]int{1, 1, 4, 4, 8, 8, 2, 2, 4, 8}

// dtypeAliases maps the common alternative spellings accepted by ParseDType.
var dtypeAliases = map[string]DType{
	"char": Int8, "uchar": Uint8, "int": Int32, "uint": Uint32,
	"float16": Float16, "fp16": Float16, "f16": Float16,
	"bf16":    BFloat16,
	"float32": Float32, "fp32": Float32, "f32": Float32,
	"float64": Float64, "fp64": Float64, "f64": Float64,
}

// AllDTypes lists every supported DType in order.
func AllDTypes() []DType {
	out := make([]DType, numDTypes)
	for i := range out {
		out[i] = DType(i)
	}
	return out
}

// Valid reports whether d names a supported type.
func (d DType) Valid() bool { return d < numDTypes }

// String returns the nccl-tests name of d ("float", "half", ...).
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeNames[d]
}

// Size returns the element size of d in bytes, or 0 for an invalid DType.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float16 || d == BFloat16 || d == Float32 || d == Float64
}

// ParseDType parses a nccl-tests type name or a common alias (float32, fp16, bf16,
// float64, ...), ignoring case and surrounding space.
func ParseDType(s string) (DType, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	for i, n := range dtypeNames {
		if n == k {
			return DType(i), nil
		}
	}
	if d, ok := dtypeAliases[k]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("reduce: unknown data type %q (want one of %s)", s, strings.Join(dtypeNames[:], " "))
}
