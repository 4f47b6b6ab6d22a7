package simnet

import "sync"

// clusterTemplate is a Machine's cluster, built once: its router and an engine holding only its
// links (capacities, latencies, names), which every run copies instead of building the cluster
// again (at 16,384 nodes the build takes seconds, the copy milliseconds).
type clusterTemplate struct {
	once sync.Once
	e    *Engine
	cl   *Cluster
	err  error
}

// engine returns a fresh engine with the links of m's cluster, and the cluster (a Router over
// those links, shared and read-only). It is safe for concurrent use.
func (m *Machine) engine() (*Engine, *Cluster, error) {
	t := &m.tmpl
	t.once.Do(func() {
		t.e = NewEngine(nil)
		t.cl, t.err = NewCluster(t.e, m.Node, m.Nodes, m.Fabric)
	})
	if t.err != nil {
		return nil, nil, t.err
	}
	return t.e.cloneLinks(), t.cl, nil
}

// cloneLinks returns an engine with e's links (capacity, latency, name and whether they are
// relaxed; none of their traffic) and link namers, no flows and no events.
func (e *Engine) cloneLinks() *Engine {
	c := &Engine{links: make([]link, len(e.links)), namers: e.namers}
	for i := range e.links {
		l := &e.links[i]
		c.links[i] = link{name: l.name, cap: l.cap, lat: l.lat, relaxed: l.relaxed, lazy: l.relaxed}
	}
	return c
}
