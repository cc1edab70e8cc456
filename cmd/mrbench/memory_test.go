package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseMemAvailable(t *testing.T) {
	v, ok := parseMemAvailable(strings.NewReader("MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"))
	assert.True(t, ok)
	assert.Equal(t, int64(20000000)<<10, v)
	_, ok = parseMemAvailable(strings.NewReader("MemTotal: 1 kB\n"))
	assert.False(t, ok)
}

func TestCgroupLeft(t *testing.T) {
	left, limited := cgroupLeft("1073741824\n", "73741824\n")
	assert.True(t, limited)
	assert.Equal(t, int64(1000000000), left)
	_, limited = cgroupLeft("max\n", "5\n")
	assert.False(t, limited)
}

// TestSweepTooLargeForMemory: a sweep whose buffers cannot fit is a usage
// error before anything is allocated, rather than the runtime's fatal
// out-of-memory error (or the OOM killer) later.
func TestSweepTooLargeForMemory(t *testing.T) {
	code, out, errs := runMrbench(t, "-np", "256", "-b", "1T", "-e", "1T", "--transport", "tcp")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "GiB of memory")
	assert.Empty(t, out)
}
