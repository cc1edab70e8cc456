package collectives

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
	"github.com/stretchr/testify/require"
)

// value is the deterministic input element i of rank r: a small integer so
// every dtype represents sums and products of up to 8 ranks exactly.
func value(r, i int) float64 { return float64((r*7+i*3)%3 + 1) }

// fill encodes values into a buffer of dtype dt.
func fill(dt reduce.DType, n int, f func(i int) float64) []byte {
	b := make([]byte, n*dt.Size())
	for i := 0; i < n; i++ {
		reduce.PutFloat(b[i*dt.Size():], dt, f(i))
	}
	return b
}

// reference computes rank r's expected output of a collective with the
// dumbest possible model: elementwise over ranks, in rank order.
func reference(coll sched.Collective, dt reduce.DType, op reduce.Op, n, r, count, root int) []byte {
	in := func(k int, len int) []byte { return fill(dt, len, func(i int) float64 { return value(k, i) }) }
	premul := reduce.PreMultiplies(dt, op)
	combine := func(blocks [][]byte) []byte {
		if premul { // floating-point avg: scale each input by 1/n, then sum
			for i, b := range blocks {
				blocks[i] = make([]byte, len(b))
				if err := reduce.PreMultiply(blocks[i], b, dt, n); err != nil {
					panic(err)
				}
			}
		}
		out := append([]byte(nil), blocks[0]...)
		for _, b := range blocks[1:] {
			if err := reduce.Reduce(out, b, dt, op); err != nil {
				panic(err)
			}
		}
		if op == reduce.OpAvg && !premul {
			if err := reduce.DivideBy(out, dt, n); err != nil {
				panic(err)
			}
		}
		return out
	}
	es := dt.Size()
	switch coll {
	case sched.AllReduce:
		var bl [][]byte
		for k := 0; k < n; k++ {
			bl = append(bl, in(k, count))
		}
		return combine(bl)
	case sched.ReduceScatter:
		var bl [][]byte
		for k := 0; k < n; k++ {
			bl = append(bl, in(k, n*count)[r*count*es:(r+1)*count*es])
		}
		return combine(bl)
	case sched.AllGather:
		var out []byte
		for k := 0; k < n; k++ {
			out = append(out, in(k, count)...)
		}
		return out
	case sched.AllToAll:
		var out []byte
		for k := 0; k < n; k++ {
			out = append(out, in(k, n*count)[r*count*es:(r+1)*count*es]...)
		}
		return out
	case sched.Broadcast:
		return in(root, count)
	case sched.SendRecv:
		return in((r-1+n)%n, count)
	}
	panic("collective")
}

// sameResult compares an output with the reference: bit for bit, or, for a
// floating-point average, whose rounding depends on the order of the sum,
// within twice the bound each keeps to the exact mean (inputs are at most 3).
func sameResult(coll sched.Collective, dt reduce.DType, op reduce.Op, n int, got, want []byte) bool {
	if !coll.Reduces() || !reduce.PreMultiplies(dt, op) {
		return bytes.Equal(got, want)
	}
	return reduce.CountFar(got, want, dt, 2*reduce.PreMulSumTolerance(dt, n, 3)) == 0
}

// runOne runs one collective on comm c and checks the result.
func runOne(ctx context.Context, c *Comm, coll sched.Collective, dt reduce.DType, op reduce.Op, count int, inplace bool) error {
	n, r := c.Size(), c.Rank()
	inLen, outLen := count, count
	switch coll {
	case sched.ReduceScatter:
		inLen = n * count
	case sched.AllGather:
		outLen = n * count
	case sched.AllToAll:
		inLen, outLen = n*count, n*count
	}
	send := fill(dt, inLen, func(i int) float64 { return value(r, i) })
	recv := make([]byte, outLen*dt.Size())
	root := n - 1
	var err error
	if inplace {
		// In place: the input sits where NCCL's in-place layout puts it.
		switch coll {
		case sched.AllGather:
			copy(recv[r*count*dt.Size():], send)
		case sched.ReduceScatter:
			recv = send
		default:
			copy(recv, send)
		}
		send = nil
	}
	switch coll {
	case sched.AllReduce:
		err = c.AllReduce(ctx, send, recv, dt, op)
	case sched.ReduceScatter:
		err = c.ReduceScatter(ctx, send, recv, dt, op)
		if inplace {
			recv = recv[r*count*dt.Size() : (r+1)*count*dt.Size()]
		}
	case sched.AllGather:
		err = c.AllGather(ctx, send, recv, dt)
	case sched.AllToAll:
		err = c.AllToAll(ctx, send, recv, dt)
	case sched.Broadcast:
		err = c.Broadcast(ctx, send, recv, dt, root)
	case sched.SendRecv:
		err = c.SendRecv(ctx, send, recv, dt)
	}
	if err != nil {
		return err
	}
	want := reference(coll, dt, op, n, r, count, root)
	if !sameResult(coll, dt, op, n, recv[:len(want)], want) {
		return fmt.Errorf("rank %d: %v %v %v count %d inplace %v: wrong result", r, coll, dt, op, count, inplace)
	}
	return nil
}

var testColls = []sched.Collective{sched.AllReduce, sched.ReduceScatter, sched.AllGather, sched.AllToAll, sched.Broadcast, sched.SendRecv}

func TestCollectivesMatchReference(t *testing.T) {
	ranks := []int{1, 2, 3, 4}
	if !testing.Short() {
		ranks = append(ranks, 5, 8)
	}
	for _, transport := range []string{TransportMetaRoCE, TransportTCP} {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/%d", transport, n), func(t *testing.T) {
				cfg := Config{Transport: transport, Timeout: 60 * time.Second, ChunkBytes: 4096}
				counts := []int{0, 1, 7, 1023, 5000}
				err := LaunchLocal(context.Background(), n, cfg, func(c *Comm) error {
					ctx := context.Background()
					for _, coll := range testColls {
						for _, dt := range []reduce.DType{reduce.Int8, reduce.Uint8, reduce.Int32, reduce.Uint32, reduce.Int64, reduce.Uint64, reduce.Float16, reduce.BFloat16, reduce.Float32, reduce.Float64} {
							ops := []reduce.Op{reduce.OpSum}
							if coll.Reduces() && (dt == reduce.Float32 || dt == reduce.Int32) {
								ops = reduce.AllOps()
							}
							for _, op := range ops {
								for _, cnt := range counts {
									for _, ip := range []bool{false, true} {
										if err := runOne(ctx, c, coll, dt, op, cnt, ip); err != nil {
											return err
										}
									}
								}
							}
						}
					}
					return nil
				})
				require.NoError(t, err)
			})
		}
	}
}

func TestCollectivesUnderLoss(t *testing.T) {
	// One path per plane is the default on loopback; four is what the
	// ranks of a fabric use, where a message's datagrams and their losses
	// spread over several paths.
	for _, paths := range []int{0, 4} {
		t.Run(fmt.Sprintf("paths=%d", paths), func(t *testing.T) {
			cfg := Config{Timeout: 60 * time.Second}
			cfg.UDP.DropProb = 0.01
			cfg.UDP.Seed = 7
			cfg.UDP.Core.PathsPerPlane = paths
			want := paths
			if paths == 0 {
				want = LoopbackPathsPerPlane
			}
			err := LaunchLocal(context.Background(), 4, cfg, func(c *Comm) error {
				if got := c.LinkInfo().PathsPerPlane; got != want {
					return fmt.Errorf("rank %d: %d paths per plane, want %d", c.Rank(), got, want)
				}
				for _, coll := range []sched.Collective{sched.AllReduce, sched.AllToAll} {
					for _, cnt := range []int{1, 4099, 300000} {
						if err := runOne(context.Background(), c, coll, reduce.Float32, reduce.OpSum, cnt, false); err != nil {
							return err
						}
					}
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestLoopbackPathsEndToEnd: ranks launched on loopback open
// LoopbackPathsPerPlane paths to each peer, and ranks whose driver
// blackholes ports (standing in for failing paths of a fabric) the
// datapath's four, as their connections' path counters show.
func TestLoopbackPathsEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blackhole []int
		want      int
	}{
		{"loopback", nil, LoopbackPathsPerPlane},
		{"blackholing driver", []int{15}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Timeout: 30 * time.Second}
			cfg.UDP.Blackhole = tc.blackhole
			err := LaunchLocal(context.Background(), 2, cfg, func(c *Comm) error {
				if got := c.LinkInfo().PathsPerPlane; got != tc.want {
					return fmt.Errorf("rank %d: LinkInfo says %d paths per plane, want %d", c.Rank(), got, tc.want)
				}
				if err := runOne(context.Background(), c, sched.AllReduce, reduce.Float32, reduce.OpSum, 1<<16, false); err != nil {
					return err
				}
				for _, ps := range c.PeerStats() {
					if len(ps.Paths) != tc.want {
						return fmt.Errorf("rank %d: %d paths to rank %d, want %d", c.Rank(), len(ps.Paths), ps.Rank, tc.want)
					}
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestRankDeathIsAnError: when one rank stops, the others get an error
// within the deadline instead of hanging, and the first to notice names it.
// The others may then see the failure cascade through the ranks that gave
// up before them: those errors say that the rank they name closed its
// connections, not that it failed.
func TestRankDeathIsAnError(t *testing.T) {
	for _, transport := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(transport, func(t *testing.T) {
			cfg := Config{Transport: transport, Timeout: 5 * time.Second}
			cfg.UDP.Core.IdleTimeout = 1e9 // 1 s: notice the dead peer quickly
			var mu sync.Mutex
			var errs []error
			start := time.Now()
			err := LaunchLocal(context.Background(), 3, cfg, func(c *Comm) error {
				if c.Rank() == 2 {
					return c.Close() // leaves without taking part
				}
				buf := make([]byte, 1<<20)
				err := c.AllReduce(context.Background(), nil, buf, reduce.Float32, reduce.OpSum)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return err
			})
			require.Error(t, err)
			require.Less(t, time.Since(start), 30*time.Second, "the failure must surface within the deadline")
			named := false
			for _, e := range errs {
				require.Error(t, e, "an all-reduce without rank 2 cannot succeed")
				named = named || strings.Contains(e.Error(), "rank 2")
				// A rank failed by a live peer that gave up must not
				// read as if that peer were the cause.
				if !strings.Contains(e.Error(), "to rank 2 ") && !strings.Contains(e.Error(), "from rank 2 ") {
					require.Contains(t, e.Error(), "closed its connections, during this call or before it", "an error that blames a rank that only gave up")
				}
			}
			require.True(t, named, "no error names the rank that left: %v", errs)
		})
	}
}

func TestBootstrapFromEnv(t *testing.T) {
	cases := []struct {
		env  map[string]string
		ok   bool
		want Bootstrap
		err  string
	}{
		{env: map[string]string{}, ok: false},
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 4, LocalRank: 1, Root: "10.0.0.1:29501", Source: "torchrun"}},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}, ok: true,
			want: Bootstrap{Rank: 3, NRanks: 4, LocalRank: 3, Root: "127.0.0.1:29517", Source: "openmpi"}},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 3, NRanks: 8, LocalRank: 3, LocalSize: 4, SpansHosts: true, Root: "n0:7000", Source: "openmpi"}},
		// A job over several hosts needs a rendezvous address every host
		// reaches: 127.0.0.1 would leave each host waiting on its own.
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, ok: true, err: "span several hosts"},
		{env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NNODES": "2"}, ok: true, err: "span several hosts"},
		{env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_NODES": "1", "SLURM_NNODES": "2"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 4, Root: "127.0.0.1:29517", Source: "slurm"}},
		// Slurm's per-node task counts: "N(xM)" is N on every node, a
		// list is no single count.
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "4(x1)"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 4, LocalSize: 4, Root: "127.0.0.1:29517", Source: "slurm"}},
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "6", "SLURM_NTASKS_PER_NODE": "4,2", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 6, Root: "n0:7000", Source: "slurm"}},
		// A repeated count first in a list is still a list: this node
		// may be the one with 2.
		{env: map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "10", "SLURM_NTASKS_PER_NODE": "4(x2),2", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 9, NRanks: 10, Root: "n0:7000", Source: "slurm"}},
		// The step's own layout, where srun gives it, wins over the
		// count asked for: srun -n 4 over 4 nodes of an allocation with
		// --ntasks-per-node=4 places one task on each, not 4.
		{env: map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_TASKS_PER_NODE": "1(x4)", "SLURM_NODEID": "2", "SLURM_STEP_NUM_NODES": "4", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 2, NRanks: 4, LocalSize: 1, SpansHosts: true, Root: "n0:7000", Source: "slurm"}},
		// A list is read at this node's index, repeats expanded.
		{env: map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "10", "SLURM_NTASKS_PER_NODE": "4(x2),2", "SLURM_STEP_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "2", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 9, NRanks: 10, LocalSize: 2, SpansHosts: true, Root: "n0:7000", Source: "slurm"}},
		{env: map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "10", "SLURM_STEP_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "1", "METAROCE_ROOT": "n0:7000"}, ok: true,
			want: Bootstrap{Rank: 5, NRanks: 10, LocalSize: 4, SpansHosts: true, Root: "n0:7000", Source: "slurm"}},
		// A layout that does not parse, or no entry for this node,
		// falls back to the count asked for.
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_TASKS_PER_NODE": "4(y2)", "SLURM_NODEID": "0"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 4, LocalSize: 4, Root: "127.0.0.1:29517", Source: "slurm"}},
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_TASKS_PER_NODE": "4", "SLURM_NODEID": "1"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 4, LocalSize: 4, Root: "127.0.0.1:29517", Source: "slurm"}},
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "65535"}, ok: true, err: "not a port in 1..65534"},
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "0"}, ok: true, err: "not a port"},
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 4, LocalSize: 2, SpansHosts: true, Root: "h:2", Source: "torchrun"}},
		{env: map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "2", "METAROCE_LOCAL_SIZE": "0"}, ok: true, err: "METAROCE_LOCAL_SIZE=\"0\" is not a rank count"},
		{env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": "node1:7000"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 2, Root: "node1:7000", Source: "slurm"}},
		{env: map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "1"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 1, Root: "127.0.0.1:29517", Source: "metaroce"}},
		// The launcher's job identity, and from it the default port.
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_MCA_ess_base_jobid": "1130102785", "PMIX_NAMESPACE": "x"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:29811", Source: "openmpi", Job: "1130102785"}},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "PMIX_NAMESPACE": "prterun-h-1@1"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: fmt.Sprintf("127.0.0.1:%d", RootPort("prterun-h-1@1")), Source: "openmpi", Job: "prterun-h-1@1"}},
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:30893", Source: "slurm", Job: "77.3"}},
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "78", "SLURM_HET_JOB_ID": "77"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: fmt.Sprintf("127.0.0.1:%d", RootPort("77")), Source: "slurm", Job: "77"}},
		// METAROCE_JOB names the job under any launcher.
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_MCA_ess_base_jobid": "42", "METAROCE_JOB": "mine"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: fmt.Sprintf("127.0.0.1:%d", RootPort("mine")), Source: "openmpi", Job: "mine"}},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5", "TORCHELASTIC_RUN_ID": "none"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 2, Root: "h:6", Source: "torchrun"}},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5", "TORCHELASTIC_RUN_ID": "run7"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 2, Root: "h:6", Source: "torchrun", Job: "run7"}},
		{env: map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "2", "METAROCE_JOB": "j", "METAROCE_ROOT": "h:9"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 2, Root: "h:9", Source: "metaroce", Job: "j"}},
		{env: map[string]string{"RANK": "x", "WORLD_SIZE": "4"}, ok: true, err: "not a rank number"},
		{env: map[string]string{"RANK": "5", "WORLD_SIZE": "4"}, ok: true, err: "outside"},
		// Half of a pair that is only ever set whole is a broken
		// environment, not a plain run: every process of the intended
		// job would otherwise run a job of its own.
		{env: map[string]string{"METAROCE_RANK": "1"}, ok: true, err: `METAROCE_RANK="1" is set but METAROCE_NRANKS is not`},
		{env: map[string]string{"METAROCE_NRANKS": "2", "RANK": "0", "WORLD_SIZE": "2"}, ok: true, err: `METAROCE_NRANKS="2" is set but METAROCE_RANK is not`},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, ok: true, err: `OMPI_COMM_WORLD_RANK="0" is set but OMPI_COMM_WORLD_SIZE is not`},
		// RANK and WORLD_SIZE are names other software uses, and a Slurm
		// batch shell has SLURM_PROCID alone: halves of those are no
		// launcher.
		{env: map[string]string{"RANK": "0"}, ok: false},
		{env: map[string]string{"SLURM_PROCID": "0", "SLURM_JOB_ID": "5"}, ok: false},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "-1", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true, err: `LOCAL_RANK="-1" is not a local rank`},
		// A local rank outside the host's ranks is refused where the
		// launcher sets it per process; a local size above the job's
		// (an allocation's count copied into LOCAL_WORLD_SIZE, or
		// Slurm's own) is read as the job's.
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "5", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 2, LocalSize: 2, allocLocal: true, Root: "h:6", Source: "torchrun"}},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			want: Bootstrap{Rank: 0, NRanks: 1, LocalSize: 1, allocLocal: true, Root: "h:6", Source: "torchrun"}},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			err: `LOCAL_RANK=7 is outside 0..1, the ranks on this host (LOCAL_WORLD_SIZE="4", WORLD_SIZE=2)`},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			err: `LOCAL_RANK=3 is outside 0..0, the ranks on this host (LOCAL_WORLD_SIZE="1", WORLD_SIZE=2)`},
		{env: map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "2", "METAROCE_LOCAL_RANK": "5", "METAROCE_LOCAL_SIZE": "2"}, ok: true,
			err: `METAROCE_LOCAL_RANK=5 is outside 0..1`},
		// Without a local size, the host's ranks are at most the job's.
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "7", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			err: `LOCAL_RANK=7 is outside 0..1, the ranks of the job (WORLD_SIZE=2); LOCAL_WORLD_SIZE is not set`},
		{env: map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "1", "METAROCE_LOCAL_RANK": "1"}, ok: true,
			err: `METAROCE_LOCAL_RANK=1 is outside 0..0`},
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, LocalRank: 1, Root: "h:6", Source: "torchrun"}},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, ok: true,
			err: `OMPI_COMM_WORLD_LOCAL_RANK=2 is outside 0..1`},
		{env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, LocalRank: 1, LocalSize: 2, allocLocal: true, Root: "127.0.0.1:29517", Source: "slurm"}},
	}
	for i, tc := range cases {
		b, ok, err := bootstrapFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		require.Equal(t, tc.ok, ok, "case %d", i)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		if ok {
			b.Vars = BootstrapVars{} // TestBootstrapVars checks them
			require.Equal(t, tc.want, b, "case %d", i)
		}
	}
}

func TestCPUShare(t *testing.T) {
	cases := []struct {
		local, ncpu, procs int
		spin               bool
	}{
		{local: 0, ncpu: 8, procs: 8, spin: true}, // not reported: the host is ours
		{local: 1, ncpu: 8, procs: 8, spin: true},
		{local: 2, ncpu: 8, procs: 4, spin: true},
		{local: 3, ncpu: 8, procs: 2, spin: true},
		{local: 8, ncpu: 8, procs: 1, spin: true},
		{local: 9, ncpu: 8, procs: 1, spin: false},
		{local: 4, ncpu: 2, procs: 1, spin: false},
		{local: 2, ncpu: 2, procs: 1, spin: true},
		{local: 2, ncpu: 3, procs: 1, spin: true},
	}
	for _, c := range cases {
		procs, spin := Bootstrap{LocalSize: c.local}.CPUShare(c.ncpu)
		require.Equal(t, c.procs, procs, "%d local ranks on %d CPUs", c.local, c.ncpu)
		require.Equal(t, c.spin, spin, "%d local ranks on %d CPUs", c.local, c.ncpu)
	}
}

// TestBootstrapNamesMissingRanks: the root reports exactly which ranks
// never joined, and so does a rank that joined and waits: the root tells
// it why before it closes the connection, and the rank, whose deadline
// is the root's, reads on for a moment past it (it used to blame a
// version mismatch, or the deadline).
func TestBootstrapNamesMissingRanks(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	// One deadline for both, as ranks given the same -T have: rank 1
	// waits past its own for rank 0's word (echoGrace).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 1, NRanks: 4, Root: root, Source: "test"}, []byte("one"))
		done <- err
	}()
	joined := make(chan int, 1)
	_, err = exchange(ctx, Bootstrap{Rank: 0, NRanks: 4, Root: root, Source: "test", joined: func(r int) { joined <- r }}, []byte("zero"))
	require.ErrorContains(t, err, "ranks [2 3] of 4 never joined")
	require.Equal(t, 1, <-joined, "rank 1 joined before the deadline")
	leafErr := <-done
	require.ErrorContains(t, leafErr, "gave the rendezvous up")
	require.ErrorContains(t, leafErr, "ranks [2 3] of 4 never joined")
	require.NotContains(t, leafErr.Error(), "another version")
}

// TestBootstrapAbortReachesWaitingRanks: when rank 0 gives the rendezvous
// up (here a rank that believes the job has another size), the ranks that
// already joined and the offender learn why, rather than a closed
// connection.
func TestBootstrapAbortReachesWaitingRanks(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rootErr := make(chan error, 1)
	joined := make(chan struct{})
	go func() {
		b := Bootstrap{Rank: 0, NRanks: 4, Root: root, Source: "test", joined: func(int) { close(joined) }}
		_, err := exchange(ctx, b, []byte("zero"))
		rootErr <- err
	}()
	waiting := make(chan error, 1)
	go func() {
		// Rank 1 joins first, by hand, to see the frame it is sent.
		var c net.Conn
		for c == nil && ctx.Err() == nil {
			c, _ = (&net.Dialer{}).DialContext(ctx, "tcp", root)
		}
		if c == nil {
			waiting <- ctx.Err()
			return
		}
		defer c.Close()
		if err := writeFrame(c, 1, 4, 0, []byte("one")); err != nil {
			waiting <- err
			return
		}
		f, err := readFrame(c, 4)
		if err == nil && f.nranks == abortRanks && len(f.blobs) == 1 {
			err = fmt.Errorf("aborted: %s", f.blobs[0])
		}
		waiting <- err
	}()
	select {
	case <-joined:
	case err := <-waiting:
		t.Fatalf("rank 1 did not join: %v", err)
	}
	_, err = exchange(ctx, Bootstrap{Rank: 2, NRanks: 5, Root: root, Source: "test"}, []byte("two"))
	require.ErrorContains(t, err, "gave the rendezvous up")
	require.ErrorContains(t, err, "believes the job has 5 ranks, rank 0 has 4")
	require.ErrorContains(t, err, "a rank of another job at the same address? give each job its own METAROCE_ROOT, or METAROCE_JOB")
	require.ErrorContains(t, <-waiting, "believes the job has 5 ranks")
	require.ErrorContains(t, <-rootErr, "believes the job has 5 ranks")
}

// TestRootPort: the default rendezvous port stays in its span, below the
// ephemeral range, and spreads jobs over the whole span, odd and even
// offsets alike.
func TestRootPort(t *testing.T) {
	require.Equal(t, DefaultRootPort, RootPort(""))
	seen := map[int]bool{}
	var parity [2]int
	for i := range 4096 {
		p := RootPort(strconv.Itoa(1130102785 + i))
		require.GreaterOrEqual(t, p, DefaultRootPort)
		require.Less(t, p, DefaultRootPort+RootPortSpan)
		require.Less(t, p, 32768)
		seen[p] = true
		parity[(p-DefaultRootPort)%2]++
	}
	// 4096 ids on 2048 ports leave about 2048·e^-2 ≈ 277 unused.
	require.Greater(t, len(seen), 1700, "4096 consecutive job ids on %d ports", len(seen))
	require.Greater(t, parity[0], 1500)
	require.Greater(t, parity[1], 1500)
}

// TestBootstrapTurnsAwayOtherJob: a rank of another job that reaches a
// rendezvous is turned away and fails by its deadline with an error saying
// so, and the rendezvous still forms its own job; ranks that do not know
// their job are not checked.
func TestBootstrapTurnsAwayOtherJob(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		blobs [][]byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		blobs, err := exchange(ctx, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", Job: "a"}, []byte("zero"))
		done <- result{blobs, err}
	}()
	// By hand: a hello of job b is answered with a refusal, a frame of no
	// ranks tagged with job a. (Dialing until rank 0 listens.)
	var c net.Conn
	for c == nil {
		c, _ = (&net.Dialer{}).DialContext(ctx, "tcp", root)
		require.NoError(t, ctx.Err())
	}
	require.NoError(t, writeFrame(c, 1, 3, jobTag("b"), []byte("stray")))
	f, err := readFrame(c, 3)
	c.Close()
	require.NoError(t, err)
	require.Equal(t, frame{magic: bootMagic, tag: jobTag("a")}, f)
	// A rank of job b, turned away until its deadline, says so. The
	// deadline must cover one dial and refusal on a loaded host.
	strayCtx, strayCancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = exchange(strayCtx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test", Job: "b"}, []byte("stray"))
	strayCancel()
	require.ErrorContains(t, err, "another job")
	require.ErrorContains(t, err, "give each job its own METAROCE_ROOT")

	leaf := make(chan error, 1)
	go func() {
		_, err := exchange(ctx, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test", Job: "a"}, []byte("one"))
		leaf <- err
	}()
	blobs, err := exchange(ctx, Bootstrap{Rank: 2, NRanks: 3, Root: root, Source: "test"}, []byte("two"))
	require.NoError(t, err)
	require.NoError(t, <-leaf)
	r := <-done
	require.NoError(t, r.err)
	want := [][]byte{[]byte("zero"), []byte("one"), []byte("two")}
	require.Equal(t, want, r.blobs)
	require.Equal(t, want, blobs)
}

// TestBootstrapPortInUse: a rendezvous address that something else holds
// gets an error that says what to do.
func TestBootstrapPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = exchange(ctx, Bootstrap{Rank: 0, NRanks: 2, Root: ln.Addr().String(), Source: "test"}, []byte("zero"))
	require.ErrorContains(t, err, "address already in use")
	require.ErrorContains(t, err, "give each job its own METAROCE_ROOT")
}

// FuzzReadFrame: any bytes give a frame within its bounds or an error,
// never a panic, and a written frame reads back as written.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	require.NoError(f, writeFrame(&buf, 1, 4, jobTag("j"), []byte("blob")))
	f.Add(buf.Bytes(), 1)
	buf.Reset()
	require.NoError(f, writeFrame(&buf, 0, 2, 0, []byte("a"), []byte("")))
	f.Add(buf.Bytes(), 2)
	f.Add([]byte("MRB7"), 1)
	buf.Reset()
	require.NoError(f, writeFrameMagic(&buf, prevMagic, 1, 2, 0, []byte("old")))
	f.Add(buf.Bytes(), 1)
	f.Fuzz(func(t *testing.T, data []byte, maxBlobs int) {
		maxBlobs = max(maxBlobs%8, 0)
		fr, err := readFrame(bytes.NewReader(data), maxBlobs)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(fr.blobs), maxBlobs)
		var out bytes.Buffer
		require.NoError(t, writeFrame(&out, fr.rank, fr.nranks, fr.tag, fr.blobs...))
		require.Equal(t, data[:out.Len()], out.Bytes(), "a frame reads back as written")
	})
}

// TestPlansDeclareTheirSenders: before each plan the executor declares to
// the MetaRoCE endpoint how many peers will send to the rank at once, at
// most the endpoint's configured bound (none by default): one for a ring
// all-reduce, and for this 4-rank all-to-all (1.2 MB per peer: three
// 512 KiB lanes, 8 messages in flight, so two rounds) two.
func TestPlansDeclareTheirSenders(t *testing.T) {
	cfg := Config{Transport: TransportMetaRoCE, Timeout: 60 * time.Second}
	err := LaunchLocal(context.Background(), 4, cfg, func(c *Comm) error {
		l, ok := c.link.(*metaroceLink)
		if !ok {
			return fmt.Errorf("link %T", c.link)
		}
		for _, s := range []struct {
			coll sched.Collective
			want int
		}{{sched.AllReduce, 1}, {sched.AllToAll, 2}, {sched.AllReduce, 1}} {
			if err := runOne(context.Background(), c, s.coll, reduce.Float32, reduce.OpSum, 300000, false); err != nil {
				return err
			}
			if l.senders != s.want {
				return fmt.Errorf("rank %d after %v: %d senders declared, want %d", c.Rank(), s.coll, l.senders, s.want)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// TestGroupedAllReduce: told that the ranks come in groups (as under leaf
// switches or on hosts), the all-reduce takes the hierarchical ring where
// sched.ChooseAlgorithm says so and still matches the reference, over both
// transports; a group size that does not divide the ranks is refused up
// front, naming both numbers.
func TestGroupedAllReduce(t *testing.T) {
	const n, group = 4, 2
	// 64 Ki float32 (256 KiB): 64 KiB blocks, the hierarchical ring.
	const big = 1 << 16
	require.Equal(t, sched.AlgoHierarchical, sched.ChooseAlgorithm(sched.AllReduce, n, group, big*4))
	for _, transport := range []string{TransportMetaRoCE, TransportTCP} {
		t.Run(transport, func(t *testing.T) {
			cfg := Config{Transport: transport, Timeout: 60 * time.Second, ChunkBytes: 16 << 10, GroupSize: group}
			err := LaunchLocal(context.Background(), n, cfg, func(c *Comm) error {
				for _, cnt := range []int{1, 5000, 40001, big} {
					for _, op := range []reduce.Op{reduce.OpSum, reduce.OpAvg} {
						for _, ip := range []bool{false, true} {
							if err := runOne(context.Background(), c, sched.AllReduce, reduce.Float32, op, cnt, ip); err != nil {
								return err
							}
						}
					}
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
	err := LaunchLocal(context.Background(), 4, Config{GroupSize: 3, Timeout: 10 * time.Second}, func(*Comm) error { return nil })
	require.ErrorContains(t, err, "group size 3 does not divide the 4 ranks")
	_, err = Config{GroupSize: -1}.withDefaults()
	require.ErrorContains(t, err, "group size")
}

// TestTableWithinTheGrace: a rank whose deadline passes while it waits for
// the table, which then comes within echoGrace (the last rank joined just
// after), gets the table and its connection to rank 0 open, on which its
// setup then reports why it stops; the connection was closed under it,
// and rank 0 took the rank for gone.
func TestTableWithinTheGrace(t *testing.T) {
	root, err := freeLocalAddr()
	require.NoError(t, err)
	long, cancelLong := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()

	joined := make(chan int, 2)
	rootDone := make(chan error, 1)
	go func() {
		_, conns, err := exchangeRoot(long, Bootstrap{Rank: 0, NRanks: 3, Root: root, Source: "test", joined: func(r int) { joined <- r }}, []byte("zero"))
		for _, c := range conns {
			if c != nil {
				defer c.Close()
			}
		}
		rootDone <- err
	}()
	type leaf struct {
		c   net.Conn
		err error
	}
	early := make(chan leaf, 1)
	go func() {
		_, c, err := exchangeLeaf(short, Bootstrap{Rank: 1, NRanks: 3, Root: root, Source: "test"}, []byte("one"))
		early <- leaf{c, err}
	}()
	require.Equal(t, 1, <-joined)
	<-short.Done() // rank 1's deadline has passed: now the last rank joins
	_, late, err := exchangeLeaf(long, Bootstrap{Rank: 2, NRanks: 3, Root: root, Source: "test"}, []byte("two"))
	require.NoError(t, err)
	defer late.Close()
	require.NoError(t, <-rootDone)
	got := <-early
	if got.err != nil {
		return // the grace ran out first on a slow host: an error, no closed connection
	}
	defer got.c.Close()
	_, err = got.c.Write([]byte{0})
	require.NoError(t, err, "the table came, and with it a connection closed under the caller")
}
