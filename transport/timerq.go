package transport

// timerq is a binary min-heap of connections ordered by Conn.due, the
// cached deadline; Conn.tidx is each one's index in it, -1 when absent.
// Connections whose deadline is Never are not kept.
type timerq []*Conn

func (q timerq) less(i, j int) bool { return q[i].due < q[j].due }

func (q timerq) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].tidx = i
	q[j].tidx = j
}

func (q timerq) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q timerq) down(i int) {
	n := len(q)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// set gives c the deadline t, inserting, moving or (t == Never) removing it.
func (q *timerq) set(c *Conn, t Time) {
	if t == Never {
		q.remove(c)
		return
	}
	c.due = t
	if c.tidx < 0 {
		c.tidx = len(*q)
		*q = append(*q, c)
		q.up(c.tidx)
		return
	}
	q.up(c.tidx)
	q.down(c.tidx)
}

// remove takes c out of the heap if it is in it.
func (q *timerq) remove(c *Conn) {
	i := c.tidx
	if i < 0 {
		return
	}
	h := *q
	last := len(h) - 1
	if i != last {
		h.swap(i, last)
	}
	h[last] = nil
	*q = h[:last]
	c.tidx = -1
	if i != last {
		q.up(i)
		q.down(i)
	}
}
