package reduce

// number is the set of element types the typed kernels are instantiated for.
// Each instantiation is a distinct machine-code body (no shared dictionary),
// because every member has a distinct GC shape.
type number interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// sumSlice adds s into d, unrolled by eight so that the loads of independent
// elements overlap; len(s) must be at least len(d).
func sumSlice[T number](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+8 <= len(d); i += 8 {
		dd := d[i : i+8 : i+8]
		ss := s[i : i+8 : i+8]
		dd[0] += ss[0]
		dd[1] += ss[1]
		dd[2] += ss[2]
		dd[3] += ss[3]
		dd[4] += ss[4]
		dd[5] += ss[5]
		dd[6] += ss[6]
		dd[7] += ss[7]
	}
	for ; i < len(d); i++ {
		d[i] += s[i]
	}
}

// prodSlice multiplies s into d, unrolled by eight.
func prodSlice[T number](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+8 <= len(d); i += 8 {
		dd := d[i : i+8 : i+8]
		ss := s[i : i+8 : i+8]
		dd[0] *= ss[0]
		dd[1] *= ss[1]
		dd[2] *= ss[2]
		dd[3] *= ss[3]
		dd[4] *= ss[4]
		dd[5] *= ss[5]
		dd[6] *= ss[6]
		dd[7] *= ss[7]
	}
	for ; i < len(d); i++ {
		d[i] *= s[i]
	}
}

// maxSlice stores max(d, s) into d with Go's built-in max (NaN-propagating and
// ordering -0 below +0 for floats), unrolled by four.
func maxSlice[T number](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd := d[i : i+4 : i+4]
		ss := s[i : i+4 : i+4]
		dd[0] = max(dd[0], ss[0])
		dd[1] = max(dd[1], ss[1])
		dd[2] = max(dd[2], ss[2])
		dd[3] = max(dd[3], ss[3])
	}
	for ; i < len(d); i++ {
		d[i] = max(d[i], s[i])
	}
}

// minSlice stores min(d, s) into d; see maxSlice.
func minSlice[T number](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd := d[i : i+4 : i+4]
		ss := s[i : i+4 : i+4]
		dd[0] = min(dd[0], ss[0])
		dd[1] = min(dd[1], ss[1])
		dd[2] = min(dd[2], ss[2])
		dd[3] = min(dd[3], ss[3])
	}
	for ; i < len(d); i++ {
		d[i] = min(d[i], s[i])
	}
}

// typedOp applies op to typed slices of equal length.
func typedOp[T number](d, s []T, op Op) {
	switch op {
	case OpSum:
		sumSlice(d, s)
	case OpProd:
		prodSlice(d, s)
	case OpMax:
		maxSlice(d, s)
	case OpMin:
		minSlice(d, s)
	}
}
