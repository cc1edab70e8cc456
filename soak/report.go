package soak

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report is what a run did and found. Corrupted, Unexpected, MissedKills,
// PluginFailures, PluginMissedKills and the leaks must all be zero for a
// healthy build, and the run must have checked something and not have been
// interrupted (see Healthy).
//
// Its JSON form (MarshalJSON) has the snake_case keys in the field tags,
// the elapsed time as elapsed_s (seconds, a float) instead of a Duration's
// nanoseconds, and healthy and problems (Healthy and the reasons it is
// false) added, so that scripts need neither Go's field names nor its units.
type Report struct {
	// Mode is "driver" (faults injected by the datapath's test options on
	// in-process ranks) or "netlab" (faults injected by nftables and link
	// state on a namespace fabric between two ranks).
	Mode        string        `json:"mode"`
	Elapsed     time.Duration `json:"-"`            // elapsed_s in JSON
	Rounds      int           `json:"rounds"`       // collective rounds, plugin rounds not included
	FaultRounds int           `json:"fault_rounds"` // collective rounds with a fault other than a kill
	KillRounds  int           `json:"kill_rounds"`
	Ops         uint64        `json:"ops"`   // collectives completed and checked, summed over ranks
	Bytes       uint64        `json:"bytes"` // output bytes of those collectives, summed over ranks
	// From the ranks' connection counters, summed over every rank and peer.
	PacketsSent uint64 `json:"packets_sent"`
	Retransmits uint64 `json:"retransmits"`
	Lost        uint64 `json:"lost"`
	Timeouts    uint64 `json:"timeouts"`
	PathChanges uint64 `json:"path_changes"`
	// ECNMarks counts sent packets the peer saw CE-marked, CERecv received
	// packets that carried CE (netlab's CE rules produce them).
	ECNMarks uint64 `json:"ecn_marks"`
	CERecv   uint64 `json:"ce_recv"`

	// Faults counts the faults injected, by kind ("udp loss",
	// "link loss", "link flap", …). A fault held for a whole round counts
	// once; one injected during a round counts once per injection.
	Faults map[string]int `json:"faults"`
	// MidRoundFaults is how many of Faults were injected while collectives
	// were running (netlab mode).
	MidRoundFaults int `json:"mid_round_faults"`

	// Surfaced counts the survivors of kill rounds that reported the dead
	// rank as expected: an error naming a dead or closed peer, at the
	// victim's last op or later.
	Surfaced    int `json:"surfaced"`
	MissedKills int `json:"missed_kills"` // survivors of a kill round that saw no error
	// Unexpected counts errors no fault explains: any error in a round
	// without a kill, and in a kill round any other kind of error, or one
	// at an op before the victim's last.
	Unexpected int `json:"unexpected"`
	Corrupted  int `json:"corrupted"` // results that differ from the reference

	// Plugin rounds: the NCCL net plugin driven by the C harness in two
	// processes over loopback (udp backend).
	PluginRounds      int    `json:"plugin_rounds"`
	PluginMessages    uint64 `json:"plugin_messages"`     // messages received and verified byte by byte by the harness
	PluginKills       int    `json:"plugin_kills"`        // kill scenarios run (the sender dies mid-transfer)
	PluginSurfaced    int    `json:"plugin_surfaced"`     // kill scenarios whose receiver got an error (expected)
	PluginMissedKills int    `json:"plugin_missed_kills"` // kill scenarios whose receiver saw no error
	PluginFailures    int    `json:"plugin_failures"`     // harness runs that failed without a kill to explain it

	// Goroutines and file descriptors before the first and after the last
	// round (after a grace period for closing sockets and loops). The
	// after counts are not measured, and stay 0, in a run that an error
	// ended (Error).
	GoroutinesBefore int      `json:"goroutines_before"`
	GoroutinesAfter  int      `json:"goroutines_after"`
	FDsBefore        int      `json:"fds_before"`
	FDsAfter         int      `json:"fds_after"`
	FirstErrors      []string `json:"first_errors"` // up to 8 unexpected errors
	// Notes say what the run could not do as asked (no root for netlab,
	// no gcc for the plugin) and what it did instead.
	Notes []string `json:"notes"`
	// Interrupted is set when the run's context ended (a signal, a
	// deadline) before the run did: the round it cut short was not
	// judged, and errors it caused are not counted as Unexpected.
	Interrupted bool `json:"interrupted"`
	// Error is why the run ended before its time other than by its
	// context: a round that could not start (a fault that could not be
	// injected, say). The report then covers the rounds before it; "" when
	// no error ended the run.
	Error string `json:"error"`
}

// MarshalJSON writes the report in the form Report describes. Lists that
// are nil are written as empty, and faults as {}, so that every key always
// holds a value of one type.
func (r Report) MarshalJSON() ([]byte, error) {
	type fields Report // the tags without this method
	f := fields(r)
	if f.Faults == nil {
		f.Faults = map[string]int{}
	}
	f.FirstErrors = nonNil(f.FirstErrors)
	f.Notes = nonNil(f.Notes)
	return json.Marshal(struct {
		fields
		ElapsedS float64  `json:"elapsed_s"`
		Healthy  bool     `json:"healthy"`
		Problems []string `json:"problems"`
	}{f, r.Elapsed.Seconds(), r.Healthy(), nonNil(r.problems())})
}

// nonNil returns s, or an empty slice for nil (JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Healthy reports whether the run checked something and found nothing
// wrong: at least one operation or plugin message verified, no error
// without a fault to explain it, every kill surfaced, nothing corrupted or
// leaked, and not interrupted. A run that did no work (a duration too short
// for one round) proves nothing and is not healthy.
func (r *Report) Healthy() bool { return len(r.problems()) == 0 }

// problems lists why the run is not healthy, in words; empty when it is.
func (r *Report) problems() []string {
	var p []string
	add := func(bad bool, what string) {
		if bad {
			p = append(p, what)
		}
	}
	add(r.Ops == 0 && r.PluginMessages == 0, "nothing was checked (no operation or plugin message verified)")
	add(r.Interrupted, "interrupted")
	add(r.Error != "", "ended by an error")
	add(r.Corrupted > 0, "corrupted results")
	add(r.Unexpected > 0, "unexpected errors")
	add(r.MissedKills > 0, "missed kills")
	add(r.PluginFailures > 0, "plugin failures")
	add(r.PluginMissedKills > 0, "plugin missed kills")
	add(r.GoroutinesAfter > r.GoroutinesBefore, "goroutines leaked")
	add(r.FDsAfter > r.FDsBefore, "file descriptors leaked")
	return p
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak (%s faults): %v, %d rounds (%d with faults, %d kill-a-rank)\n"+
		"  operations %d, output bytes %d (%.1f MiB/s)\n"+
		"  packets sent %d, retransmits %d, declared lost %d, tail-loss timeouts %d, path moves %d, CE echoed %d, CE received %d\n",
		r.Mode, r.Elapsed.Round(time.Millisecond), r.Rounds, r.FaultRounds, r.KillRounds,
		r.Ops, r.Bytes, float64(r.Bytes)/(1<<20)/max(r.Elapsed.Seconds(), 1e-9),
		r.PacketsSent, r.Retransmits, r.Lost, r.Timeouts, r.PathChanges, r.ECNMarks, r.CERecv)
	if len(r.Faults) > 0 {
		fmt.Fprintf(&b, "  faults injected: %s", faultList(r.Faults))
		if r.Mode == "netlab" {
			fmt.Fprintf(&b, " (%d of them during rounds)", r.MidRoundFaults)
		}
		b.WriteString("\n")
	}
	if r.PluginRounds > 0 {
		fmt.Fprintf(&b, "  plugin rounds %d: messages verified %d, kills %d (surfaced %d, missed %d), failures %d\n",
			r.PluginRounds, r.PluginMessages, r.PluginKills, r.PluginSurfaced, r.PluginMissedKills, r.PluginFailures)
	}
	fmt.Fprintf(&b, "  errors surfaced by survivors of killed ranks %d, survivors that missed it %d\n"+
		"  unexpected errors %d, corrupted results %d\n",
		r.Surfaced, r.MissedKills, r.Unexpected, r.Corrupted)
	if r.Error != "" {
		// Run returned without settling: 0 would read as a count.
		fmt.Fprintf(&b, "  goroutines %d -> not measured, open fds %d -> not measured (the run ended by an error), healthy %v",
			r.GoroutinesBefore, r.FDsBefore, r.Healthy())
	} else {
		fmt.Fprintf(&b, "  goroutines %d -> %d, open fds %d -> %d, healthy %v",
			r.GoroutinesBefore, r.GoroutinesAfter, r.FDsBefore, r.FDsAfter, r.Healthy())
	}
	if p := r.problems(); len(p) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(p, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n  note: %s", n)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "\n  ended by an error: %s", r.Error)
	}
	return b.String()
}

// faultList renders the fault counts as "kind n, kind n" in kind order.
func faultList(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// fault counts one injected fault of kind.
func (r *Report) fault(kind string) {
	if r.Faults == nil {
		r.Faults = make(map[string]int)
	}
	r.Faults[kind]++
}

// note keeps the first 8 error descriptions.
func (r *Report) note(s string) {
	if len(r.FirstErrors) < 8 {
		r.FirstErrors = append(r.FirstErrors, s)
	}
}
