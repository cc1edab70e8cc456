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
	seq  uint64
	kind timerKind
	q    *qp
	c    *conn
}

// timerHeap is a min-heap of timers by (at, insertion order), so equal
// deadlines fire in the order they were armed.
type timerHeap struct {
	h   []timer
	seq uint64
}

func (t *timerHeap) len() int { return len(t.h) }

func (t *timerHeap) less(i, j int) bool {
	if t.h[i].at != t.h[j].at {
		return t.h[i].at < t.h[j].at
	}
	return t.h[i].seq < t.h[j].seq
}

func (t *timerHeap) push(x timer) {
	t.seq++
	x.seq = t.seq
	t.h = append(t.h, x)
	i := len(t.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			break
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

func (t *timerHeap) pop() timer {
	s := t.h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = timer{}
	t.h = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
	return top
}
