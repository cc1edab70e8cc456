package collectives

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBootstrapRootAddressRefused: a rendezvous address that no rank can
// reach (port 0, no port, a port that is no number or out of range) or a
// MASTER_ADDR/MASTER_PORT pair with one half missing is refused while the
// environment is read, with an error that names the variable and its
// value as set, instead of leaving every rank other than 0 to dial until
// the timeout.
func TestBootstrapRootAddressRefused(t *testing.T) {
	torch := func(kv ...string) map[string]string {
		m := map[string]string{"RANK": "1", "WORLD_SIZE": "2"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	slurm := func(root string) map[string]string {
		return map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "METAROCE_ROOT": root}
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"root port 0", slurm("n0:0"), []string{`METAROCE_ROOT="n0:0"`, "port 0", "1 to 65535"}},
		{"root ipv6 port 0", slurm("[::1]:0"), []string{`METAROCE_ROOT="[::1]:0"`, "port 0"}},
		{"root without port", slurm("n0"), []string{`METAROCE_ROOT="n0"`, "host:port"}},
		{"root with empty port", slurm("n0:"), []string{`METAROCE_ROOT="n0:"`, "no port"}},
		{"root ipv6 without brackets", slurm("fe80::1"), []string{`METAROCE_ROOT="fe80::1"`, "host:port"}},
		{"root port not a number", slurm("n0:rdzv"), []string{`METAROCE_ROOT="n0:rdzv"`, `port "rdzv" is not a number`}},
		{"root port too large", slurm("n0:65536"), []string{`METAROCE_ROOT="n0:65536"`, "1 to 65535"}},
		{"root port negative", slurm("n0:-1"), []string{`METAROCE_ROOT="n0:-1"`, "1 to 65535"}},
		// A single rank never uses the address, but a malformed one is
		// still a mistake in the job's settings.
		{"root port 0, one rank", map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "1", "METAROCE_ROOT": "h:0"},
			[]string{`METAROCE_ROOT="h:0"`, "port 0"}},
		{"master port 0", torch("MASTER_ADDR", "h", "MASTER_PORT", "0"), []string{`MASTER_PORT="0"`, "1..65534"}},
		{"master port not a number", torch("MASTER_ADDR", "h", "MASTER_PORT", "x29500"), []string{`MASTER_PORT="x29500"`, "1..65534"}},
		{"master port negative", torch("MASTER_ADDR", "h", "MASTER_PORT", "-5"), []string{`MASTER_PORT="-5"`, "1..65534"}},
		{"master port 65535", torch("MASTER_ADDR", "h", "MASTER_PORT", "65535"), []string{`MASTER_PORT="65535"`, "the port after it"}},
		{"master port too large", torch("MASTER_ADDR", "h", "MASTER_PORT", "70000"), []string{`MASTER_PORT="70000"`, "1..65534"}},
		{"master addr with a port", torch("MASTER_ADDR", "h:29500", "MASTER_PORT", "29500"), []string{`MASTER_ADDR="h:29500"`, "MASTER_PORT"}},
		// Values pasted from a command's output: `hostname -I` ends
		// with a space, `ip addr` adds the prefix length. No rank
		// reaches such a host; the ranks other than 0 would retry "no
		// such host" until the timeout.
		{"master addr with a trailing space", torch("MASTER_ADDR", "10.0.0.1 ", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="10.0.0.1 "`, "whitespace"}},
		{"master addr of two addresses", torch("MASTER_ADDR", "10.0.0.1 172.17.0.1 ", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="10.0.0.1 172.17.0.1 "`, "whitespace"}},
		{"master addr with a prefix length", torch("MASTER_ADDR", "10.0.0.1/24", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="10.0.0.1/24"`, "without its prefix length: 10.0.0.1, not 10.0.0.1/24"}},
		// The same pasted from an IPv6 host: told as such, not by its
		// first colon.
		{"master addr ipv6 with a trailing space", torch("MASTER_ADDR", "fd00::7 ", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="fd00::7 "`, "whitespace"}},
		{"master addr ipv6 in brackets with a space", torch("MASTER_ADDR", "[fd00::7 ]", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="[fd00::7 ]"`, "whitespace"}},
		{"master addr ipv6 with a prefix length", torch("MASTER_ADDR", "fd00::7/64", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="fd00::7/64"`, "without its prefix length: fd00::7, not fd00::7/64"}},
		{"root ipv6 host with a space", slurm("[fd00::7 ]:7000"), []string{`METAROCE_ROOT="[fd00::7 ]:7000"`, `host "fd00::7 "`, "whitespace"}},
		{"root ipv6 host with a prefix length", slurm("[fd00::7/64]:7000"), []string{`METAROCE_ROOT="[fd00::7/64]:7000"`, "without its prefix length: fd00::7, not fd00::7/64"}},
		{"root host with a space", slurm("n0 :7000"), []string{`METAROCE_ROOT="n0 :7000"`, `host "n0 "`, "whitespace"}},
		{"root host with a comma", slurm("n0,n1:7000"), []string{`METAROCE_ROOT="n0,n1:7000"`, `',' has no place in a host name`}},
		{"master addr without port", torch("MASTER_ADDR", "10.0.0.1"),
			[]string{`MASTER_ADDR="10.0.0.1" is set but MASTER_PORT is not`}},
		{"master addr with empty port", torch("MASTER_ADDR", "10.0.0.1", "MASTER_PORT", ""),
			[]string{`MASTER_ADDR="10.0.0.1" is set but MASTER_PORT is not`}},
		{"master port without addr", torch("MASTER_PORT", "29500"),
			[]string{`MASTER_PORT="29500" is set but MASTER_ADDR is not`}},
		// Under another launcher, half a pair is refused where the job
		// spans hosts and so needs the address.
		{"master addr alone, slurm on two nodes", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NNODES": "2", "MASTER_ADDR": "n0"},
			[]string{`MASTER_ADDR="n0" is set but MASTER_PORT is not`, "slurm job spans hosts"}},
		{"master port alone, open mpi across hosts", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_PORT": "12355"},
			[]string{`MASTER_PORT="12355" is set but MASTER_ADDR is not`, "spans hosts"}},
		// An address that only ever names the dialler's own host, in a
		// job across hosts: the ranks elsewhere would dial themselves.
		{"root without host across hosts", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "METAROCE_ROOT": ":7000"},
			[]string{`METAROCE_ROOT=":7000"`, "no host before the port", "slurm job's 4 ranks span several hosts"}},
		{"root unspecified across hosts", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "METAROCE_ROOT": "0.0.0.0:7000"},
			[]string{`METAROCE_ROOT="0.0.0.0:7000"`, "0.0.0.0 is unspecified"}},
		{"root ipv6 unspecified across hosts", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "METAROCE_ROOT": "[::]:7000"},
			[]string{`METAROCE_ROOT="[::]:7000"`, ":: is unspecified"}},
		{"root localhost across hosts", map[string]string{"METAROCE_RANK": "1", "METAROCE_NRANKS": "4", "METAROCE_LOCAL_SIZE": "2", "METAROCE_ROOT": "localhost:7000"},
			[]string{`METAROCE_ROOT="localhost:7000"`, "localhost is loopback"}},
		{"root loopback on rank 0 across hosts", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "METAROCE_ROOT": "127.0.0.1:7000"},
			[]string{`METAROCE_ROOT="127.0.0.1:7000"`, "127.0.0.1 is loopback"}},
		{"master addr loopback across hosts", torch("LOCAL_WORLD_SIZE", "1", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500"),
			[]string{`MASTER_ADDR="127.0.0.1"`, "127.0.0.1 is loopback", "torchrun job's 2 ranks span several hosts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := bootstrapFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			assert.True(t, ok)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// TestBootstrapRootAddressAccepted: the addresses and pairs that reach a
// rendezvous, and METAROCE_ROOT, which names it by itself, taking
// precedence over MASTER_ADDR/MASTER_PORT even when only half of that pair
// is set.
func TestBootstrapRootAddressAccepted(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		root, by string
	}{
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": "n0:1"}, "n0:1", "METAROCE_ROOT"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": "[fe80::1%eth0]:65535"}, "[fe80::1%eth0]:65535", "METAROCE_ROOT"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": "n0:7000", "MASTER_ADDR": "n1"}, "n0:7000", "METAROCE_ROOT"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "METAROCE_ROOT": "n0:7000", "MASTER_PORT": "29500"}, "n0:7000", "METAROCE_ROOT"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "n0", "MASTER_PORT": "65534"}, "n0:65535", "MASTER_ADDR:MASTER_PORT+1"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "fd00::7", "MASTER_PORT": "29500"}, "[fd00::7]:29501", "MASTER_ADDR:MASTER_PORT+1"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "[fd00::7]", "MASTER_PORT": "29500"}, "[fd00::7]:29501", "MASTER_ADDR:MASTER_PORT+1"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "fe80::1%eth0", "MASTER_PORT": "29500"}, "[fe80::1%eth0]:29501", "MASTER_ADDR:MASTER_PORT+1"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "gpu-node_07.cluster.", "MASTER_PORT": "29500"}, "gpu-node_07.cluster.:29501", "MASTER_ADDR:MASTER_PORT+1"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "METAROCE_ROOT": "gpu-node_07:7000"}, "gpu-node_07:7000", "METAROCE_ROOT"},
		// Both halves empty: as if unset, the single-host default.
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "", "MASTER_PORT": ""}, "127.0.0.1:29517", ""},
		// Half a pair left over in the shell of a single-host Open MPI,
		// Slurm or METAROCE_* job is not read: the single-host default.
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "MASTER_PORT": "12355"}, "127.0.0.1:29517", ""},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NNODES": "1", "MASTER_PORT": "12355"}, "127.0.0.1:29517", ""},
		{map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "1", "MASTER_ADDR": "n0"}, "127.0.0.1:29517", ""},
		// Addresses of this host alone are fine for a job on one host,
		// or one that does not say it spans hosts.
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NNODES": "1", "METAROCE_ROOT": ":7000"}, ":7000", "METAROCE_ROOT"},
		{map[string]string{"METAROCE_RANK": "0", "METAROCE_NRANKS": "2", "METAROCE_ROOT": "0.0.0.0:7000"}, "0.0.0.0:7000", "METAROCE_ROOT"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}, "localhost:29501", "MASTER_ADDR:MASTER_PORT+1"},
		// Rank 0 listens on the address: a wildcard there listens on
		// every interface, also in a job across hosts.
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "METAROCE_ROOT": ":7000"}, ":7000", "METAROCE_ROOT"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "0.0.0.0", "MASTER_PORT": "29500"}, "0.0.0.0:29501", "MASTER_ADDR:MASTER_PORT+1"},
	} {
		b, ok, err := bootstrapFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		require.NoError(t, err, "%v", tc.env)
		assert.True(t, ok, "%v", tc.env)
		assert.Equal(t, tc.root, b.Root, "%v", tc.env)
		assert.Equal(t, tc.by, b.Vars.Root, "%v", tc.env)
	}
}

// TestNewRefusesUnreachableRoot: a Bootstrap filled in by its caller with
// a rendezvous address no rank can reach fails New at once, before any
// socket is opened or dialed, naming Bootstrap.Root (or the variable it
// came from); it does not wait out the timeout dialing port 0.
func TestNewRefusesUnreachableRoot(t *testing.T) {
	for _, tc := range []struct {
		b    Bootstrap
		want string
	}{
		{Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:0", Source: "test"}, `Bootstrap.Root="127.0.0.1:0": port 0`},
		{Bootstrap{Rank: 0, NRanks: 2, Root: "127.0.0.1", Source: "test"}, `Bootstrap.Root="127.0.0.1"`},
		{Bootstrap{Rank: 1, NRanks: 2, Root: "h:0", Source: "slurm", Vars: BootstrapVars{Rank: "SLURM_PROCID", NRanks: "SLURM_NTASKS", Root: "METAROCE_ROOT"}},
			`METAROCE_ROOT="h:0": port 0`},
		{Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1 :7000", Source: "test"}, `Bootstrap.Root="127.0.0.1 :7000": host "127.0.0.1 "`},
		{Bootstrap{Rank: 1, NRanks: 4, LocalSize: 2, Root: "[::1]:7000", Source: "test"},
			`Bootstrap.Root="[::1]:7000" names no host the others reach (::1 is loopback), but only 2 of the 4 ranks run on this host`},
	} {
		for _, tr := range []string{TransportMetaRoCE, TransportTCP} {
			// The timeout is what the old behaviour waited out; the
			// refusal must not depend on it.
			c, err := New(context.Background(), tc.b, Config{Transport: tr, Timeout: 3 * time.Second})
			if c != nil {
				c.Close()
			}
			require.Error(t, err, "%s %v", tr, tc.b)
			assert.ErrorContains(t, err, tc.want, "%s", tr)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s", tr)
		}
	}
	// One rank needs no rendezvous: its address is not looked at.
	c, err := New(context.Background(), Bootstrap{Rank: 0, NRanks: 1, Source: "test"}, Config{Timeout: 3 * time.Second})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// TestBootstrapEmptyIsUnset: a launcher variable set to "" reads as unset
// in every family (rank and rank count, local rank and local size, node
// count, rendezvous and job), as the rendezvous variables always did: a
// job script's `export RANK=$RANK` where the shell has none, or an env
// file's `METAROCE_RANK=` to clear a value, neither fails the job as "not
// a rank number" nor hides the launcher that did set its variables.
func TestBootstrapEmptyIsUnset(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
		want Bootstrap
		err  string
	}{
		{name: "our pair empty", env: map[string]string{"METAROCE_RANK": "", "METAROCE_NRANKS": ""}},
		{name: "torchrun pair empty", env: map[string]string{"RANK": "", "WORLD_SIZE": ""}},
		{name: "open mpi pair empty", env: map[string]string{"OMPI_COMM_WORLD_RANK": "", "OMPI_COMM_WORLD_SIZE": ""}},
		{name: "slurm pair empty", env: map[string]string{"SLURM_PROCID": "", "SLURM_NTASKS": ""}},
		// Half a torchrun pair is no launcher, whether the other half
		// is unset or empty.
		{name: "torchrun rank empty", env: map[string]string{"RANK": "", "WORLD_SIZE": "2"}},
		// An emptied pair leaves the launcher that set its own.
		{name: "torchrun pair empty under slurm", env: map[string]string{"RANK": "", "WORLD_SIZE": "", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:29517", Source: "slurm"}},
		{name: "our pair empty under open mpi", env: map[string]string{"METAROCE_RANK": "", "METAROCE_NRANKS": "", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:29517", Source: "openmpi"}},
		// Half a pair that is only ever set whole is refused, empty or
		// unset alike.
		{name: "our rank count empty", env: map[string]string{"METAROCE_RANK": "1", "METAROCE_NRANKS": ""}, ok: true,
			err: `METAROCE_RANK="1" is set but METAROCE_NRANKS is not (or is empty)`},
		{name: "open mpi rank empty", env: map[string]string{"OMPI_COMM_WORLD_RANK": "", "OMPI_COMM_WORLD_SIZE": "2"}, ok: true,
			err: `OMPI_COMM_WORLD_SIZE="2" is set but OMPI_COMM_WORLD_RANK is not (or is empty)`},
		// The local rank and size are optional.
		{name: "local rank and size empty", env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "", "LOCAL_WORLD_SIZE": "", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "h:6", Source: "torchrun"}},
		{name: "our local rank and size empty", env: map[string]string{"METAROCE_RANK": "1", "METAROCE_NRANKS": "2", "METAROCE_LOCAL_RANK": "", "METAROCE_LOCAL_SIZE": ""}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:29517", Source: "metaroce"}},
		{name: "open mpi local size empty", env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": ""}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, LocalRank: 1, Root: "127.0.0.1:29517", Source: "openmpi"}},
		{name: "slurm local id and tasks per node empty", env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "", "SLURM_NTASKS_PER_NODE": ""}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:29517", Source: "slurm"}},
		// An empty step node count gives way to the job's, which says
		// the job spans hosts and so needs a rendezvous address.
		{name: "slurm step nodes empty", env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_NODES": "", "SLURM_NNODES": "2"}, ok: true,
			err: "span several hosts"},
		{name: "metaroce root empty", env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "METAROCE_ROOT": "", "MASTER_ADDR": "h", "MASTER_PORT": "5"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "h:6", Source: "torchrun"}},
		{name: "job empty", env: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "METAROCE_JOB": "", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}, ok: true,
			want: Bootstrap{Rank: 1, NRanks: 2, Root: "127.0.0.1:30893", Source: "slurm", Job: "77.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok, err := bootstrapFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			require.Equal(t, tc.ok, ok)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			if ok {
				b.Vars = BootstrapVars{}
				require.Equal(t, tc.want, b)
			}
		})
	}
}

// TestBootstrapSlurmNodeCount: a Slurm node count that is no number of 1
// or more is refused, naming the variable, where it used to read as one
// node: a job across hosts would then rendezvous on 127.0.0.1 and wait
// for ranks that never come. The step's count takes precedence over the
// job's, which is not read when the step's is set.
func TestBootstrapSlurmNodeCount(t *testing.T) {
	slurm := func(kv ...string) map[string]string {
		m := map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string // "" for none
	}{
		{"job nodes not a number", slurm("SLURM_NNODES", "two"), `SLURM_NNODES="two" is not a node count`},
		{"step nodes not a number", slurm("SLURM_STEP_NUM_NODES", "2 ", "SLURM_NNODES", "2"), `SLURM_STEP_NUM_NODES="2 " is not a node count`},
		{"job nodes zero", slurm("SLURM_NNODES", "0"), `SLURM_NNODES="0" is not a node count`},
		{"step nodes negative", slurm("SLURM_STEP_NUM_NODES", "-1"), `SLURM_STEP_NUM_NODES="-1" is not a node count`},
		{"step nodes win", slurm("SLURM_STEP_NUM_NODES", "1", "SLURM_NNODES", "x"), ""},
		{"one node", slurm("SLURM_NNODES", "1"), ""},
		{"two nodes", slurm("SLURM_NNODES", "2"), "span several hosts"},
		// Read under Slurm alone.
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "5", "SLURM_NNODES": "x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := bootstrapFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			require.True(t, ok)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}
