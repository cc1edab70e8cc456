package scenarios_test

import (
	"os"

	"github.com/metaroce/metaroce/fabric/sim/scenarios"
)

// Example runs the smoke variant of one scenario and writes its result as
// CSV. The full 64-node catalogue is the same call with Smoke false for
// each of scenarios.Names().
func Example() {
	res, err := scenarios.Run("loss", scenarios.Options{Seed: 1, Smoke: true})
	if err != nil {
		panic(err)
	}
	_ = res.WriteCSV(os.Stdout)
}
