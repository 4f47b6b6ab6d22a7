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
// The package does no I/O beyond the writers it is handed.
package graph
