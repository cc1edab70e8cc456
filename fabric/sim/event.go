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

// event is one scheduled action. It is a small value type so the queue holds
// no pointers per entry apart from the packet and the rare callback.
type event struct {
	at   int64
	kind eventKind
	b    int32
	a    int32
	pkt  *Packet
	fn   func(now int64)
}
