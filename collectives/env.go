package collectives

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// BootstrapFromEnv reads the rank layout from the environment a launcher
// left behind, in this order: our own METAROCE_RANK/METAROCE_NRANKS
// (METAROCE_LOCAL_RANK, METAROCE_ROOT); torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT); Open MPI (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK); Slurm (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID). The rendezvous address comes from
// METAROCE_ROOT, else MASTER_ADDR:MASTER_PORT, else (single-host Open MPI or
// Slurm jobs) 127.0.0.1:29517. It reports false when no launcher is found.
func BootstrapFromEnv() (Bootstrap, bool, error) {
	return bootstrapFrom(os.LookupEnv)
}

// DefaultRootPort is the rendezvous port used when a launcher gives none.
const DefaultRootPort = 29517

func bootstrapFrom(get func(string) (string, bool)) (Bootstrap, bool, error) {
	type scheme struct{ name, rank, size, local string }
	schemes := []scheme{
		{"metaroce", "METAROCE_RANK", "METAROCE_NRANKS", "METAROCE_LOCAL_RANK"},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	}
	for _, s := range schemes {
		rs, ok1 := get(s.rank)
		ns, ok2 := get(s.size)
		if !ok1 || !ok2 {
			continue
		}
		b := Bootstrap{Source: s.name}
		var err error
		if b.Rank, err = strconv.Atoi(rs); err != nil {
			return b, true, fmt.Errorf("collectives: %s=%q is not a rank number", s.rank, rs)
		}
		if b.NRanks, err = strconv.Atoi(ns); err != nil {
			return b, true, fmt.Errorf("collectives: %s=%q is not a rank count", s.size, ns)
		}
		if ls, ok := get(s.local); ok {
			if b.LocalRank, err = strconv.Atoi(ls); err != nil {
				return b, true, fmt.Errorf("collectives: %s=%q is not a local rank", s.local, ls)
			}
		}
		root, _ := get("METAROCE_ROOT")
		if root == "" {
			addr, ok1 := get("MASTER_ADDR")
			port, ok2 := get("MASTER_PORT")
			switch {
			case ok1 && ok2:
				// torchrun's own store listens on MASTER_PORT; ours
				// takes the next port.
				p, err := strconv.Atoi(port)
				if err != nil {
					return b, true, fmt.Errorf("collectives: MASTER_PORT=%q is not a port", port)
				}
				root = net.JoinHostPort(addr, strconv.Itoa(p+1))
			default:
				root = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultRootPort))
			}
		}
		b.Root = root
		return b, true, b.check()
	}
	return Bootstrap{}, false, nil
}
