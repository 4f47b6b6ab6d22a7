package simnet

// event is one entry of the engine's event heap (flow completions have their own indexed heap). It is a plain value (no interface, no pointer)
// so that the heap is a flat slice the garbage collector never scans for pointers.
type event struct {
	t    Time
	seq  uint64 // schedule order; ties on t pop in the order they were pushed
	kind int32  // the user's kind (>= 0)
	arg  int64  // the user's argument
}

func (a *event) less(b *event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap ordered by (t, seq), written out for the concrete type
// (container/heap would box every element into an interface).
type eventHeap struct{ a []event }

func (h *eventHeap) len() int { return len(h.a) }

func (h *eventHeap) push(e event) {
	h.a = append(h.a, e)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.a[i].less(&h.a[p]) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *eventHeap) top() *event { return &h.a[0] }

func (h *eventHeap) pop() event {
	e := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a = h.a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.a[r].less(&h.a[l]) {
			m = r
		}
		if !h.a[m].less(&h.a[i]) {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return e
}
