package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Print writes the system as NCCL 2.28 prints it in its INIT/GRAPH log (ncclTopoPrint): the
// "=== System : maxBw X totalBw Y ===" header, the tree below each CPU, a line of '=', then one
// line per GPU and per NET listing its paths ("hops/bw/type") to every GPU, NVS, CPU and NET.
// Lines carry no "NCCL INFO" prefix.
func (s *System) Print(w io.Writer) error {
	for _, l := range s.Lines() {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// Lines returns what Print writes, one string per log line.
func (s *System) Lines() []string {
	out := []string{fmt.Sprintf("=== System : maxBw %2.1f totalBw %2.1f ===", s.MaxBw, s.TotalBw)}
	for _, c := range s.Nodes[CPU] {
		out = s.printRec(out, c, nil, "", map[*Node]bool{})
	}
	out = append(out, "==========================================")
	return append(out, s.PathLines()...)
}

func (s *System) nodeHead(n *Node) string {
	switch n.Type {
	case GPU:
		return fmt.Sprintf("%s (%d)", n.Label(), n.GPU.Rank)
	case CPU:
		return fmt.Sprintf("%s (%d/%d/%d)", n.Label(), n.CPU.ArchID, n.CPU.VendorID, n.CPU.ModelID)
	case PCI:
		return fmt.Sprintf("%s (%x)", n.Label(), n.PCI.Device)
	}
	return n.Label()
}

// printRec follows ncclTopoPrintRec: LOC links are printed as leaves, PCI links recurse (except
// back up to the parent), other links print their remote node; NET nodes add
// (coll/guid/port/bw).
func (s *System) printRec(out []string, n, prev *Node, prefix string, seen map[*Node]bool) []string {
	out = append(out, prefix+s.nodeHead(n))
	if seen[n] {
		return out // a cycle would recurse forever; NCCL's trees have none
	}
	seen[n] = true
	pad := strings.Repeat(" ", len(prefix))
	for _, l := range n.Links {
		head := fmt.Sprintf("%s+ %s[%2.1f] - ", pad, l.Type, l.BW)
		r := l.Remote
		switch {
		case l.Type == LinkLOC:
			out = append(out, head+r.Label())
		case l.Type == LinkPCI && r == prev:
		case l.Type == LinkPCI:
			out = s.printRec(out, r, n, head, seen)
		case r.Type == NET:
			coll := 0
			if r.NET.Coll {
				coll = 1
			}
			out = append(out, fmt.Sprintf("%s%s (%d/%x/%d/%f)", head, r.Label(), coll, r.NET.GUID, r.NET.Port, r.NET.Speed))
		default:
			out = append(out, head+r.Label())
		}
	}
	return out
}

// nccl's printNodePaths builds each line in a 1024-byte buffer; longer lines are cut.
const ncclLineSize = 1024

// PathLines returns NCCL 2.28's path lines (printNodePaths): for each GPU then each NET,
// "TYPE/sys-local :" followed by "TYPE/sys-local (hops/bw/type) " for every destination of
// every type it stores paths to, in type order GPU, NVS, CPU, NET.
func (s *System) PathLines() []string {
	var out []string
	for _, t := range []NodeType{GPU, NET} {
		for _, n := range s.Nodes[t] {
			var b strings.Builder
			b.WriteString(n.Label() + " :")
			for dt := NodeType(0); dt < NumNodeTypes; dt++ {
				if n.paths[dt] == nil {
					continue
				}
				for i, d := range s.Nodes[dt] {
					p := n.path(dt, i)
					fmt.Fprintf(&b, "%s (%d/%.1f/%s) ", d.Label(), len(p.Links), p.BW, p.Type)
				}
			}
			line := b.String()
			if len(line) > ncclLineSize-1 {
				line = line[:ncclLineSize-1]
			}
			out = append(out, line)
		}
	}
	return out
}

// JSON types of `simccl topo --json`.
type (
	jsonSystem struct {
		Version     string     `json:"nccl_version"`
		MaxBw       float64    `json:"max_bw"`
		TotalBw     float64    `json:"total_bw"`
		Inter       bool       `json:"inter"`
		GPUs        []jsonGPU  `json:"gpus"`
		NICs        []jsonNIC  `json:"nics"`
		Links       []jsonLink `json:"links"`
		Paths       []jsonPath `json:"paths"`
		Unreachable []string   `json:"unreachable,omitempty"`
		Warnings    []string   `json:"warnings,omitempty"`
	}
	jsonGPU struct {
		Name string `json:"name"`
		ID   string `json:"id"`
		Rank int    `json:"rank"`
		Dev  int    `json:"dev"`
		SM   int    `json:"sm"`
		GDR  bool   `json:"gdr"`
	}
	jsonNIC struct {
		Name    string  `json:"name"`
		ID      string  `json:"id"`
		NetName string  `json:"net_name"`
		Dev     int     `json:"dev"`
		BW      float64 `json:"bw"`
		Port    int     `json:"port"`
		GUID    string  `json:"guid"`
		GDR     bool    `json:"gdr"`
		LocalGP string  `json:"local_gpu,omitempty"`
	}
	jsonLink struct {
		From string  `json:"from"`
		To   string  `json:"to"`
		Type string  `json:"type"`
		BW   float64 `json:"bw"`
	}
	jsonPath struct {
		From string  `json:"from"`
		To   string  `json:"to"`
		Type string  `json:"type"`
		BW   float64 `json:"bw"`
		Hops int     `json:"hops"`
	}
)

// round4 keeps JSON numbers short: NCCL's float32 bandwidths (370.8000183…) written with at
// most 4 decimals (370.8).
func round4(x float64) float64 {
	v, _ := json.Number(fmt.Sprintf("%.4f", x)).Float64()
	return v
}

// MarshalJSON writes the system as {"gpus":[…],"nics":[…],"links":[…],"paths":[…]}: "nics" are
// the NET nodes (the devices the network plugin exposes), "links" every directed link, "paths"
// every stored path from a GPU or NET to a GPU, NET or CPU.
func (s *System) MarshalJSON() ([]byte, error) {
	js := jsonSystem{Version: s.Version.String(), MaxBw: round4(s.MaxBw), TotalBw: round4(s.TotalBw), Inter: s.Inter,
		Unreachable: s.Unreachable, Warnings: s.Warnings,
		GPUs: []jsonGPU{}, NICs: []jsonNIC{}, Links: []jsonLink{}, Paths: []jsonPath{}}
	for _, g := range s.Nodes[GPU] {
		js.GPUs = append(js.GPUs, jsonGPU{Name: g.Name(), ID: g.Label(), Rank: g.GPU.Rank, Dev: g.GPU.Dev, SM: g.GPU.SM, GDR: g.GPU.GDR})
	}
	for _, n := range s.Nodes[NET] {
		j := jsonNIC{Name: n.Name(), ID: n.Label(), NetName: n.NET.Name, Dev: n.NET.Dev, BW: round4(n.NET.Speed), Port: n.NET.Port,
			GUID: fmt.Sprintf("0x%x", n.NET.GUID), GDR: n.NET.GDR}
		if gi := s.LocalGPU(n); gi >= 0 {
			j.LocalGP = s.Nodes[GPU][gi].Name()
		}
		js.NICs = append(js.NICs, j)
	}
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			for _, l := range n.Links {
				js.Links = append(js.Links, jsonLink{From: n.Name(), To: l.Remote.Name(), Type: l.Type.String(), BW: round4(l.BW)})
			}
		}
	}
	for _, t := range []NodeType{GPU, NET} {
		for _, n := range s.Nodes[t] {
			for _, dt := range []NodeType{GPU, NET, CPU} {
				for i, d := range s.Nodes[dt] {
					if n.paths[dt] == nil {
						continue
					}
					p := n.path(dt, i)
					js.Paths = append(js.Paths, jsonPath{From: n.Name(), To: d.Name(), Type: p.Type.String(), BW: round4(p.BW), Hops: p.Hops()})
				}
			}
		}
	}
	return json.Marshal(js)
}
