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
	seq  uint64
	kind evKind
	pkt  *Packet
}

// eventHeap is a binary min-heap ordered by time, then by insertion
// sequence, so that simultaneous events run in the order they were made.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
