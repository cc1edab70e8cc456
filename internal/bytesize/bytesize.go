// Package bytesize reads and writes byte counts with binary suffixes, the
// way nccl-tests' size flags do ("64M" is 64×2^20 bytes), so that every
// command of the project accepts and prints sizes alike.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a non-negative integer with an optional binary suffix K, M, G
// or T (case-insensitive; a trailing "B" or "iB" is accepted, so "16MB",
// "16MiB" and "16M" are the same) and refuses values above limit bytes.
func Parse(s string, limit int64) (int64, error) {
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
	if v > limit>>shift { // then v<<shift ≤ limit, and it cannot overflow
		return 0, fmt.Errorf("size %q exceeds the %d-byte limit", s, limit)
	}
	return v << shift, nil
}

// Format writes n bytes with the largest binary suffix that divides it
// exactly ("64M", "1536K", "100"); Parse reads it back to n. Negative
// counts are written as plain integers.
func Format(n int64) string {
	switch {
	case n >= 1<<40 && n%(1<<40) == 0:
		return strconv.FormatInt(n>>40, 10) + "T"
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "G"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}
