// Package xml reads and writes NCCL topology files (<system version="1">, the format of
// NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE) and NCCL graph dumps (<graphs version="1">, the format
// of NCCL_GRAPH_DUMP_FILE and NCCL_GRAPH_FILE).
//
// The tree is kept lossless: unknown elements and attributes, attribute order and comments
// survive a read followed by a write. Errors name the file and the line. The package knows
// nothing of bandwidths or paths; package graph interprets the tree.
//
//	doc, err := xml.ReadFile("topo.xml")
//	if err != nil { ... }            // e.g. "topo.xml:12: <pci> without busid"
//	doc.WriteTo(os.Stdout)
package xml
