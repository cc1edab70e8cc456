package tcpnet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

// TestNoMatchingInterfaceIsInvalidUsageTCP: METAROCE_IFNAMES naming no usable
// interface is the user's setting to fix (ncclInvalidUsage), quoted in
// the error like every other bad variable, not a system error.
func TestNoMatchingInterfaceIsInvalidUsageTCP(t *testing.T) {
	_, err := New(Config{IfNames: "nosuch"})
	require.ErrorIs(t, err, backend.ErrInvalidUsage)
	require.ErrorContains(t, err, `METAROCE_IFNAMES="nosuch"`)
}
