package sim

// eventKind says what an event does when it fires.
type eventKind uint8

const (
	evArrive eventKind = iota + 1 // pkt arrives at the node owning port a
	evTxDone                      // port a finished serialising a packet
	evTimer                       // host a's transport timer
	evPause                       // PFC: port a stops transmitting
	evResume                      // PFC: port a may transmit again
	evLink                        // link state change: port a (and its peer), b = up
	evCall                        // run callback fn
	evSample                      // periodic sampler
)

// event is one scheduled action. It is a small value type so the heap holds
// no pointers per entry apart from the packet and the rare callback.
type event struct {
	at   int64
	seq  uint64
	kind eventKind
	b    int32
	a    int32
	pkt  *Packet
	fn   func(now int64)
}

// eventHeap is a binary min-heap of events by (at, seq). It is written out by
// hand instead of using container/heap to avoid interface calls per event.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = event{}
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
