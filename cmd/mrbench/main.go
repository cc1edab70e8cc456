// Command mrbench is metaroce's benchmark: nccl-tests-style sweeps of a
// collective over sizes, first over MetaRoCE and then over kernel TCP, with
// ranks launched in this process or joined from mpirun, torchrun or srun; the
// same sweeps through RCCL/NCCL on GPU buffers (--backend rccl); and the
// fabric simulator's scenarios (mrbench sim).
//
// The output follows nccl-tests' all_reduce_perf line for line, so scripts
// that read nccl-tests read mrbench. --json, --csv and --plot write the same
// figures as files; SCHEMA.md documents the JSON.
package main

import (
	"context"
	"os"

	"github.com/metaroce/metaroce/internal/interrupt"
)

// version is mrbench's version, printed in every header; release builds set
// it with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	// The first signal ends the run, which still writes what it measured.
	ctx, stop := interrupt.Context(context.Background())
	// After SIGINT, SIGTERM or SIGHUP (a closed terminal, which must still
	// tear a --netlab fabric down) the code is 128 plus the signal's
	// number, as a shell reports a command the signal ended.
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
