// Package graph is the system model NCCL builds at communicator creation: nodes (GPU, PCI, NVS,
// CPU, NIC, NET), links with NCCL's bandwidths, and the paths between them with NCCL's path types
// (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS).
//
// The rules are those of NCCL 2.28 by default; Options.Version selects 2.30.7 where the rules
// differ (see /work/shared/reference/nccl-model.md §1–§3 for every rule cited in comments).
//
//	doc, err := xml.ReadFile("topo.xml")
//	sys, err := graph.FromXML(doc, graph.Options{LocalRank: -1})
//	p := sys.Path(sys.GPUs()[0], sys.NETs()[0]) // p.Type, p.BW, p.Hops()
//	sys.Print(os.Stdout)                        // NCCL's "=== System" tree and path lines
//
// What NCCL does after building the graph is reproduced in FromXML: paths (§3.2), the P2P,
// P2C, PXN and GDR rewrites (§3.3–3.5), trimming to the local rank's domain, and maxBw/totalBw
// (§4.2). Options mirror NCCL's environment (NCCL_P2P_LEVEL, NCCL_PXN_DISABLE, …); the zero value
// is NCCL 2.28.9's default as seen by rank 0 of a single-node communicator.
//
// Inputs NCCL accepts silently but that are probably mistakes (an NVLink count of 0, an NVLink to
// a GPU that is not there, a placeholder host_hash) load with a located entry in
// System.Warnings; Options.Strict makes them errors. GPU pairs with no route at all are listed in
// System.Unreachable. Errors wrap ErrTopology and name the file and line.
//
// NewCluster replicates one node topology N times (rank r on node r/ppn); each node sees its own
// System, the other nodes only through its NETs.
//
// The printout (System.Print) is NCCL 2.28's INFO/GRAPH text without the log prefix; it matches
// NCCL 2.28.9's own log byte for byte on the captured 2×H200 machine (see nccllog_test.go).
//
// The package does no I/O beyond the writers it is handed.
package graph
