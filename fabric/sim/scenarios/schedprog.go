package scenarios

import (
	"fmt"
	"sort"

	"github.com/metaroce/metaroce/collectives/reduce"
	"github.com/metaroce/metaroce/collectives/sched"
)

// schedProgs turns the schedules the collectives run for real
// (collectives/sched) into the simulator's host programs, so that a
// simulated collective moves exactly the messages the real executor would.
// A plan's transfers are grouped by the algorithm step they belong to
// (Step.Round); a host starts a group when its previous group completed,
// which keeps the algorithm's order without modelling each chunk's
// dependencies. Local reductions and copies take no simulated time (the
// fabric, not the CPU, is under study). All channels share the one flow of
// a connection, so within a group the messages to and from each peer are
// ordered by (channel, sequence) on both sides, which makes the k-th send
// of one host to another match the k-th receive of that host from it.
// metaroceChunk is the message size the collectives use over MetaRoCE
// (collectives.DefaultMetaRoCEChunkBytes; the simulator may not import the
// collectives package, which reaches the UDP driver).
const metaroceChunk = 512 << 10

// schedChannels is the collectives' default channel count.
const schedChannels = 1

func schedProgs(coll sched.Collective, n int, bytes uint64, channels int) ([][]step, error) {
	cfg := sched.Config{Collective: coll, NRanks: n, DType: reduce.Uint8, Op: reduce.OpSum,
		Count: int64(bytes), Channels: channels, ChunkBytes: metaroceChunk}
	if coll == sched.AllToAll {
		cfg.Count = int64(bytes) / int64(n)
	}
	plans, err := sched.BuildAll(cfg)
	if err != nil {
		return nil, fmt.Errorf("simulated %v: %w", coll, err)
	}
	progs := make([][]step, n)
	for r, p := range plans {
		type msg struct {
			peer, ch, seq int
			bytes         uint64
		}
		sends, recvs := map[int][]msg{}, map[int][]msg{}
		var rounds []int
		seen := map[int]bool{}
		for i := range p.Steps {
			s := &p.Steps[i]
			var into map[int][]msg
			var rg sched.Range
			switch s.Kind {
			case sched.KindSend:
				into, rg = sends, s.Src
			case sched.KindRecv:
				into, rg = recvs, s.Dst
			default:
				continue
			}
			into[s.Round] = append(into[s.Round], msg{s.Peer, s.Channel, s.Seq, uint64(rg.Len)})
			if !seen[s.Round] {
				seen[s.Round] = true
				rounds = append(rounds, s.Round)
			}
		}
		sort.Ints(rounds)
		order := func(ms []msg) []xfer {
			sort.Slice(ms, func(i, j int) bool {
				a, b := ms[i], ms[j]
				if a.peer != b.peer {
					return a.peer < b.peer
				}
				if a.ch != b.ch {
					return a.ch < b.ch
				}
				return a.seq < b.seq
			})
			xs := make([]xfer, len(ms))
			for i, m := range ms {
				xs[i] = xfer{m.peer, m.bytes}
			}
			return xs
		}
		for _, rd := range rounds {
			progs[r] = append(progs[r], step{sends: order(sends[rd]), recvs: order(recvs[rd])})
		}
	}
	return progs, nil
}
