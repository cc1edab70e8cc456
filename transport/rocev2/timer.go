package rocev2

type timerKind uint8

const (
	tmRTO timerKind = iota + 1
	tmPace
	tmHandshake
)

// timer is one deadline. Timers are never cancelled: a fired timer checks
// whether its QP or connection still needs it, which keeps arming O(log n)
// without a handle table.
type timer struct {
	at   int64
	kind timerKind
	q    *qp
	c    *conn
}

// arm schedules t; timers are never cancelled (see timer).
func (e *Endpoint) arm(t timer) { e.timers.Push(t.at, t) }
