package baseline

import (
	"slices"
	"time"
)

// sortDurations sorts d in increasing order.
func sortDurations(d []time.Duration) { slices.Sort(d) }
