package netlab

import (
	"encoding/json"
	"fmt"
)

// LinkCounter is the traffic one spine link carried since the lab was built.
// Forward counts what s1 transmitted onto the link (the h1→h2 direction, where
// the fault rules act); Reverse what s2 transmitted onto it (h2→h1).
type LinkCounter struct {
	Link                 Link
	FwdPackets, FwdBytes uint64
	RevPackets, RevBytes uint64
}

// ifStats is the part of one `ip -s -j link show` entry that counters need.
type ifStats struct {
	Name  string `json:"ifname"`
	Stats struct {
		Tx struct {
			Bytes   uint64 `json:"bytes"`
			Packets uint64 `json:"packets"`
		} `json:"tx"`
	} `json:"stats64"`
}

// parseLinkStats reads the JSON of `ip -s -j link show` into per-interface
// transmit counters.
func parseLinkStats(b []byte) (map[string]ifStats, error) {
	var list []ifStats
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("netlab: link statistics: %w", err)
	}
	m := make(map[string]ifStats, len(list))
	for _, s := range list {
		if s.Name == "" {
			return nil, fmt.Errorf("netlab: link statistics entry without ifname")
		}
		m[s.Name] = s
	}
	return m, nil
}

// LinkCounters reads the transmit counters of every spine link, plane by plane
// and link by link.
func (l *Lab) LinkCounters() ([]LinkCounter, error) {
	out := make([]LinkCounter, 0, l.planes*l.links)
	for p := 0; p < l.planes; p++ {
		var sides [2]map[string]ifStats
		for side := 1; side <= 2; side++ {
			b, err := run("", "ip", "-n", l.switchNS(p, side), "-s", "-j", "link", "show")
			if err != nil {
				return nil, err
			}
			if sides[side-1], err = parseLinkStats(b); err != nil {
				return nil, err
			}
		}
		for i := 0; i < l.links; i++ {
			a, okA := sides[0][fmt.Sprintf("a%d", i)]
			b, okB := sides[1][fmt.Sprintf("b%d", i)]
			if !okA || !okB {
				return nil, fmt.Errorf("netlab: plane %d link %d missing from statistics", p, i)
			}
			out = append(out, LinkCounter{
				Link:       Link{Plane: p, Index: i},
				FwdPackets: a.Stats.Tx.Packets, FwdBytes: a.Stats.Tx.Bytes,
				RevPackets: b.Stats.Tx.Packets, RevBytes: b.Stats.Tx.Bytes,
			})
		}
	}
	return out, nil
}
