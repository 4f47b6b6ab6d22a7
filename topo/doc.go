// Package topo turns NCCL topology XML into the system model, as NCCL's ncclTopoGetSystemFromXml
// does: a <cpu> becomes a CPU node, a <pci> a PCI switch, GPU or NIC, a <net> a NET node, and
// <nvlink>, <c2c> and <pcilink> become links, with the bandwidths NCCL 2.28 gives them (PCI
// generation and width, NVLink bandwidth per compute capability, inter-socket bandwidth by CPU
// arch, vendor and model). Broadcom switches seen as two levels are flattened and links sorted
// as NCCL sorts them; package graph then computes the paths (graph.System.Compute).
//
//	doc, err := ncclxml.ReadFile("topo.xml")
//	sys, err := topo.FromXML(doc, graph.Options{})         // one node, rank 0's view
//	c, err := topo.NewCluster(doc, 16, graph.Options{})    // 16 copies of the node
//
// Errors wrap graph.ErrTopology and name the file and, where there is one, the line of the
// element concerned (an *ncclxml.Error, which wraps ncclxml.ErrSyntax). Inputs NCCL accepts
// silently but that are probably mistakes (an NVLink count of 0, an NVLink to a GPU that is not
// there, a placeholder host_hash) load with a located entry in System.Warnings; Options.Strict
// makes them errors.
package topo
