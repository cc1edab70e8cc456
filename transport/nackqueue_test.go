package transport

import (
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestDrawnNacksStayBounded: a peer sends DATA for a flow no receive was
// posted on, so that every packet draws a NACK NOT_READY, and reports
// every NACK but the newest of each burst lost (a gap in its ACK record).
// New control packets leave before retransmissions (docs/spec.md §3.2,
// queue order), so if fresh NACKs always waited, the lost ones would never
// be sent again and the retransmission queue would grow by a path's window
// per round, without bound. At most 4 × MaxPendingRecvs NACKs wait, new or
// for retransmission (§3.4, "NACKs and their directions"); the rest of
// the bad DATA is dropped and counted without one.
func TestDrawnNacksStayBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		recvs int // MaxPendingRecvs: the NACK bound is four times it
		burst int // DATA packets the peer sends per round
	}{
		{"bursts above the bound", 16, 300},
		{"bursts below the bound", 64, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, c := testConn(t, Config{Planes: 1, PathsPerPlane: 1, MaxPendingRecvs: tc.recvs}, 4152)
			bound := 4*tc.recvs + 2*len(c.paths)*wire.SackBits
			buf := make([]byte, 9000)
			p := c.paths[0]
			var psn wire.PSN
			now := Time(1000)
			sent := 0
			for round := 0; round < 40; round++ {
				for i := 0; i < tc.burst; i++ {
					d := wire.Data{Header: wire.Header{DstConn: uint32(c.id), Token: c.localTok, PSN: psn}, Flow: 9}
					psn++
					e.HandleDatagram(now, Datagram{Data: d.Append(nil)})
				}
				for {
					if _, ok := e.PollTransmit(now, buf); !ok {
						break
					}
					sent++
				}
				if p.next-p.una >= 2 {
					// Everything outstanding is reported lost but the
					// newest packet.
					a := wire.Ack{Header: wire.Header{DstConn: uint32(c.id), Token: c.localTok}, N: 1}
					a.Records[0] = wire.AckRecord{Cum: p.una}
					a.Records[0].Sack.Set(int(p.next-1-p.una) - 1)
					e.HandleDatagram(now, Datagram{Data: a.Append(nil)})
				}
				now += 10 * Microsecond
				require.LessOrEqual(t, len(c.ctrlQ)+len(c.retxQ), bound, "round %d: %d NACKs new, %d for retransmission", round, len(c.ctrlQ), len(c.retxQ))
				require.NoError(t, CheckFootprint(e))
			}
			require.GreaterOrEqual(t, sent, 40*tc.burst/8, "the NACKs stopped leaving")
			require.Equal(t, uint64(40*tc.burst), e.Counters().Dropped[DropNotReady])
		})
	}
}
