package main

// SchemaID names the layout of the JSON report (SCHEMA.md, schema.json). It
// changes whenever a field changes meaning or disappears.
const SchemaID = "mrbench/v1"

// Measure is one half of a table row: the out-of-place or the in-place run of
// one size. Times are microseconds per collective, bandwidths GB/s (10^9
// bytes per second). Wrong is the number of wrong elements summed over all
// ranks, or -1 when results were not checked (-c 0).
type Measure struct {
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbps"`
	BusBW  float64 `json:"busbw_gbps"`
	Wrong  int64   `json:"wrong"`
}

// Row is one line of an nccl-tests table. Bytes is the larger of the per-rank
// send and receive buffers, Count that size in elements.
type Row struct {
	Bytes      int64   `json:"bytes"`
	Count      int64   `json:"count"`
	Type       string  `json:"type"`
	RedOp      string  `json:"redop"`
	Root       int     `json:"root"`
	OutOfPlace Measure `json:"out_of_place"`
	InPlace    Measure `json:"in_place"`
}

// PathSummary is one path of a peer connection (MetaRoCE only). RTTUs is the
// smoothed round-trip time in microseconds.
type PathSummary struct {
	Plane       int     `json:"plane"`
	Entropy     int     `json:"entropy"`
	Active      bool    `json:"active"`
	Packets     uint64  `json:"packets"`
	Lost        uint64  `json:"lost"`
	ECNMarks    uint64  `json:"ecn_marks"`
	PathChanges uint64  `json:"path_changes"`
	RTTUs       float64 `json:"rtt_us"`
}

// PeerSummary is what one rank's connection to a peer counted over a table's
// sweep: packets sent and received, retransmissions, ECN marks, path changes
// and the smoothed RTT (microseconds).
type PeerSummary struct {
	Rank        int    `json:"rank"`
	Peer        int    `json:"peer"`
	PacketsSent uint64 `json:"packets_sent"`
	PacketsRecv uint64 `json:"packets_recv"`
	Retransmits uint64 `json:"retransmits"`
	Lost        uint64 `json:"lost"`
	Timeouts    uint64 `json:"timeouts"`
	SpuriousTO  uint64 `json:"spurious_timeouts"`
	// TailProbes counts probes sent because a path's newest packet went
	// unacknowledged past its tail-probe timeout (docs/spec.md §3.2).
	TailProbes  uint64        `json:"tail_probes"`
	ECNMarks    uint64        `json:"ecn_marks"`
	PathChanges uint64        `json:"path_changes"`
	AcksSent    uint64        `json:"acks_sent"`
	RTTUs       float64       `json:"rtt_us"`
	Paths       []PathSummary `json:"paths,omitempty"`
}

// Table is one sweep over one transport (or the RCCL backend). AvgBusBW is
// the mean of every row's out-of-place and in-place bus bandwidth, as
// nccl-tests' "Avg bus bandwidth" line. OutOfBounds counts bytes written
// past the receive buffer (checked runs only). PathsPerPlane is the
// MetaRoCE paths per plane in use, as rank 0's endpoint resolved it (the
// header's "# datapath:" line gives the same): --paths where given, else
// the library's default for rank 0's addresses (LoopbackPathsPerPlane of
// package collectives on loopback, defaultPathsPerPlane elsewhere), which
// Params.Paths, the flag as given, leaves out; 0 (absent) for a TCP or
// RCCL table, which has no paths.
type Table struct {
	Transport     string        `json:"transport"`
	Backend       string        `json:"backend"`
	Collective    string        `json:"collective"`
	Ranks         int           `json:"ranks"`
	PathsPerPlane int           `json:"paths_per_plane,omitempty"`
	Rows          []Row         `json:"rows"`
	AvgBusBW      float64       `json:"avg_busbw_gbps"`
	OutOfBounds   int64         `json:"out_of_bounds"`
	Wrong         int64         `json:"wrong"`
	Status        string        `json:"status"`          // "ok", or "failed" with Error or wrong values
	Error         string        `json:"error,omitempty"` // why the table stopped early
	Peers         []PeerSummary `json:"peers,omitempty"`
}

// finish computes the summary fields from the rows.
func (t *Table) finish() {
	var sum float64
	var n int
	t.Wrong = 0
	for _, r := range t.Rows {
		sum += r.OutOfPlace.BusBW + r.InPlace.BusBW
		n += 2
		t.Wrong += max(r.OutOfPlace.Wrong, 0) + max(r.InPlace.Wrong, 0)
	}
	t.AvgBusBW = 0
	if n > 0 {
		t.AvgBusBW = sum / float64(n)
	}
	t.Status = "ok"
	if t.Wrong != 0 || t.OutOfBounds != 0 || t.Error != "" {
		t.Status = "failed"
	}
}

// fail records why the table stopped early.
func (t *Table) fail(err error) {
	t.Error = err.Error()
	t.Status = "failed"
}

// Params are the sweep's settings as given (sizes in bytes), except Loss
// and Seed, which are what the run applied: Loss is the probability with
// which MetaRoCE's driver dropped each datagram, 0 where no MetaRoCE table
// ran (--transport tcp, --backend rccl) whatever --loss said, and Seed is
// set only with Loss above 0. Paths is --paths as given, the MetaRoCE paths
// per plane of each connection, 0 (absent) where it was 0 (left to the
// library) or no MetaRoCE table ran; the count a table ran with, given or
// not, is its Table.PathsPerPlane.
type Params struct {
	MinBytes   int64   `json:"min_bytes"`
	MaxBytes   int64   `json:"max_bytes"`
	StepFactor float64 `json:"step_factor"`
	StepBytes  int64   `json:"step_bytes"`
	Iters      int     `json:"iters"`
	Warmup     int     `json:"warmup_iters"`
	Check      int     `json:"check"`
	Average    int     `json:"average"`
	Blocking   int     `json:"blocking"`
	Root       int     `json:"root"`
	Channels   int     `json:"channels"`
	ChunkBytes int64   `json:"chunk_bytes,omitempty"`
	A2AFlight  int     `json:"a2a_inflight,omitempty"`
	Paths      int     `json:"paths_per_plane,omitempty"`
	GroupSize  int     `json:"group_size,omitempty"`
	Loss       float64 `json:"loss"`
	Seed       uint64  `json:"seed,omitempty"`
	TimeoutS   float64 `json:"timeout_s"`
}

// Env describes the machine and the run, as the header lines do.
type Env struct {
	Hosts     int    `json:"hosts"`
	Ranks     int    `json:"ranks"`
	Launcher  string `json:"launcher"`
	CPU       string `json:"cpu"`
	GPU       string `json:"gpu"`
	GoVersion string `json:"go_version"`
	Version   string `json:"mrbench_version"`
}

// Report is the whole JSON document written by --json.
type Report struct {
	Schema     string   `json:"schema"`
	Command    []string `json:"command"`
	Start      string   `json:"start"`
	Collective string   `json:"collective"`
	Params     Params   `json:"params"`
	Env        Env      `json:"env"`
	Tables     []Table  `json:"tables"`
}
