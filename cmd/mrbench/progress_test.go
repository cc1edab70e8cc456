package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProgressClearsBeforeRows: the bar is erased once before each line the
// table prints (stdout and stderr may be one terminal), and not at all
// when it is not on the screen.
func TestProgressClearsBeforeRows(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, total: 2}
	p.clear()
	assert.Empty(t, b.String(), "nothing to erase before the first step")
	p.step("tcp float 1K")
	p.clear()
	p.clear()
	assert.Equal(t, "\r\033[K[###############               ] 1/2 tcp float 1K\r\033[K", b.String())
	assert.NotPanics(t, func() { (*progress)(nil).clear(); (*progress)(nil).step("x") })
}
