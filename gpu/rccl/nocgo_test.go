//go:build !cgo

package rccl

import (
	"testing"

	"github.com/metaroce/metaroce/gpu/internal/dl"
	"github.com/stretchr/testify/require"
)

// TestOpenWithoutCgo: mrbench --backend rccl reports this error as it is.
func TestOpenWithoutCgo(t *testing.T) {
	_, err := Open("")
	require.ErrorIs(t, err, dl.ErrNoCgo)
	require.ErrorContains(t, err, "rccl: cannot load the RCCL/NCCL library: not available: built without cgo (CGO_ENABLED=0)")
}
