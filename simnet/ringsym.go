package simnet

import (
	"errors"
)

// ringRotation returns the rotation (in nodes) of symmetricRing's replay: the smallest multiple of
// R, the rotation under which the routes map onto each other, that divides the nodes, holds two
// ranks at least (a one-rank representative would be its own successor, which runRing does not
// model) and under which every ring repeats (position i+S holds rank ring[i]+S, S = R × G ranks);
// 0 where none short of the whole cluster does. A rotation by a multiple of R maps the routes as R
// does. NCCL's rings need not repeat every node: with crossNic 2 (NCCL 2.28 connectRings, on an
// even channel count) the nodes of odd index swap their channels in pairs (c, c^1) so that
// consecutive nodes alternate NICs, and those rings repeat every two nodes (every ring of a DGX
// H100 cluster, whose search settles on crossNic 2). Until 2026-12-01 only R itself was tried, and
// every ring call of such a cluster replayed every rank: an all_gather of 1 GiB on 512 DGX H100
// nodes took 62 s.
func ringRotation(rings [][]int, R, nodes, G int) int {
	if R < 1 {
		return 0
	}
	n := nodes * G
	for R2 := R; R2 < nodes; R2 += R {
		if nodes%R2 != 0 || R2*G < 2 || !ringsRepeat(rings, R2*G, n) {
			continue
		}
		return R2
	}
	return 0
}

// ringsRepeat reports whether every ring of n ranks repeats every S ranks.
func ringsRepeat(rings [][]int, S, n int) bool {
	for _, ring := range rings {
		for i, rk := range ring {
			if ring[(i+S)%n] != (rk+S)%n {
				return false
			}
		}
	}
	return true
}

// symmetricRing is SimulateRing's symmetric replay. NCCL's rings over several nodes repeat one
// node's order every node or every two (ringRotation), so rotating the ranks by whole nodes maps
// every ring onto itself (position i+S holds rank ring[i]+S). As in SimulateP2P, the smallest rotation R under which
// the routes map onto each other (the switch links relaxed: left out where implied, else their
// ECMP mean-model stand-ins, and checked) splits the ring positions into orbits; the first S
// positions of each ring are replayed as a ring of S positions whose last sends to its first (the
// position S it stands for) on a private engine whose links stand for orbits of links. Every
// member moves in lockstep with its representative: at 128 nodes a ring of 1,024 ranks runs as
// one of 8, every step exact, where the per-rank replay merges 16 steps per message. It returns
// nil, nil where it does not apply (the caller replays every rank): no rotation short of the
// whole cluster, rings that do not repeat, unequal crossings of a link orbit, or a relaxed link
// over its capacity under rail routing (or under ECMP with Exact).
//
// Where ECMP collisions overload a relaxed link (without Exact) it returns the replay as the ECMP
// mean model, with the work its rate computations did, for the caller to try every rank first;
// credit then adds its traffic to e's links.
func symmetricRing(e *Engine, cl *Cluster, spec RingSpec, tm Timing, stepsPerLoop, loops int, wire float64) (*RingResult, func(), uint64, error) {
	n := cl.NumRanks()
	G := cl.Node.NumGPUs
	var buf []LinkID
	eachHop := func(f func(c, i int, route []LinkID)) {
		for c, ring := range spec.Rings {
			for i := range ring {
				buf, _ = cl.Route(ring[i], ring[(i+1)%n], c, buf[:0])
				f(c, i, buf)
			}
		}
	}
	relax, kept := implied(e, func(yield func([]LinkID)) {
		eachHop(func(_, _ int, route []LinkID) { yield(route) })
	}, cl.standIn)
	use := func(l LinkID) LinkID {
		if s, ok := relax(l); ok {
			return s
		}
		return l
	}
	var kinds, latKinds [5]bool
	eachHop(func(_, _ int, route []LinkID) {
		for _, l := range route {
			u := use(l)
			if u >= 0 {
				kinds[cl.kindOf(u)] = true
			}
			if u != l && e.links[l].lat > 0 {
				if cl.kindOf(l) == kindAgg {
					latKinds[kindPodMean] = true
				} else {
					latKinds[kindLeafMean] = true
				}
			}
		}
	})
	R, latMean := cl.symmetry(kinds, latKinds, spec.Exact)
	R = ringRotation(spec.Rings, R, cl.NumNodes, G)
	if R == 0 {
		return nil, nil, 0, nil
	}
	S := R * G
	// The representative ring of every channel: its first S positions, routes over orbit links.
	q := NewEngine(nil)
	q.RateInterval, q.NoShortcut, q.Strict = e.RateInterval, e.NoShortcut, e.Strict
	qlink := map[LinkID]LinkID{}
	weight := map[LinkID]int{}
	mult := map[LinkID]int{}
	groups := make([]*ringLane, len(spec.Rings))
	for c, ring := range spec.Rings {
		g := &ringLane{ring: make([]int32, S), lanes: 1, ch: c, route: make([][]LinkID, S), lat: make([]Time, S), net: make([]bool, S)}
		for i := 0; i < S; i++ {
			g.ring[i] = int32(ring[i])
			route, class := cl.Route(ring[i], ring[(i+1)%n], c, nil)
			g.lat[i] = e.RouteLatency(route) + tm.StepLat[class][spec.Proto]
			g.net[i] = class == ClassNet
			clear(mult)
			var order []LinkID
			prev := LinkID(-1)
			for _, l := range route {
				if u := use(l); u >= 0 {
					o := cl.orbit(u, R)
					if o == prev && cl.isSwitch(l) {
						continue // the queue pairs of a tier: one crossing of its stand-in
					}
					prev = o
					if mult[o] == 0 {
						order = append(order, o)
					}
					mult[o]++
				}
			}
			for _, o := range order {
				w := mult[o]
				if w0, ok := weight[o]; ok && w0 != w {
					return nil, nil, 0, nil // unequal crossings: no single link stands for this orbit
				}
				id, ok := qlink[o]
				if !ok {
					weight[o] = w
					id = q.AddLink("", e.LinkCap(o)/Rate(w), 0)
					qlink[o] = id
				}
				g.route[i] = append(g.route[i], id)
			}
		}
		groups[c] = g
	}
	// The relaxed links' check, and the members' mean latency where only it differs.
	var pairs []uint64
	latSum := make([]Time, len(groups)*S)
	eachHop(func(c, i int, route []LinkID) {
		slot := int32(c*S + i%S)
		for _, l := range route {
			if _, ok := relax(l); ok {
				pairs = append(pairs, relaxPair(l, slot))
			}
		}
		if latMean {
			latSum[slot] += e.RouteLatency(route)
		}
	})
	if latMean {
		members := Time(n / S)
		for c, g := range groups {
			for i := 0; i < S; i++ {
				route, _ := cl.Route(int(g.ring[i]), spec.Rings[c][(i+1)%n], c, nil)
				g.lat[i] += (latSum[c*S+i]+members/2)/members - e.RouteLatency(route)
			}
		}
	}
	check := newRelaxCheck(e, pairs, len(groups)*S)
	ecmp := cl.ecmp() && !spec.Exact && (!kept || spec.MeanOversubscribed)
	if check != nil {
		check.e = q
		check.halt = !ecmp
		check.slot = func(tag int64) int32 {
			if tag&(localTag|ctaTag) != 0 {
				return -1 // the CTA's own work: no link of a connection
			}
			tag &^= nicTag
			return int32(tag>>32)*int32(S) + int32(tag&0xffffffff)
		}
	}
	res, err := runRing(q, groups, spec, tm, stepsPerLoop, loops, wire, check)
	over := check.violated()
	switch {
	case len(over) > 0 && !ecmp:
		if err != nil && !errors.Is(err, errHalted) {
			return nil, nil, 0, err
		}
		return nil, nil, 0, nil // over capacity: replay every rank
	case err != nil:
		return nil, nil, 0, err
	}
	if len(over) > 0 && meanTooFar(check, res.Time) && !spec.MeanOversubscribed {
		return nil, nil, 0, nil // too far over for the mean model: replay every rank
	}
	res.Rotation, res.LatencyMean, res.ECMPMean = R, latMean, len(over) > 0
	if check != nil {
		res.Overload = check.over
	}
	credit := func() {
		// Every member hop carries its position's messages; busy times are those of the orbit's
		// (or relaxed link's).
		per := 0.0
		for s := 0; s < (res.Steps+res.Merge-1)/res.Merge; s++ {
			per += wire * float64(min(res.Merge, res.Steps-s*res.Merge))
		}
		per *= float64(loops)
		seen := make([]bool, e.NumLinks())
		eachHop(func(_, _ int, route []LinkID) {
			for _, l := range route {
				e.links[l].bytes += per * e.crossShare(l)
				if seen[l] {
					continue
				}
				seen[l] = true
				if u := use(l); u == l {
					if id, ok := qlink[cl.orbit(u, R)]; ok {
						e.links[l].busy += q.LinkBusy(id)
					}
				}
			}
		})
		if check != nil {
			check.linkBusy(func(l LinkID, b Time) { e.links[l].busy += b })
		}
		e.now += res.Time
	}
	return res, credit, q.CompVisited, nil
}
