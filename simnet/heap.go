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
	// Sifted up with a hole instead of swaps: the same comparisons, so the same array.
	h.a = append(h.a, e)
	a := h.a
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(&a[p]) {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = e
}

func (h *eventHeap) top() *event { return &h.a[0] }

func (h *eventHeap) pop() event {
	// Sifted down with a hole instead of swaps: the same comparisons, so the same array.
	a := h.a
	e := a[0]
	n := len(a) - 1
	x := a[n]
	h.a = a[:n]
	a = a[:n]
	if n == 0 {
		return e
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r].less(&a[l]) {
			m = r
		}
		if !a[m].less(&x) {
			break
		}
		a[i] = a[m]
		i = m
	}
	a[i] = x
	return e
}
