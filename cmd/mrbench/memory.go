package main

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// availableMemory returns the bytes this process can still allocate: the
// kernel's MemAvailable, lowered to what the cgroup (v2) memory limit
// leaves, when there is one. ok is false when neither can be read.
func availableMemory() (int64, bool) {
	avail, ok := int64(0), false
	if f, err := os.Open("/proc/meminfo"); err == nil {
		avail, ok = parseMemAvailable(f)
		f.Close()
	}
	max, err1 := os.ReadFile("/sys/fs/cgroup/memory.max")
	cur, err2 := os.ReadFile("/sys/fs/cgroup/memory.current")
	if err1 == nil && err2 == nil {
		if left, limited := cgroupLeft(string(max), string(cur)); limited && (!ok || left < avail) {
			avail, ok = left, true
		}
	}
	return avail, ok
}

// parseMemAvailable reads MemAvailable (kB) from /proc/meminfo's text.
func parseMemAvailable(r io.Reader) (int64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// cgroupLeft is memory.max − memory.current; limited is false for "max"
// (no limit) or text that does not parse.
func cgroupLeft(max, cur string) (left int64, limited bool) {
	m, err := strconv.ParseInt(strings.TrimSpace(max), 10, 64)
	if err != nil {
		return 0, false
	}
	c, err := strconv.ParseInt(strings.TrimSpace(cur), 10, 64)
	if err != nil {
		return 0, false
	}
	return m - c, true
}
