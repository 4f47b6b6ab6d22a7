// Package xml reads and writes NCCL topology files (<system version="1">, the format of
// NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE) and NCCL graph dumps (<graphs version="1">, the format
// of NCCL_GRAPH_DUMP_FILE and NCCL_GRAPH_FILE).
//
// The tree is kept lossless: unknown elements and attributes, attribute order, comments,
// processing instructions and CDATA survive a read followed by a write (the bytes may differ in
// quoting and character references; the tree read back is the same). Errors are *Error values
// that name the file and the line and wrap ErrSyntax. The package knows nothing of bandwidths or
// paths; package topo builds the system model from the tree.
//
//	doc, err := xml.ReadFile("topo.xml")
//	if err != nil { ... }            // e.g. "topo.xml:12: </pci> closes <gpu> opened at line 9"
//	doc.WriteTo(os.Stdout)
//
// Reading is bounded: at most MaxInputBytes of input (16 MiB), MaxElements elements, MaxDepth
// levels of nesting, MaxAttrs attributes an element and MaxAttrsTotal a document, MaxMarkup
// elements, comments and other markup together, all checked as the input is read and the first
// two before any tree is built; DTD entity declarations (billion laughs, external entities) and
// duplicate attributes are refused. Only version 1 of either root is accepted (RCCL's version="2" is not
// NCCL's format).
//
// Attribute helpers decode the values NCCL's reader decodes, with errors located at the
// element: integers in decimal, hex or octal as strtol base 0 reads them (ParseInt,
// Document.RequireInt), numbers (ParseFloat), and PCI bus ids turned into NCCL's int64 ids
// (ParseBusID, with the NVSwitch sentinel SentinelBusID):
//
//	busid, err := doc.RequireBusID(pci, "busid") // "topo.xml:7: <pci> without busid"
//
// Graph dumps have a typed form, read with ReadGraphs (or ParseGraphs) and written back in
// NCCL's own layout by Graphs.WriteTo; NCCL's dumps come out byte for byte:
//
//	gs, err := xml.ReadGraphs(doc)
//	for _, g := range gs.Graphs { ... g.Channels[0].GPUs ... }
package ncclxml
