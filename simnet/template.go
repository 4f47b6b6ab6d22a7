package simnet

import (
	"sync"

	"github.com/simccl/simccl/coll"
)

// clusterTemplate is a Machine's cluster, built once: its router and an engine holding only its
// links (capacities, latencies, names), which every run copies instead of building the cluster
// again (at 16,384 nodes the build takes seconds, the copy milliseconds).
type clusterTemplate struct {
	once  sync.Once
	e     *Engine
	cl    *Cluster
	err   error
	trees treeCache
	p2p   p2pWalkCache
	sizes p2pSizesCache
	floor patFloorCache
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
	c := t.e.cloneLinks()
	if engineHook != nil {
		engineHook(c)
	}
	return c, t.cl, nil
}

// engineHook, where a test sets it, is called with every engine Machine.engine hands out (the
// surveys' perturbation of the links' latencies, jitterLatencies).
var engineHook func(*Engine)

// engineFor is engine for a plan of algorithm a: NVLS and NVLSTree route their heads' network
// connections over each GPU's own NICs (Cluster.withOwnNICs; NCCL's NVLS graph gives each head the
// NET it is the local GPU of), every other algorithm over the rings' and trees' per channel.
func (m *Machine) engineFor(a coll.Algo) (*Engine, *Cluster, error) {
	e, cl, err := m.engine()
	if err == nil && (a == coll.NVLS || a == coll.NVLSTree) {
		cl = cl.withOwnNICs()
	}
	return e, cl, err
}

// cloneLinks returns an engine with e's links (capacity, latency, name and whether they are
// relaxed; none of their traffic) and link namers, no flows and no events.
func (e *Engine) cloneLinks() *Engine {
	c := &Engine{links: make([]link, len(e.links)), namers: e.namers, share: e.share}
	for i := range e.links {
		l := &e.links[i]
		c.links[i] = link{name: l.name, cap: l.cap, lat: l.lat, relaxed: l.relaxed, lazy: l.relaxed}
	}
	return c
}

// replayCopy is cloneLinks at e's clock with e's replay settings (RateInterval, NoShortcut,
// Strict): the private engine on which a replay of every rank runs before e is credited.
func (e *Engine) replayCopy() *Engine {
	c := e.cloneLinks()
	c.now, c.RateInterval, c.NoShortcut, c.Strict = e.now, e.RateInterval, e.NoShortcut, e.Strict
	return c
}

// memo keeps one value per key, built by the first caller that asks for it (a nil memo keeps
// nothing: every call builds). It is safe for concurrent use; a caller asking for a key being
// built waits for it.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

func (c *memo[K, V]) get(k K, build func() V) V {
	if c == nil {
		return build()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	v := build()
	c.m[k] = v
	return v
}

// p2pSizesCache keeps the point-to-point calls p2pSizesSteady timed at smaller sizes: the larger
// sizes of a sweep extrapolate from the same pair.
type p2pSizesCache = memo[p2pSizesKey, p2pSized]

type p2pSizesKey struct {
	f                  coll.Func
	size               int64
	dt                 coll.DataType
	op                 coll.RedOp
	meanOversubscribed bool
	force              *planForce
}

// p2pSized is one such call: its row's mode, its result (copied before use), and whether a
// replay of every rank timed it (not the mean model).
type p2pSized struct {
	mode string
	res  *Result
	ok   bool
}

// patFloorCache keeps the latency floor of a PAT fold (patFloorTime), per collective and the
// options it was folded with: the sizes of a sweep share it.
type patFloorCache = memo[patFloorKey, patFloor]

type patFloorKey struct {
	f                  coll.Func
	dt                 coll.DataType
	op                 coll.RedOp
	meanOversubscribed bool
}

type patFloor struct {
	t   Time
	err error
}

// treeCache keeps, per set of trees and protocol, the partition of SimulateTree's symmetric
// replay with every switch link relaxed (quotientTree, the costly part of a small replay): the
// sizes of a sweep share it (nil results too; a result must be copied, fresh, before it is run).
type treeCache = memo[treeKey, *treeQuotient]

type treeKey struct {
	trees *coll.ChannelTree
	n     int
	proto coll.Proto
}

// treeKeyOf is the key of spec's trees in a treeCache.
func treeKeyOf(spec TreeSpec) treeKey { return treeKey{&spec.Trees[0], len(spec.Trees), spec.Proto} }
