package main

import (
	"fmt"
	"math"

	"github.com/metaroce/metaroce/internal/bytesize"
)

// maxSweepBytes bounds every size flag (1 TiB): larger values are typos, and
// the per-rank buffers of the sweep are allocated in host memory.
const maxSweepBytes = 1 << 40

// maxSweepSizes bounds the number of points of one sweep, so that a step of
// one byte over a large range is an error instead of a run that never ends.
const maxSweepSizes = 4096

// sweepSizes lists the sizes of a sweep as nccl-tests does: from min while
// size <= max, multiplying by factor when factor > 1, else adding step bytes.
// A sweep whose min is its max is that one size, whatever the step, so
// that min = max = 0 is one row of size 0 (count 0, as nccl-tests runs
// it); a factor cannot grow a min of 0 towards a larger max.
func sweepSizes(min, max int64, factor float64, step int64) ([]int64, error) {
	if max < min {
		return nil, fmt.Errorf("-e %s is below -b %s: the sweep runs from -b up to -e", bytesize.Format(max), bytesize.Format(min))
	}
	if factor > 1 {
		if min == 0 && max > 0 {
			return nil, fmt.Errorf("-b 0: a step factor (-f) never grows a size of 0")
		}
	} else if step <= 0 && max > min {
		return nil, fmt.Errorf("-i must be above 0 (or step by a factor above 1 with -f)")
	}
	var out []int64
	for size := min; size <= max; {
		if len(out) == maxSweepSizes {
			return nil, fmt.Errorf("the sweep has more than %d sizes; raise the step (-i or -f)", maxSweepSizes)
		}
		out = append(out, size)
		if size == max {
			break // the last size: no next one to grow to
		}
		var next int64
		if factor > 1 {
			f := math.Floor(float64(size) * factor)
			if f > maxSweepBytes {
				break
			}
			next = int64(f)
		} else {
			if step <= 0 {
				break
			}
			next = size + step
		}
		if next <= size {
			return nil, fmt.Errorf("-f %g does not grow size %d: want a factor that does, such as 2", factor, size)
		}
		size = next
	}
	return out, nil
}
