package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/metaroce/metaroce/transport/auth"
)

// checkSecret refuses a METAROCE_SECRET that the MetaRoCE table would
// refuse (too short), before any table runs: found at the end of the TCP
// table, or by every rank of a job alone, it is a configuration error all
// the same (exit 2).
func checkSecret(o *options, tables []string) error {
	if o.Backend != backendHost || !slices.Contains(tables, transportMetaRoCE) {
		return nil
	}
	if _, err := auth.SecretFromEnv(); err != nil && !errors.Is(err, auth.ErrNoSecret) {
		return configError{err}
	}
	return nil
}

// unreadJobVars are the rendezvous and half-launcher variables that ranks
// started in this process (-np) do not read: their rendezvous is on a free
// loopback port, and RANK or WORLD_SIZE alone is no launcher (see
// collectives.BootstrapFromEnv). SLURM_PROCID alone is left out: every
// Slurm batch shell has it.
var unreadJobVars = []string{"METAROCE_ROOT", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}

// noteUnreadJobVars says on stderr which of unreadJobVars are set when the
// ranks run in this process, so that a user who meant to join a job (a
// torchrun variable missing, a typo) sees why mrbench ran on its own
// instead, and one who set METAROCE_ROOT for a local run sees that it is
// not used.
func noteUnreadJobVars(stderr io.Writer, ranks int) {
	var set []string
	for _, v := range unreadJobVars {
		if val, ok := os.LookupEnv(v); ok && val != "" {
			set = append(set, fmt.Sprintf("%s=%q", v, val))
		}
	}
	if len(set) == 0 {
		return
	}
	fmt.Fprintf(stderr, "mrbench: %s not read: no launcher sets this process's rank and rank count (RANK with WORLD_SIZE, mpirun's OMPI_COMM_WORLD_*, SLURM_PROCID with SLURM_NTASKS, METAROCE_RANK with METAROCE_NRANKS), so %d ranks run in this process on a loopback rendezvous\n",
		strings.Join(set, ", "), ranks)
}
