package transporttest

import "github.com/metaroce/metaroce/transport"

type evKind uint8

const (
	evArrive  evKind = iota // a packet reaches the receiver's ingress queue
	evDeliver               // a packet leaves the ingress queue into the endpoint
)

// event is one scheduled packet movement.
type event struct {
	at   transport.Time
	kind evKind
	pkt  *Packet
}
