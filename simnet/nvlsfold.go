package simnet

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"

	"github.com/simccl/simccl/coll"
)

// The node fold of NVLSTree (nvlstree-fold).
//
// nvlsSymmetric folds an NVLSTree call's channels but keeps every node: at 128 DGX H100 nodes
// its replay still has 1,024 ranks and 128 switches per channel. Inside a node every NVLSTree
// node does the same (the NVLS scatter and multicast through its NVSwitch); between nodes its
// heads follow NCCL's double binary tree. Nodes at the same place of both trees behave alike, and
// the fold replays one node per class of places.
//
// No exact fold of the nodes exists: a node's NIC carries both trees (channels of each parity),
// and the coarsest equitable partition of the nodes under the two trees (colour refinement from
// the roots) is the discrete one at every node count tried (2 to 2,048): the mirrored tree tells
// every node apart. The fold is therefore an approximation, and says so in its mode. Its classes
// are those of the nodes' places in both trees seen from above: the depth and the number of
// children in each tree, refined until every member of a class has its parents (in each tree) in
// one class. A class's connections with its parent's take its members' mean latency (routes
// through the spine and within a leaf differ by two switch hops). The quotient is then a tree of classes
// per parity: class X's parent is its members' parents' class, its children the classes whose
// parent is X. Every message between classes is replayed as in the schedule; what is merged is
// which children a member has: X's representative waits for the classes of its own children and
// receives the other child classes' messages up without waiting for them (coll's
// ChannelTree.Loose), and its NIC carries, for each child class Y, the messages of |Y|/|X|
// members (the mean number of children in Y per member of X). The engine weighs the links of X's
// side of such a connection by |Y|/|X| (Engine.weighRoute) and the child's side by 1, so every NIC
// port of the quotient carries the mean load of its class's ports: exact in expectation over the
// members of a class, not for each. Measured against the whole replay, docs/cluster.md; used
// only where that was within 1% (NVLSNodeFoldMin, NVLSNodeFoldMinLoops).
//
// The fabric's switch-to-switch links are not the quotient's: a class's members reach their
// parents through links of their own (hashed uplinks, a leaf's uplink picked by destination).
// They are left out of the replay (unbounded, their latency kept) and checked after every
// instant, as the checked channel fold does (nvlsecmp.go): each real link's load is the rates of
// the quotient connections that the real member connections crossing it stand for. At the first
// link over its capacity the replay stops and the call is timed as without the node fold.
//
// Where nothing else can then time the call but another algorithm (Tree), Run replays the fold
// switch-bound (nvlsSwitchBound): each quotient connection crosses a stand-in for the real links
// its members cross, a relaxed link of their capacity weighed by its members on one of them
// (links loaded alike share one stand-in; standIns). Left out of the rate computations while
// within its capacity, a stand-in changes nothing; once over, it is enforced until it is under
// its capacity again (Engine.releaseLink: a stand-in carries flows without a break, and enforced
// it joins every connection crossing it into one component of the rate computations), and it slows every
// member of the connections crossing it, where on the machine only those crossing the real link
// slow down first. The fold is then slower than the replay of every node: within 0.9% where
// measured with four hosts per leaf and more, up to 4.5% with two (docs/cluster.md); the mode
// says switch-bound.

// NVLSNodeFoldMin and NVLSNodeFoldMinLoops are the fewest nodes and loops per channel (one chunk
// per rank of a node: NVLSTree's heads' share) for which nvlsSymmetric folds the nodes of an
// NVLSTree call (where the classes are at most half the nodes); elsewhere the channel fold
// replays every node, exactly. They keep the fold where it was measured within 1% of the replay
// of every node (docs/cluster.md; chosen from those measurements, a usage bound, not a constant
// of the model): on 16 nodes (8 classes, half the nodes) it is up to 2.6% off; with 8 loops per
// channel (64 MiB on 128 DGX H100 nodes) 1.4% and with 16 loops (128 MiB on 64 nodes) 1.3%,
// where the NCCL_STEPS credits bind and the members of a class, which wait for different
// children, part; from 32 loops (4 × NCCL_STEPS) on 32 to 128 nodes within 0.41%.
var (
	NVLSNodeFoldMin            = 32
	NVLSNodeFoldMinLoops int64 = 4 * coll.NCCLSteps
)

// nodeFold is the partition of an NVLSTree call's nodes into classes.
type nodeFold struct {
	class   []int32 // class of each node
	reps    []int   // representative (first member) of each class
	size    []int   // members of each class
	up      [2][]int32
	kids    [2][][]int32
	parents [2][]int32 // per class and tree: the class of its members' parents (-1: root class)
}

// nodeClasses partitions nNodes nodes by their places in the double binary tree (see the top
// of this file); lat(n, t), where not nil, is the latency of node n's route to its parent in tree
// t, and tells classes apart too (nodeFoldByLatency).
func nodeClasses(nNodes int, lat func(n, t int) Time) *nodeFold {
	nf := &nodeFold{class: make([]int32, nNodes)}
	depth := [2][]int32{make([]int32, nNodes), make([]int32, nNodes)}
	for t := 0; t < 2; t++ {
		nf.up[t] = make([]int32, nNodes)
		nf.kids[t] = make([][]int32, nNodes)
		for n := 0; n < nNodes; n++ {
			up, d0, d1, _ := coll.Dtree(nNodes, n, t)
			nf.up[t][n] = int32(up)
			for _, d := range []int{d0, d1} {
				if d >= 0 {
					nf.kids[t][n] = append(nf.kids[t][n], int32(d))
				}
			}
		}
		for n := 0; n < nNodes; n++ {
			d := int32(0)
			for x := n; nf.up[t][x] >= 0; x = int(nf.up[t][x]) {
				d++
			}
			depth[t][n] = d
		}
	}
	type key [8]int64
	col := make([]int32, nNodes)
	assign := func(k func(n int) key) int {
		ids := map[key]int32{}
		next := make([]int32, nNodes)
		for n := range next {
			kk := k(n)
			id, ok := ids[kk]
			if !ok {
				id = int32(len(ids))
				ids[kk] = id
			}
			next[n] = id
		}
		copy(col, next)
		return len(ids)
	}
	k := assign(func(n int) key {
		var kk key
		for t := 0; t < 2; t++ {
			l := Time(-1)
			if nf.up[t][n] >= 0 && lat != nil {
				l = lat(n, t)
			}
			kk[3*t], kk[3*t+1], kk[3*t+2] = int64(depth[t][n]), int64(len(nf.kids[t][n])), int64(l)
		}
		return kk
	})
	for {
		parent := func(n, t int) int64 {
			if u := nf.up[t][n]; u >= 0 {
				return int64(col[u])
			}
			return -1
		}
		k2 := assign(func(n int) key {
			return key{int64(col[n]), parent(n, 0), parent(n, 1)}
		})
		if k2 == k {
			break
		}
		k = k2
	}
	// Classes numbered by their first member.
	renum := map[int32]int32{}
	for n, c := range col {
		id, ok := renum[c]
		if !ok {
			id = int32(len(nf.reps))
			renum[c] = id
			nf.reps = append(nf.reps, n)
			nf.size = append(nf.size, 0)
		}
		nf.class[n] = id
		nf.size[id]++
	}
	for t := 0; t < 2; t++ {
		nf.parents[t] = make([]int32, len(nf.reps))
		for x, r := range nf.reps {
			nf.parents[t][x] = -1
			if u := nf.up[t][r]; u >= 0 {
				nf.parents[t][x] = nf.class[u]
			}
		}
	}
	return nf
}

// tree is the quotient's tree of classes for tree t: a class's parent is its members' parents'
// class, its children the classes whose parent it is.
func (nf *nodeFold) tree(t int) coll.ChannelTree {
	k := len(nf.reps)
	ct := coll.ChannelTree{Up: make([]int, k), Down: make([][]int, k)}
	for x := 0; x < k; x++ {
		ct.Up[x] = int(nf.parents[t][x])
		if p := nf.parents[t][x]; p >= 0 {
			ct.Down[p] = append(ct.Down[p], x)
		}
	}
	// A class waits for the classes of its representative's own children; it receives the
	// others' messages up without waiting (loose).
	ct.Loose = make([][]int, k)
	for x, r := range nf.reps {
		for _, y := range ct.Down[x] {
			own := false
			for _, kid := range nf.kids[t][r] {
				own = own || int(nf.class[kid]) == y
			}
			if !own {
				ct.Loose[x] = append(ct.Loose[x], y)
			}
		}
	}
	return ct
}

// nodeFoldRouter routes the quotient schedule's ranks (class×ppn + local index) over the links
// of the classes' representatives on the replay's engine q, weighing each connection between
// classes (see the top of the file).
type nodeFoldRouter struct {
	cl      *Cluster
	q       *Engine
	nf      *nodeFold
	ppn     int
	members [][]int             // per class, its nodes
	routes  map[[3]int][]LinkID // Route's results by (src, dst, ch)
	latLink map[Time]LinkID     // links of latency only (unbounded), by latency
}

func newNodeFoldRouter(cl *Cluster, q *Engine, nf *nodeFold, ppn int) *nodeFoldRouter {
	r := &nodeFoldRouter{cl: cl, q: q, nf: nf, ppn: ppn, members: make([][]int, len(nf.reps)),
		routes: map[[3]int][]LinkID{}, latLink: map[Time]LinkID{}}
	for n, x := range nf.class {
		r.members[x] = append(r.members[x], n)
	}
	return r
}

func (r *nodeFoldRouter) NumRanks() int { return len(r.nf.reps) * r.ppn }

func (r *nodeFoldRouter) real(rank int) int { return r.nf.reps[rank/r.ppn]*r.ppn + rank%r.ppn }

// RouteSwitch is the representative's link to or from its NVSwitch.
func (r *nodeFoldRouter) RouteSwitch(rank, node int, up bool, buf []LinkID) ([]LinkID, error) {
	return r.cl.RouteSwitch(r.real(rank), r.nf.reps[node], up, buf)
}

// Route is the route between the representatives of the classes of src and dst. Between classes
// X (parent) and Y (child) in the tree of ch's parity, it is the route of a real connection of a
// member of Y with its parent, a member of X — the member whose route has the least latency —
// with the two nodes' links moved to the representatives', and a link of latency only (no
// capacity limit) for the members' mean latency beyond it: the fabric links a member of Y
// sees, the mean latency of its class (where the classes tell routes through the spine apart,
// every member's), the node links of the two representatives. X's links weigh |Y|/|X|, Y's 1.
// Every route between classes must be asked for before the replay starts (prepare).
func (r *nodeFoldRouter) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	X, Y := src/r.ppn, dst/r.ppn
	if X == Y {
		return r.cl.Route(r.real(src), r.real(dst), ch, buf)
	}
	key := [3]int{src, dst, ch}
	route, ok := r.routes[key]
	if !ok {
		route = r.between(src, dst, ch)
		r.routes[key] = route
	}
	if len(buf) == 0 {
		return route, ClassNet
	}
	// The weights go with the slice (Simulate keeps it per connection): buf's links weigh 1.
	out := append(buf, route...)
	r.q.weighRoute(out, append(slices.Repeat([]float64{1}, len(buf)), r.q.weights[&route[0]]...))
	return out, ClassNet
}

// between builds Route's route between two classes and weighs it on q.
func (r *nodeFoldRouter) between(src, dst, ch int) []LinkID {
	X, Y := src/r.ppn, dst/r.ppn
	t := ch % 2
	nf := r.nf
	child, parent := Y, X
	if int(nf.parents[t][X]) == Y {
		child, parent = X, Y
	} else if int(nf.parents[t][Y]) != X {
		panic(fmt.Sprintf("simnet: node fold: classes %d and %d are not neighbours in tree %d", X, Y, t))
	}
	j := src % r.ppn
	real := func(y int) []LinkID { // member y's connection with its parent, this way
		p := int(nf.up[t][y])
		a, b := p, y
		if child == X {
			a, b = y, p
		}
		route, _ := r.cl.Route(a*r.ppn+j, b*r.ppn+j, ch, nil)
		return route
	}
	var sum Time
	best, bestLat := -1, Time(0)
	for _, y := range r.members[child] {
		l := r.q.RouteLatency(real(y))
		sum += l
		if best < 0 || l < bestLat {
			best, bestLat = y, l
		}
	}
	mean := Time(math.Round(float64(sum) / float64(len(r.members[child]))))
	route := real(best)
	pb := int(nf.up[t][best])
	w := make([]float64, len(route))
	wp := float64(nf.size[child]) / float64(nf.size[parent])
	for i, l := range route {
		w[i] = 1
		if m, ok := r.cl.moveNodeLink(l, pb, nf.reps[parent]); ok {
			route[i], w[i] = m, wp
		} else if m, ok := r.cl.moveNodeLink(l, best, nf.reps[child]); ok {
			route[i] = m
		}
	}
	if extra := mean - bestLat; extra > 0 {
		l, ok := r.latLink[extra]
		if !ok {
			l = r.q.AddLink("", Rate(math.Inf(1)), extra)
			r.q.relaxLink(l)
			r.latLink[extra] = l
		}
		route, w = append(route, l), append(w, 1)
	}
	r.q.weighRoute(route, w)
	return route
}

// prepare asks for the route of every connection of s between classes: the links of latency
// only are added to q before the replay.
func (r *nodeFoldRouter) prepare(s *coll.Schedule) {
	for _, cn := range s.Conns {
		if cn.From < s.NRanks && cn.To < s.NRanks && cn.From/r.ppn != cn.To/r.ppn {
			r.Route(cn.From, cn.To, cn.Channel, nil)
		}
	}
}

// moveNodeLink maps link l of node from (its own links and NIC ports) to the same link of node
// to; false where l is not one of from's.
func (c *Cluster) moveNodeLink(l LinkID, from, to int) (LinkID, bool) {
	lo := c.nodeLink(from, 0)
	if l >= lo && l < lo+LinkID(c.nl) {
		return c.nodeLink(to, int(l-lo)), true
	}
	for k := 0; k < c.nics; k++ {
		switch l {
		case c.nicUp[from*c.nics+k]:
			return c.nicUp[to*c.nics+k], true
		case c.nicDown[from*c.nics+k]:
			return c.nicDown[to*c.nics+k], true
		}
	}
	return l, false
}

// nvlsNodeFold returns the node fold of plan (an NVLSTree call over more than one node), or nil
// where it leaves more than half the nodes.
func nvlsNodeFold(plan coll.Plan, cl *Cluster, e *Engine) *nodeFold {
	nf := nodeClassesOf(plan, cl, e)
	if nf == nil || 2*len(nf.reps) > len(nf.class) {
		return nil
	}
	return nf
}

// nodeClassesOf is the partition of plan's nodes (nodeClasses, with the latencies of cl's routes
// on e), nil where plan is no NVLSTree call across cl's nodes.
func nodeClassesOf(plan coll.Plan, cl *Cluster, e *Engine) *nodeFold {
	nNodes := max(plan.NNodes, 1)
	if plan.Algo != coll.NVLSTree || nNodes < 2 || cl == nil || cl.NumNodes != nNodes {
		return nil
	}
	if !nodeFoldByLatency {
		return nodeClasses(nNodes, nil)
	}
	ppn := plan.NRanks / nNodes
	return nodeClasses(nNodes, func(n, t int) Time {
		up, _, _, _ := coll.Dtree(nNodes, n, t)
		route, _ := cl.Route(n*ppn, up*ppn, t, nil)
		return e.RouteLatency(route)
	})
}

// nodeFoldByLatency tells the fold's classes apart by the latency of their routes to their
// parents too (routes through the spine or not): more classes, each with its members' own
// latency, where by default a class takes its members' mean (nodeFoldRouter.Route).
var nodeFoldByLatency = false

// nodeFoldRun replays the folded plan fp (f's representative channels of an NVLSTree call) with
// the nodes folded by nf on a private engine: e's links with their capacities divided by f's
// members, the switch-to-switch links unbounded. Not bound, it checks the real switch links and
// returns errHalted at the first one over its capacity; bound, it gives the quotient stand-ins
// for them (standIns, switch-bound).
func nodeFoldRun(fp coll.Plan, f nvlsFold, nf *nodeFold, e *Engine, cl *Cluster, tm Timing, bound bool, memo *foldScheds) (*Result, error) {
	nNodes := max(fp.NNodes, 1)
	ppn := fp.NRanks / nNodes
	k := len(nf.reps)
	qp := fp
	qp.NNodes, qp.NRanks = k, k*ppn
	qp.NodeTrees = make([]coll.ChannelTree, fp.ChannelLo+fp.NChannels)
	for c := fp.ChannelLo; c < fp.ChannelLo+fp.NChannels; c++ {
		qp.NodeTrees[c] = nf.tree(c % 2)
	}
	s, ix, err := memo.compile(qp)
	if err != nil {
		return nil, err
	}
	if bound {
		if res := memo.boundResult(qp); res != nil {
			return res, nil // replayed ahead (below)
		}
	}
	q := foldedEngine(e, f.members)
	for l := cl.swLo; l < cl.swHi; l++ {
		// Unbounded, they limit nothing. The switch-bound replay leaves them out of the rate
		// computations from the start, where they would join the components of connections
		// whose members cross the same spine links (on the 64-node fat tree of BENCHMARKS.md's
		// speed9 section, together with the stand-ins' release, 116 flows a computation → 64);
		// in the checked replay pruneImplied leaves them out (a finite link of every route
		// through them implies them).
		q.links[l].cap = Rate(math.Inf(1))
		q.links[l].relaxed, q.links[l].lazy = false, bound
	}
	// The node links but the NVSwitch links and the NIC ports are relaxed (left out of the rate
	// computations while within their capacity, enforced from the instant one is over: the same
	// rates, relax.go): the rate computations then stop at a GPU's NVSwitch links and at the NIC
	// ports instead of joining every flow of a node. Those that carry only a NIC port's flows are
	// made strict again once the routes are known (tighten).
	nvs := map[int]bool{} // the links to and from the NVSwitch stay: a switch message crosses no other
	for g := range cl.Node.GPUToNVS {
		nvs[cl.Node.GPUToNVS[g]], nvs[cl.Node.NVSToGPU[g]] = true, true
	}
	for n := 0; n < cl.NumNodes; n++ {
		for l := 0; l < cl.nl; l++ {
			if !nvs[l] {
				q.relaxLink(cl.nodeLink(n, l))
			}
		}
	}
	qr := newNodeFoldRouter(cl, q, nf, ppn)
	heads := fp.NVLSHeadRanks()
	// The fabric's switch links: every real member connection between nodes (each channel f
	// folds, each head, each tree link, both directions) loads the switch links of its route with
	// the rate of the quotient connection that stands for it. Links loaded alike (the same
	// capacity, the same quotient connections in the same numbers) share one stand-in on q, a
	// relaxed link of their capacity that each quotient connection crosses with the weight of its
	// members on one of them: left out while within its capacity (the replay is then the one
	// without it), enforced from the instant it is over until it is under again (docs/cluster.md,
	// "NVLSTree: the node fold").
	conn := map[[4]int]int32{}
	for i, cn := range s.Conns {
		conn[[4]int{cn.From, cn.To, cn.Channel, cn.ConnIndex}] = int32(i)
	}
	var pairs []uint64
	var buf []LinkID
	if cl.swLo < cl.swHi {
		for c := fp.ChannelLo; c < fp.ChannelLo+fp.NChannels; c++ {
			t := c % 2
			for m := 0; m < f.members; m++ {
				ch := c + m*f.period
				for n := 0; n < nNodes; n++ {
					u := int(nf.up[t][n])
					if u < 0 {
						continue
					}
					X, P := int(nf.class[n]), int(nf.class[u])
					for _, j := range heads {
						for _, dir := range [2]struct{ a, b, A, B, idx int }{{n, u, X, P, 0}, {u, n, P, X, 2}} {
							id, ok := conn[[4]int{dir.A*ppn + j, dir.B*ppn + j, c, dir.idx}]
							if !ok {
								return nil, fmt.Errorf("simnet: node fold: no quotient connection %d→%d on channel %d", dir.A*ppn+j, dir.B*ppn+j, c)
							}
							buf, _ = cl.Route(dir.a*ppn+j, dir.b*ppn+j, ch, buf[:0])
							for _, l := range buf {
								if l >= cl.swLo && l < cl.swHi {
									pairs = append(pairs, relaxPair(l, id))
								}
							}
						}
					}
				}
			}
		}
	}
	qr.prepare(s)
	// The relaxed node links that only ever carry flows of one strict link are made strict and
	// the links another implies left out (tighten, pruneImplied).
	opt := Options{index: ix, prune: nodeFoldTighten}
	sigs := newRelaxCheck(e, pairs, len(s.Conns))
	// Ahead: where the switch-bound replay would take partial rate computations (standInsMixed),
	// the checked replay is the switch-bound one. Until a stand-in goes over its capacity (a
	// switch link over its capacity: where the check would halt the replay) the two are the same
	// replay; where none does, its result is the fold's; where one does, the replay goes on
	// switch-bound, its result is kept for nvlsSwitchBound (foldScheds.boundResult) and the
	// check's halt returned.
	ahead := sigs != nil && !bound && memo != nil && nodeFoldAhead && nodeFoldPartial && qr.standInsMixed(s, sigs)
	if ahead {
		// As the checked replay has them until then (the same rates summed in the same order),
		// left out as the switch-bound replay has them from then on.
		for l := cl.swLo; l < cl.swHi; l++ {
			q.lazyAtStandIn = append(q.lazyAtStandIn, l)
		}
		q.atStandIn = memo.ahead
	}
	switch {
	case sigs != nil && !bound && !ahead:
		// The switch links checked, the replay halted at the first one over.
		sigs.e, sigs.halt, sigs.haltOnly = q, true, true
		opt.watch = func(_ *coll.Schedule, conn func(int64) int32) observer {
			sigs.slot = conn
			return sigs
		}
	case sigs != nil:
		// Partial rate computations (Engine.partial) where a stand-in joins the connections of
		// several GPUs of a node (ECMP hashes every rail's connections onto a leaf's uplinks):
		// it then joins their trees into one component, where one GPU's connections change at a
		// time. A GPU's connections are one component already (its PCIe links carry them all),
		// so where each stand-in carries one GPU's (rail routing) partial would save nothing and
		// is not tried: those replays are bit for bit as before.
		q.partialOK = qr.standIns(s, sigs) && nodeFoldPartial
	}
	if nodeFoldTighten {
		qr.tighten(s)
	}
	res, err := Simulate(q, qr, s, tm, opt)
	if nodeFoldSeen != nil {
		nodeFoldSeen(q)
	}
	if ahead && err == nil && q.StandInActs > 0 {
		memo.keepBound(qp, res)
		return nil, errHalted
	}
	return res, err
}

// nodeFoldAhead: the checked replay is the switch-bound one where that takes partial rate
// computations (nodeFoldRun; tests turn it off to compare).
var nodeFoldAhead = true

// foldScheds keeps the quotient schedules that one call's node-folded replays compiled, with
// their indexes: the switch-bound replay (nvlsSwitchBound) replays the quotient that the checked
// one (nvlsSymmetric) compiled before its check halted it, and takes it from here instead of
// compiling and indexing it again. Safe for the two replays of an extrapolation at once; a nil
// *foldScheds keeps nothing.
type foldScheds struct {
	mu sync.Mutex
	a  []foldSched
	// ahead, where set, is called when a checked replay that goes on switch-bound (nodeFoldRun)
	// first enforces a stand-in: from then on that replay will report a halt, and nvlsSymmetric
	// starts what it runs after one (its probe, haltProbe) beside the rest of the replay.
	ahead func()
}

type foldSched struct {
	qp    coll.Plan
	s     *coll.Schedule
	ix    *indexJob
	bound *Result // the switch-bound replay's result, where it was replayed ahead (nodeFoldRun)
}

// keepBound keeps res as the switch-bound replay's result of the quotient plan qp.
func (m *foldScheds) keepBound(qp coll.Plan, res *Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.a {
		if reflect.DeepEqual(m.a[i].qp, qp) {
			m.a[i].bound = res
			return
		}
	}
}

// boundResult is the switch-bound replay's result of qp kept by keepBound (nil: none), handed
// out once.
func (m *foldScheds) boundResult(qp coll.Plan) *Result {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.a {
		if x := &m.a[i]; x.bound != nil && reflect.DeepEqual(x.qp, qp) {
			res := x.bound
			x.bound = nil
			return res
		}
	}
	return nil
}

// compile is coll.Compile(qp) and its coll.NewIndex (started: Simulate waits for it), from m where
// an equal plan was compiled before.
func (m *foldScheds) compile(qp coll.Plan) (*coll.Schedule, *indexJob, error) {
	if m != nil {
		m.mu.Lock()
		for _, x := range m.a {
			if reflect.DeepEqual(x.qp, qp) {
				m.mu.Unlock()
				return x.s, x.ix, nil
			}
		}
		m.mu.Unlock()
	}
	s, err := coll.Compile(qp)
	if err != nil {
		return nil, nil, err
	}
	ix := startIndex(s)
	if m != nil {
		m.mu.Lock()
		m.a = append(m.a, foldSched{qp: qp, s: s, ix: ix})
		m.mu.Unlock()
	}
	return s, ix, nil
}

// nodeFoldSeen, where set (tests), is given the engine of every node-folded replay once it ends.
var nodeFoldSeen func(q *Engine)

// standInNeed is the signatures of sigs that get a stand-in (standIns), and every connection's
// key in routes.
func (r *nodeFoldRouter) standInNeed(s *coll.Schedule, sigs *relaxCheck) (keys [][3]int, need []bool) {
	keys = make([][3]int, len(s.Conns))
	most := make([]float64, len(s.Conns)) // the most a connection's flow may get
	worst := make([]float64, len(sigs.capa))
	for id, cn := range s.Conns {
		keys[id] = [3]int{cn.From, cn.To, cn.Channel}
		route, ok := r.routes[keys[id]]
		if !ok || sigs.off[id] == sigs.off[id+1] {
			continue
		}
		most[id] = math.Inf(1)
		w := r.q.weights[&route[0]]
		for i, l := range route {
			if c := float64(r.q.LinkCap(l)); !math.IsInf(c, 1) {
				most[id] = min(most[id], c/w[i])
			}
		}
		for i := sigs.off[id]; i < sigs.off[id+1]; i++ {
			worst[sigs.sig[i]] += sigs.mult[i] * most[id]
		}
	}
	need = make([]bool, len(sigs.capa))
	for g, c := range sigs.capa {
		need[g] = worst[g] > c*(1+relaxTolerance)
	}
	return keys, need
}

// standInsMixed reports whether standIns would give some stand-in the connections of more than
// one GPU of a node, changing nothing.
func (r *nodeFoldRouter) standInsMixed(s *coll.Schedule, sigs *relaxCheck) bool {
	_, need := r.standInNeed(s, sigs)
	local := make([]int, len(need))
	for id, cn := range s.Conns {
		if _, ok := r.routes[[3]int{cn.From, cn.To, cn.Channel}]; !ok {
			continue
		}
		for i := sigs.off[id]; i < sigs.off[id+1]; i++ {
			if g := sigs.sig[i]; need[g] {
				j := cn.From%r.ppn + 1
				if local[g] != 0 && local[g] != j {
					return true
				}
				local[g] = j
			}
		}
	}
	return false
}

// standIns gives the quotient connections of s between classes the stand-ins of the switch links
// their members cross (sigs: one signature per set of real links loaded alike, with its capacity
// and, per connection, its members on one of those links): a relaxed link of q of the signature's
// capacity, crossed with the weight of those members. A signature that cannot go over its
// capacity even with every connection crossing it at the most its other links allow (the least
// capacity over weight of its route) gets none: it would never be enforced. Routes must have
// been asked for (prepare); those that get stand-ins are replaced by longer ones. It reports
// whether some stand-in is crossed by the connections of more than one GPU of a node (local
// index).
func (r *nodeFoldRouter) standIns(s *coll.Schedule, sigs *relaxCheck) (mixed bool) {
	keys, need := r.standInNeed(s, sigs)
	links := make([]LinkID, len(sigs.capa))
	for g, c := range sigs.capa {
		links[g] = -1
		if need[g] {
			links[g] = r.q.AddLink("", Rate(c), 0)
			r.q.releaseLink(links[g])
		}
	}
	local := make([]int, len(links)) // per stand-in: the local index of its connections' GPUs, +1 (0: none yet)
	for id, cn := range s.Conns {
		route, ok := r.routes[keys[id]]
		if !ok {
			continue
		}
		var add []LinkID
		var wadd []float64
		for i := sigs.off[id]; i < sigs.off[id+1]; i++ {
			g := sigs.sig[i]
			if l := links[g]; l >= 0 {
				add, wadd = append(add, l), append(wadd, sigs.mult[i])
				j := cn.From%r.ppn + 1
				if local[g] != 0 && local[g] != j {
					mixed = true
				}
				local[g] = j
			}
		}
		if len(add) == 0 {
			continue
		}
		w := r.q.weights[&route[0]]
		route = append(slices.Clone(route), add...)
		r.q.weighRoute(route, append(slices.Clone(w), wadd...))
		r.routes[keys[id]] = route
	}
	return mixed
}

// tighten makes strict the relaxed node links every route through which also crosses one strict
// link of finite capacity (the same one for every route): a head's PCIe links on the way to its
// NIC, whose port is strict. Enforced, such a link joins no flows into a rate computation that
// the strict link does not join already; relaxed, it is left out while within its capacity and
// enforced once over it, and on DGX H100, whose PCIe links (48 GB/s) are narrower than its NIC
// ports (50 GB/s), it goes over at once and stays enforced while it carries flows. Strict, the
// links whose constraint another implies are left out for good (Engine.pruneImplied, given
// Options.prune): one link of a head's three to its NIC port (GPU → PCIe switch → NIC → leaf)
// stays in the rate computations instead of all three. The rates are the same (relaxation and
// pruning each change none); their floating-point order is not. Routes must have been asked for
// (prepare, standIns).
func (r *nodeFoldRouter) tighten(s *coll.Schedule) {
	q := r.q
	cover := map[LinkID][]LinkID{} // per relaxed node link seen: the strict links every route through it crosses
	var tmp []LinkID
	visit := func(route []LinkID) {
		for _, l := range route {
			if !q.links[l].relaxed || !r.cl.isNodeLink(l) {
				continue
			}
			c, seen := cover[l]
			if !seen {
				c = nil
				for _, o := range route {
					if lk := &q.links[o]; !lk.relaxed && !math.IsInf(float64(lk.cap), 1) {
						c = append(c, o)
					}
				}
				cover[l] = c
				continue
			}
			tmp = tmp[:0]
			for _, o := range c {
				if slices.Contains(route, o) {
					tmp = append(tmp, o)
				}
			}
			cover[l] = append(c[:0], tmp...)
		}
	}
	for _, cn := range s.Conns {
		n := s.NRanks
		switch {
		case cn.From < n && cn.To < n:
			route, _ := r.Route(cn.From, cn.To, cn.Channel, nil)
			visit(route)
		case cn.From < n || cn.To < n:
			rank, sw, up := cn.From, cn.To, true
			if cn.From >= n {
				rank, sw, up = cn.To, cn.From, false
			}
			if swi := s.Switches[sw-n]; swi.Kind == coll.SwitchNVLS {
				if route, err := r.RouteSwitch(rank, swi.Node, up, nil); err == nil {
					visit(route)
				}
			}
		}
	}
	for l, c := range cover {
		if len(c) > 0 {
			q.links[l].relaxed, q.links[l].lazy = false, false
		}
	}
}

// nodeFoldPartial: the switch-bound replay computes the rates of the part of a component that
// changed where that is enough (Engine.partial; tests turn it off to compare).
var nodeFoldPartial = true

// nodeFoldTighten: nodeFoldRun tightens the quotient's node links (tighten; tests turn it off to
// compare).
var nodeFoldTighten = true

// isNodeLink reports whether l is one of the links inside a node (nodeLink).
func (c *Cluster) isNodeLink(l LinkID) bool {
	lo := c.nodeLink(0, 0)
	return l >= lo && l < lo+LinkID(c.NumNodes*c.nl)
}

// nodeFoldMode is the row mode of a node-folded replay.
const nodeFoldMode = "nvlstree-fold"

// String is a short description of nf for messages and tests.
func (nf *nodeFold) String() string {
	return fmt.Sprintf("%d classes of %d nodes (sizes %v)", len(nf.reps), len(nf.class), slices.Clone(nf.size))
}
