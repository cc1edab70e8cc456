package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxSweepBytes bounds every size flag (1 TiB): larger values are typos, and
// the per-rank buffers of the sweep are allocated in host memory.
const maxSweepBytes = 1 << 40

// parseSize parses a byte count the way nccl-tests does: a non-negative
// integer with an optional binary suffix K, M, G or T (case-insensitive, an
// optional trailing "B" or "iB" accepted), so "64M" is 64×2^20 bytes.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	u := strings.ToUpper(t)
	if strings.HasSuffix(u, "IB") {
		u = strings.TrimSuffix(u, "IB")
	} else {
		u = strings.TrimSuffix(u, "B")
	}
	shift := 0
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			u = u[:n-1]
		}
	}
	v, err := strconv.ParseInt(u, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative integer with an optional K, M, G or T suffix", s)
	}
	if v > maxSweepBytes>>shift {
		return 0, fmt.Errorf("size %q exceeds the %d-byte limit", s, int64(maxSweepBytes))
	}
	return v << shift, nil
}

// formatSize renders n bytes compactly with a binary suffix when exact
// ("64M", "4K", "100"), the inverse of parseSize for headers and file names.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "G"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// maxSweepSizes bounds the number of points of one sweep, so that a step of
// one byte over a large range is an error instead of a run that never ends.
const maxSweepSizes = 4096

// sweepSizes lists the sizes of a sweep as nccl-tests does: from min while
// size <= max, multiplying by factor when factor > 1, else adding step bytes.
func sweepSizes(min, max int64, factor float64, step int64) ([]int64, error) {
	if max < min {
		return nil, fmt.Errorf("max bytes %d is below min bytes %d", max, min)
	}
	if factor > 1 {
		if min == 0 {
			return nil, fmt.Errorf("a step factor needs min bytes > 0")
		}
	} else if step <= 0 && max > min {
		return nil, fmt.Errorf("step bytes must be > 0 (or use a step factor > 1)")
	}
	var out []int64
	for size := min; size <= max; {
		if len(out) == maxSweepSizes {
			return nil, fmt.Errorf("the sweep has more than %d sizes; raise the step", maxSweepSizes)
		}
		out = append(out, size)
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
			return nil, fmt.Errorf("step factor %g does not grow size %d", factor, size)
		}
		size = next
	}
	return out, nil
}
