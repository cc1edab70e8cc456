package rccl

import "fmt"

// DataType is ncclDataType_t; the values are NCCL's and RCCL's.
type DataType int

// Data types.
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

var dtypeNames = [...]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"}

var dtypeSizes = [...]int{1, 1, 4, 4, 8, 8, 2, 4, 8, 2}

func (d DataType) valid() bool { return d >= 0 && int(d) < len(dtypeSizes) }

// Size is the size of one element in bytes, 0 for an unknown type.
func (d DataType) Size() int {
	if !d.valid() {
		return 0
	}
	return dtypeSizes[d]
}

func (d DataType) String() string {
	if !d.valid() {
		return fmt.Sprintf("DataType(%d)", int(d))
	}
	return dtypeNames[d]
}

// RedOp is ncclRedOp_t.
type RedOp int

// Reduction operations.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

var opNames = [...]string{"sum", "prod", "max", "min", "avg"}

func (o RedOp) valid() bool { return o >= 0 && int(o) < len(opNames) }

func (o RedOp) String() string {
	if !o.valid() {
		return fmt.Sprintf("RedOp(%d)", int(o))
	}
	return opNames[o]
}

// UniqueIDBytes is sizeof(ncclUniqueId): NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID is ncclUniqueId: made by one rank with (*Lib).UniqueID and handed
// to every other rank out of band (mrbench sends it over its bootstrap).
type UniqueID [UniqueIDBytes]byte

// Result is ncclResult_t. A Result other than Success is also an error, so
// errors.Is(err, rccl.InvalidArgument) works on the errors of this package.
type Result int

// Results.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"success", "unhandled CUDA/HIP error", "system error", "internal error",
	"invalid argument", "invalid usage", "remote error", "in progress"}

func (r Result) Error() string {
	if r >= 0 && int(r) < len(resultNames) {
		return "nccl " + resultNames[r]
	}
	return fmt.Sprintf("ncclResult %d", int(r))
}
