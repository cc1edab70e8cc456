// Package eventq is the event queue of every discrete-event loop in the
// project (the fabric simulator, the core's test bed, the RoCEv2 baseline's
// timers): a binary min-heap ordered by time and then by insertion order,
// so that events scheduled for the same instant run in the order they were
// scheduled and a seeded run is reproducible event for event.
//
// It is written for the simulator's hot path: values are stored inline
// (no interface per event), and Push and Pop allocate only when the backing
// array grows.
package eventq

// Queue holds values of type T, each due at an int64 time (the user's
// unit; nanoseconds throughout this project). The zero Queue is empty and
// ready to use.
type Queue[T any] struct {
	items []item[T]
	seq   uint64
}

type item[T any] struct {
	at  int64
	seq uint64
	v   T
}

// Len returns the number of queued values.
func (q *Queue[T]) Len() int { return len(q.items) }

// Next returns the time of the earliest value; ok is false when the queue
// is empty.
func (q *Queue[T]) Next() (at int64, ok bool) {
	if len(q.items) == 0 {
		return 0, false
	}
	return q.items[0].at, true
}

func (q *Queue[T]) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// Push schedules v at time at.
func (q *Queue[T]) Push(at int64, v T) {
	q.seq++
	q.items = append(q.items, item[T]{at: at, seq: q.seq, v: v})
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

// Pop removes and returns the earliest value and its time. It panics on an
// empty queue, which is a bug in the caller's loop.
func (q *Queue[T]) Pop() (at int64, v T) {
	s := q.items
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = item[T]{} // drop references held by the value
	q.items = s[:n]
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
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top.at, top.v
}
