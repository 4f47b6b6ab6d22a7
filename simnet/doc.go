// Package simnet is simccl's discrete-event network simulator: it times the schedules package
// coll compiles on a model of the machine (a node topology from package graph, replicated over a
// fabric) and records every point-to-point message with its route.
//
// The engine (Engine) keeps simulated time as integer picoseconds and its events in typed heaps
// ordered by (time, sequence number), so runs are deterministic. Links are resources with a
// capacity; flows crossing them share it max-min fairly (progressive filling), recomputed once per
// instant and only for the connected component of the links whose flows changed. Flow
// completions live in an indexed heap (one entry per flow), so a rate change moves an entry
// instead of leaving a stale event behind.
//
// Simulate replays a coll.Schedule exactly: a step starts when its dependencies are done, its
// messages have arrived and the connection's NCCL_STEPS credit is free; each message is a flow of
// its wire bytes, delivered after the route latency plus NCCL's per-step hardware latency for the
// route's class. SimulateRing, SimulateTree and SimulateP2P replay NCCL's rings, split trees and
// point-to-point rounds without materialising the schedule, for clusters of thousands of GPUs:
// one representative per class of equivalent ranks (colour refinement for trees, the rotation of
// nodes for rings and point-to-point), the fabric's switch-to-switch links relaxed (left out of
// the rate computation while they are within their capacity, which changes no rate) and checked.
// Where ECMP collisions make that inexact, an approximation may stand and the row's mode says so
// (docs/cluster.md lists the modes with their error against the exact replay). NVLS and NVLSTree
// run on coll's schedule with their channels folded: channels whose parts are equal and whose
// messages take the same links move in lockstep, so one per class is replayed on a private engine
// whose links have the capacity each member gets (nvlssim.go). Across many nodes NVLSTree also
// folds its nodes, one per class of places in the double binary tree, exact in expectation only
// (nvlsfold.go, mode nvlstree-fold).
//
// Usage:
//
//	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: 16})
//	m, err := simnet.NewMachine(p.System, 16, simnet.DefaultFabric(), p, p.Settings.Release)
//	row, res, err := m.Run(coll.AllReduce, 1<<30, coll.Float32, coll.Sum, simnet.RunOptions{Record: true})
//	fmt.Println(row.TimeUs, row.BusBw, row.Mode, len(res.Ops))
//
// Cluster builds the links of nodes copies of a NodeModel joined by a Fabric (rail-optimized or
// fat tree, two or three tiers, oversubscription, ECMP or destination-mod-k routing; the file
// format is in docs/cluster.md). WriteTrace, WriteOpsCSV, WriteTable and WriteJSON produce
// simccl run's outputs (its --plot is the report's chart, report.WriteBusbwPlot).
//
// A Machine builds its cluster once; Run may be called from several goroutines at once. The
// simulation itself runs on one goroutine, except colour refinement, whose rounds are shared out
// over the cores without changing the result.
//
// Programmer errors (a negative event kind) panic; bad input (schedules, fabrics, node models)
// gives an error naming the place.
package simnet
