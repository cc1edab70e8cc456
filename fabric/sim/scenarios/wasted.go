package scenarios

import (
	"github.com/metaroce/metaroce/fabric/sim"
	"github.com/metaroce/metaroce/fabric/sim/agents"
	"github.com/metaroce/metaroce/transport"
)

// wastedPkts counts the DATA packets of job j that reached a host in vain:
// for MetaRoCE the spurious retransmissions (both copies arrived), for
// RoCEv2 the duplicates and the packets go-back-N dropped out of order.
// Goodput measured from payload arrivals subtracts them.
func wastedPkts(s *sim.Sim, j *job) uint64 {
	var n uint64
	for h, x := range s.Hosts() {
		switch t := x.T.(type) {
		case *agents.MetaRoCE:
			for _, id := range j.hosts[h].conns {
				if st, ok := t.EP.Stats(transport.ConnID(id)); ok {
					n += st.Spurious
				}
			}
		case *agents.RoCEv2:
			st := t.EP.Stats()
			n += st.Duplicates + st.OutOfOrder
		}
	}
	return n
}
