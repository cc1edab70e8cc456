package core

import "sync"

// Kind tags the integer handles the plugin hands to NCCL, so that a handle of
// the wrong kind (or garbage) is recognised instead of dereferenced.
type Kind uint8

// Handle kinds. Values start at 0x4d so that every handle is far above 1
// (NCCL_NET_OPTIONAL_RECV_COMPLETION) and far from small integers.
const (
	KindCtx Kind = 0x4d + iota
	KindListen
	KindSend
	KindRecv
	KindMR
	KindReq
)

// Handle is what crosses the C boundary instead of a Go pointer:
// kind (bits 56..63) | generation (bits 32..55) | slot index (bits 0..31).
// It is never 0 and never a valid Go pointer.
type Handle uint64

func makeHandle(k Kind, gen uint32, idx uint32) Handle {
	return Handle(uint64(k)<<56 | uint64(gen&0xffffff)<<32 | uint64(idx))
}

// Kind returns the handle's kind tag.
func (h Handle) Kind() Kind { return Kind(h >> 56) }

func (h Handle) gen() uint32 { return uint32(h>>32) & 0xffffff }
func (h Handle) idx() uint32 { return uint32(h) }

type slot[T any] struct {
	val  T
	gen  uint32
	used bool
}

// table is a fixed-capacity map from Handle to T. Slots are reused; the
// generation makes handles of a freed slot stale. Safe for concurrent use.
type table[T any] struct {
	kind  Kind
	limit int // capacity bound (slots)

	mu    sync.Mutex
	slots []slot[T]
	free  []uint32
	n     int
}

func newTable[T any](k Kind, limit int) *table[T] { return &table[T]{kind: k, limit: limit} }

// add stores v and returns its handle; ok is false when the table is full.
func (t *table[T]) add(v T) (Handle, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var i uint32
	switch {
	case len(t.free) > 0:
		i = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case len(t.slots) < t.limit:
		t.slots = append(t.slots, slot[T]{})
		i = uint32(len(t.slots) - 1)
	default:
		return 0, false
	}
	s := &t.slots[i]
	s.gen = (s.gen + 1) & 0xffffff
	s.val, s.used = v, true
	t.n++
	return makeHandle(t.kind, s.gen, i), true
}

func (t *table[T]) lookup(h Handle) (*slot[T], bool) {
	if h.Kind() != t.kind || int(h.idx()) >= len(t.slots) {
		return nil, false
	}
	s := &t.slots[h.idx()]
	if !s.used || s.gen != h.gen() {
		return nil, false
	}
	return s, true
}

// get returns the value of a live handle.
func (t *table[T]) get(h Handle) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.lookup(h)
	if !ok {
		var zero T
		return zero, false
	}
	return s.val, true
}

// remove deletes a live handle and returns its value.
func (t *table[T]) remove(h Handle) (T, bool) {
	v, _, removed := t.removeIf1(h, func(T) bool { return true })
	return v, removed
}

// removeIf1 deletes the live handle h if its value satisfies pred, in one
// critical section, so that a refused removal leaves the entry in place.
// v is h's value whenever live is true; removed reports the deletion.
func (t *table[T]) removeIf1(h Handle, pred func(T) bool) (v T, live, removed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.lookup(h)
	if !ok {
		return v, false, false
	}
	v = s.val
	if !pred(v) {
		return v, true, false
	}
	var zero T
	s.val, s.used = zero, false
	t.free = append(t.free, h.idx())
	t.n--
	return v, true, true
}

// removeIf deletes every entry whose value satisfies pred.
func (t *table[T]) removeIf(pred func(T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero T
	for i := range t.slots {
		s := &t.slots[i]
		if s.used && pred(s.val) {
			s.val, s.used = zero, false
			t.free = append(t.free, uint32(i))
			t.n--
		}
	}
}

// count returns the number of entries whose value satisfies pred.
func (t *table[T]) count(pred func(T) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for i := range t.slots {
		if s := &t.slots[i]; s.used && pred(s.val) {
			n++
		}
	}
	return n
}

// len returns the number of live handles.
func (t *table[T]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
