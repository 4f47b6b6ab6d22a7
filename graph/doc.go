// Package graph is the system model NCCL builds at communicator creation: nodes (GPU, PCI, NVS,
// CPU, NIC, NET), links with NCCL's bandwidths, and the paths between them with NCCL's path types
// (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS).
//
// The rules are those of NCCL 2.28 by default; Options.Version selects 2.30.7 where the rules
// differ. Comments name the NCCL function each rule comes from.
//
// A System is built from NCCL topology XML by package topo (topo.FromXML), or by any builder
// through NewSystem, AddNode, Connect and RemoveNode, then Compute:
//
//	doc, err := ncclxml.ReadFile("topo.xml")
//	sys, err := topo.FromXML(doc, graph.Options{LocalRank: -1})
//	p := sys.Path(sys.GPUs()[0], sys.NETs()[0]) // p.Type, p.BW, p.Hops()
//	sys.Print(os.Stdout)                        // NCCL's "=== System" tree and path lines
//
// Compute runs what NCCL does once the graph is built: paths (ncclTopoComputePaths), the P2P,
// P2C, PXN and GDR rewrites, trimming to the local rank's domain (ncclTopoTrimSystem), and
// maxBw/totalBw (ncclTopoSearchInit). Options mirror NCCL's environment (NCCL_P2P_LEVEL,
// NCCL_PXN_DISABLE, …); the zero value is NCCL 2.28.9's default as seen by rank 0 of a
// single-node communicator.
//
// Inputs NCCL accepts silently but that are probably mistakes are listed, located, in
// System.Warnings by the builder. GPU pairs with no route at all are listed in
// System.Unreachable. A one-way link found by Compute is a *NodeError, which the builder locates
// in its input; builders wrap ErrTopology.
//
// A Cluster is N copies of one node topology (rank r on node r/ppn, built by topo.NewCluster);
// each node sees its own System, the other nodes only through its NETs.
//
// The printout (System.Print) is NCCL 2.28's INFO/GRAPH text without the log prefix; it matches
// NCCL 2.28.9's own log byte for byte on the captured 2×H200 machine (see nccllog_test.go).
//
// The package does no I/O beyond the writers it is handed, and does not read XML.
package graph
