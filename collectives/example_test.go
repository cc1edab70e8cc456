package collectives_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/metaroce/metaroce/collectives"
	"github.com/metaroce/metaroce/collectives/reduce"
)

// Four ranks in one process sum a vector of float32 over MetaRoCE on
// loopback. A job of processes joins the same way with
// collectives.BootstrapFromEnv and collectives.New in each process, and
// runs the body of the function below.
func Example() {
	ctx := context.Background()
	cfg := collectives.Config{Timeout: 30 * time.Second}
	sums := make([]float32, 4)
	err := collectives.LaunchLocal(ctx, 4, cfg, func(c *collectives.Comm) error {
		buf := make([]byte, 3*4) // three float32
		for i := range 3 {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(c.Rank()+i)))
		}
		// In place: send nil, the result replaces buf on every rank.
		if err := c.AllReduce(ctx, nil, buf, reduce.Float32, reduce.OpSum); err != nil {
			return fmt.Errorf("rank %d: %w", c.Rank(), err)
		}
		sums[c.Rank()] = math.Float32frombits(binary.LittleEndian.Uint32(buf[8:]))
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sums) // element 2: (0+2) + (1+2) + (2+2) + (3+2)
	// Output: [14 14 14 14]
}
