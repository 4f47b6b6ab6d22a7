// Package search is NCCL's channel search (src/graph/search.cc of NCCL 2.28): from
// a node's system (nodes, links, paths) it computes the ring, tree, CollNet chain, CollNet direct
// and NVLS graphs NCCL's init computes — the number of channels, the per-channel bandwidths
// bwIntra/bwInter, the worst path types typeIntra/typeInter, sameChannels, crossNic, and the GPU
// (and NET) order of every channel — then the communicator's channel count after NCCL's postset
// rules. It also reads and writes NCCL's graph files (NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE).
//
// The search reproduces NCCL's exactly, quirks included, because its answer depends on the
// order in which it tries things within a time budget: the speed arrays per compute capability
// (versioned, ParamsFor), the two passes over (sameChannels, tree simplification, typeIntra,
// typeInter, crossNic, speed), the budgets counted in recursion calls, PCI-order and replay
// starts, the NVSwitch neighbour shortcut, the next-GPU sort keys, bandwidth accounting in float32
// with NCCL's rounding (Intel PHB ×1.2, pre-Ampere and POWER reverse charges), NET selection
// (ncclTopoGetLocalNet mirroring, guid+port sharing with the integer-truncated reservation),
// channel duplication and the fallback. Bandwidths are float32 internally for that reason.
//
// PAT uses the tree graph; trees across nodes (the double binary tree) and rings across nodes are
// built from these graphs' channel orders by package coll (coll.Dtree, coll.BuildTrees,
// coll.BuildRings).
//
// Usage:
//
//	sys, _ := topo.FromXML(doc, graph.Options{LocalRank: 0, NRanks: nodes * ngpus})
//	top, _ := search.FromSystem(sys, nodes > 1) // single node: NCCL drops the NETs
//	res, _ := search.ComputeAll(top, search.AllOptions{Nodes: nodes})
//	search.WriteReport(os.Stdout, res)           // "Pattern 4, crossNic 0, nChannels 12, …"
//	search.WriteDump(f, top, res.Graphs())       // NCCL_GRAPH_DUMP_FILE format
//
// Nodes that differ: search.ComputeNodes([]*search.Topology{…}, opts) reduces their graphs as
// NCCL's AllGather3 (init.cc) does. One graph alone: search.Compute(top, search.Request{ID:
// search.IDRing, Pattern: search.PatternRing, MinChannels: 1, MaxChannels: 32}, search.Options{}).
//
// The golden tests (golden_test.go) run every topology of testdata that has an NCCL graph dump
// beside it and compare every graph; where the dump comes from another release, the test says
// which rule changed and asserts what 2.28 gives.
package search
