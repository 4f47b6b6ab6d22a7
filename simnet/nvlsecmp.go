package simnet

import (
	"errors"
	"math"

	"github.com/simccl/simccl/coll"
)

// The checked NVLS fold: channels that ECMP hashes onto different switch-to-switch links.
//
// nvlsFoldOf folds channels whose messages take the same links. Under ECMP the channels of an
// NVLSTree call leave a leaf by uplinks their index hashes to, so no two of them take the same
// links across the spine and nothing folds. Those links are the ones the engine relaxes (relax.go):
// equal-cost siblings of one leaf (or pod) and direction, which rarely limit anything. The checked
// fold compares the channels' routes with each relaxed link replaced by its leaf and direction
// (its stand-in) and its latency, so channels whose messages cross the same NIC ports, NVSwitch
// links and leaves, with the same latencies, fold as before. The folded replay then leaves the
// relaxed links out altogether (infinite capacity) and checks instead, after every instant, the
// load of every real relaxed link: the rates of the representatives' connections times the
// members whose route crosses that link (relaxCheck). If no link is ever over its capacity, the
// replay's rates are those of the full replay (the max-min fair allocation without those
// constraints satisfies them, so it is the allocation with them; relax.go), and its time is the
// schedule's, exactly as the same-link fold. At the first link over its capacity the replay
// stops and the call is timed as without the fold (Machine.Run's next modes).

// nvlsCheck is a checked fold: the period and members of its nvlsFold.
type nvlsCheck struct {
	period, members int
}

// nvlsFoldChecked folds plan's channels comparing relaxed links by their stand-ins and latencies
// (see above). It returns false where the router relaxes no link or no fold leaves fewer channels.
func nvlsFoldChecked(plan coll.Plan, cl *Cluster, e *Engine) (nvlsFold, *nvlsCheck, bool) {
	if cl == nil || cl.swLo == cl.swHi {
		return nvlsFold{}, nil, false
	}
	lat := map[Time]LinkID{}
	one := make([]LinkID, 1)
	key := func(sig, route []LinkID) []LinkID {
		for _, l := range route {
			s, ok := cl.standIn(l)
			if !ok {
				sig = append(sig, l)
				continue
			}
			one[0] = l
			t := e.RouteLatency(one)
			id, seen := lat[t]
			if !seen {
				id = LinkID(len(lat))
				lat[t] = id
			}
			sig = append(sig, -2-s, id) // always a pair: no link id follows a stand-in
		}
		return sig
	}
	f, ok := nvlsFoldBy(plan, cl, key)
	if !ok {
		return nvlsFold{}, nil, false
	}
	return f, &nvlsCheck{period: f.period, members: f.members}, true
}

// simulate replays the folded schedule s on a private engine with e's links, their capacities
// divided by the members and the relaxed links unbounded, checking every real relaxed link. It
// returns errHalted at the first one over its capacity.
func (c *nvlsCheck) simulate(e *Engine, cl *Cluster, s *coll.Schedule, tm Timing) (*Result, error) {
	return c.replay(e, cl, s, tm, nil)
}

// replay is simulate, watching the replay for the end of a prefix of s where pp is set.
func (c *nvlsCheck) replay(e *Engine, cl *Cluster, s *coll.Schedule, tm Timing, pp *prefixProbe) (*Result, error) {
	q := foldedEngine(e, c.members)
	for l := cl.swLo; l < cl.swHi; l++ {
		// Unbounded, they limit nothing: left out of the rate computations for good, where
		// relaxed they would be left out too but their loads kept (the same rates).
		q.links[l].cap = Rate(math.Inf(1))
		q.links[l].relaxed, q.links[l].lazy = false, true
	}
	// One pair (link, connection) per member connection crossing a relaxed link.
	var pairs []uint64
	var buf []LinkID
	for ci, cn := range s.Conns {
		if cn.From >= s.NRanks || cn.To >= s.NRanks {
			continue // a switch endpoint: the node's own NVSwitch links
		}
		for k := 0; k < c.members; k++ {
			ch := cn.Channel + k*c.period
			if cn.ConnIndex == 1 {
				buf, _ = routeP2P(cl, cn.From, cn.To, ch, buf[:0])
			} else {
				buf, _ = cl.Route(cn.From, cn.To, ch, buf[:0])
			}
			for _, l := range buf {
				if _, ok := cl.standIn(l); ok {
					pairs = append(pairs, relaxPair(l, int32(ci)))
				}
			}
		}
	}
	check := newRelaxCheck(e, pairs, len(s.Conns))
	opt := Options{prune: true, prefix: pp}
	if check != nil {
		check.e, check.halt, check.haltOnly = q, true, true
		opt.watch = func(_ *coll.Schedule, conn func(int64) int32) observer {
			check.slot = conn
			return check
		}
	}
	res, err := Simulate(q, cl, s, tm, opt)
	if nvlsCheckSeen != nil {
		nvlsCheckSeen(q, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// nvlsCheckSeen, where set (tests), is given the engine of every checked replay once it ends,
// and its error.
var nvlsCheckSeen func(q *Engine, err error)

// halts reports whether the checked replay of every schedule of plan's fold f with at least
// loops+1 whole loops per channel (withLoops) halts, from the replay of the one with loops+1
// (prefixProbe): the schedules begin with the same steps, the first loops of every channel, and
// where the replay of the short one halts before any lane's last step of those loops completes,
// the replay of a longer one is the same up to there and halts at the same instant. It returns
// false where the probe halted later or not at all (nothing is known then).
func (c *nvlsCheck) halts(e *Engine, cl *Cluster, plan coll.Plan, f nvlsFold, tm Timing, loops int64) (bool, error) {
	s, err := coll.Compile(f.withLoops(plan, loops+1).plan(plan))
	if err != nil {
		return false, err
	}
	pp := &prefixProbe{Chunks: int(loops * nvlsLoopChunks(plan))}
	_, err = c.replay(e, cl, s, tm, pp)
	switch {
	case errors.Is(err, errHalted):
		return pp.OK && !pp.Diverged, nil
	case err != nil:
		return false, err
	}
	return false, nil
}
