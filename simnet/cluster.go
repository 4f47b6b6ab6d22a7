package simnet

import (
	"fmt"
)

// LinkClass is the hardware class of a route, as NCCL's latency tables index it (NCCL 2.28
// tuning.cc: NVLINK 0, PCI 1, NET 2).
type LinkClass uint8

const (
	ClassNVLink LinkClass = iota
	ClassPCI
	ClassNet
)

func (c LinkClass) String() string {
	switch c {
	case ClassNVLink:
		return "NVLINK"
	case ClassPCI:
		return "PCI"
	case ClassNet:
		return "NET"
	}
	return fmt.Sprintf("LinkClass(%d)", int(c))
}

// LinkSpec describes one directed link of a node template.
type LinkSpec struct {
	Name  string
	Class LinkClass
	GBps  float64 // capacity, GB/s (1e9 B/s) in this direction
	LatUs float64 // propagation latency, µs
}

// NodeModel is the template of one node: its directed links and, for every pair of GPUs and every
// GPU/NIC pair, the list of links a transfer crosses (the links of the graph's path). Link
// indices refer to Links. It is built from a graph.System (see FromGraph in the executor's
// caller) or by hand for tests.
type NodeModel struct {
	Name     string
	NumGPUs  int
	Links    []LinkSpec
	GPUPaths [][][]int // [a][b]: links from GPU a to GPU b (a != b)
	NICs     []NICSpec
	GPUToNIC [][][]int // [gpu][nic]: links from the GPU to the NIC
	NICToGPU [][][]int // [nic][gpu]: links from the NIC to the GPU
	NICOrder [][]int   // per GPU, its closest NICs; a ring or tree channel c uses NICOrder[g][c%len]
	// NICOwn is, per GPU, the NICs NCCL's ncclTopoGetLocalNet gives it channel after channel (one
	// period; channel c uses NICOwn[g][c%len]): its share where GPUs share their closest NICs. A
	// point-to-point connection takes it, and so does an NVLS head (NCCL's NVLS graph gives each
	// head the NET it is the local GPU of). Nil: NICOrder.
	NICOwn [][]int
	// NICViaPXN[g][k] (nil: none) says GPU g's path to NIC k is of type PXN or better (PCIe-local,
	// or through the NVLink peer that drives the NIC): a point-to-point send may then go out on
	// the NIC its peer prefers (Cluster.RouteP2P).
	NICViaPXN [][]bool
	// GPUToNVS and NVSToGPU (nil without an NVSwitch): per GPU, the link from it to the node's
	// NVSwitch and back — where NVLS schedules' switch endpoint sits (multimem loads and stores
	// cross exactly these links).
	GPUToNVS []int
	NVSToGPU []int
}

// NICSpec is one network port of a node.
type NICSpec struct {
	Name  string
	GBps  float64 // port speed per direction, GB/s
	LatUs float64
}

// Validate reports the first inconsistency of m, naming it.
func (m *NodeModel) Validate() error {
	if m.NumGPUs <= 0 {
		return fmt.Errorf("node model %q: no GPUs", m.Name)
	}
	for i, l := range m.Links {
		if !(l.GBps > 0) {
			return fmt.Errorf("node model %q: link %d (%s) has bandwidth %v GB/s (want > 0)", m.Name, i, l.Name, l.GBps)
		}
	}
	chk := func(what string, r []int) error {
		for _, l := range r {
			if l < 0 || l >= len(m.Links) {
				return fmt.Errorf("node model %q: %s uses link %d, out of range (have %d)", m.Name, what, l, len(m.Links))
			}
		}
		return nil
	}
	if len(m.GPUPaths) != m.NumGPUs {
		return fmt.Errorf("node model %q: %d GPU path rows for %d GPUs", m.Name, len(m.GPUPaths), m.NumGPUs)
	}
	for a := range m.GPUPaths {
		if len(m.GPUPaths[a]) != m.NumGPUs {
			return fmt.Errorf("node model %q: GPU %d has %d path entries for %d GPUs", m.Name, a, len(m.GPUPaths[a]), m.NumGPUs)
		}
		for b, r := range m.GPUPaths[a] {
			if a != b && len(r) == 0 {
				return fmt.Errorf("node model %q: no path from GPU %d to GPU %d", m.Name, a, b)
			}
			if err := chk(fmt.Sprintf("path GPU %d -> GPU %d", a, b), r); err != nil {
				return err
			}
		}
	}
	for i, n := range m.NICs {
		if !(n.GBps > 0) {
			return fmt.Errorf("node model %q: NIC %d (%s) has speed %v GB/s (want > 0)", m.Name, i, n.Name, n.GBps)
		}
	}
	if m.GPUToNVS != nil || m.NVSToGPU != nil {
		if len(m.GPUToNVS) != m.NumGPUs || len(m.NVSToGPU) != m.NumGPUs {
			return fmt.Errorf("node model %q: NVSwitch links for %d and %d GPUs of %d", m.Name, len(m.GPUToNVS), len(m.NVSToGPU), m.NumGPUs)
		}
		for g := 0; g < m.NumGPUs; g++ {
			if err := chk(fmt.Sprintf("GPU %d's NVSwitch links", g), []int{m.GPUToNVS[g], m.NVSToGPU[g]}); err != nil {
				return err
			}
		}
	}
	if len(m.NICs) > 0 {
		if len(m.GPUToNIC) != m.NumGPUs || len(m.NICToGPU) != len(m.NICs) || len(m.NICOrder) != m.NumGPUs {
			return fmt.Errorf("node model %q: GPU/NIC path tables do not match %d GPUs and %d NICs", m.Name, m.NumGPUs, len(m.NICs))
		}
		for g := 0; g < m.NumGPUs; g++ {
			if len(m.GPUToNIC[g]) != len(m.NICs) {
				return fmt.Errorf("node model %q: GPU %d has %d NIC paths for %d NICs", m.Name, g, len(m.GPUToNIC[g]), len(m.NICs))
			}
			if len(m.NICOrder[g]) == 0 {
				return fmt.Errorf("node model %q: GPU %d has no NIC", m.Name, g)
			}
			for _, k := range m.NICOrder[g] {
				if k < 0 || k >= len(m.NICs) {
					return fmt.Errorf("node model %q: GPU %d lists NIC %d, out of range", m.Name, g, k)
				}
			}
			for k := range m.NICs {
				if err := chk(fmt.Sprintf("path GPU %d -> NIC %d", g, k), m.GPUToNIC[g][k]); err != nil {
					return err
				}
			}
		}
		for k := range m.NICs {
			if len(m.NICToGPU[k]) != m.NumGPUs {
				return fmt.Errorf("node model %q: NIC %d has %d GPU paths for %d GPUs", m.Name, k, len(m.NICToGPU[k]), m.NumGPUs)
			}
			for g := 0; g < m.NumGPUs; g++ {
				if err := chk(fmt.Sprintf("path NIC %d -> GPU %d", k, g), m.NICToGPU[k][g]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// SwitchedNode builds a node in the HGX/DGX shape: nGPU GPUs each with one NVLink port to a
// non-blocking NVSwitch (nvlGBps per direction, the sum of the GPU's NVLinks as NCCL counts them),
// and nNIC NICs; NIC i sits behind a PCIe switch shared with GPU i*nGPU/nNIC (pciGBps per direction)
// and is the closest NIC of the GPUs of its PCIe switch. It is a hand-built model for tests and
// benchmarks; real machines come from a topology through graph.
func SwitchedNode(name string, nGPU int, nvlGBps float64, nNIC int, nicGBps, pciGBps float64) *NodeModel {
	m := &NodeModel{Name: name, NumGPUs: nGPU}
	add := func(n string, c LinkClass, bw float64) int {
		m.Links = append(m.Links, LinkSpec{Name: n, Class: c, GBps: bw})
		return len(m.Links) - 1
	}
	up := make([]int, nGPU)
	down := make([]int, nGPU)
	pciUp := make([]int, nGPU)
	pciDown := make([]int, nGPU)
	for g := 0; g < nGPU; g++ {
		up[g] = add(fmt.Sprintf("GPU%d->NVS", g), ClassNVLink, nvlGBps)
		down[g] = add(fmt.Sprintf("NVS->GPU%d", g), ClassNVLink, nvlGBps)
		pciUp[g] = add(fmt.Sprintf("GPU%d->PCISW", g), ClassPCI, pciGBps)
		pciDown[g] = add(fmt.Sprintf("PCISW->GPU%d", g), ClassPCI, pciGBps)
	}
	m.GPUToNVS, m.NVSToGPU = up, down
	m.GPUPaths = make([][][]int, nGPU)
	for a := 0; a < nGPU; a++ {
		m.GPUPaths[a] = make([][]int, nGPU)
		for b := 0; b < nGPU; b++ {
			if a != b {
				m.GPUPaths[a][b] = []int{up[a], down[b]}
			}
		}
	}
	if nNIC == 0 {
		return m
	}
	nicUp := make([]int, nNIC)
	nicDown := make([]int, nNIC)
	for k := 0; k < nNIC; k++ {
		m.NICs = append(m.NICs, NICSpec{Name: fmt.Sprintf("NIC%d", k), GBps: nicGBps})
		nicUp[k] = add(fmt.Sprintf("PCISW->NIC%d", k), ClassPCI, pciGBps)
		nicDown[k] = add(fmt.Sprintf("NIC%d->PCISW", k), ClassPCI, pciGBps)
	}
	// GPUs sharing a NIC's switch reach it directly; others cross the CPU (modelled as a
	// link-free hop through the same PCIe links, a simplification of this hand-built model).
	owner := func(g int) int { return g * nNIC / nGPU }
	m.GPUToNIC = make([][][]int, nGPU)
	m.NICOrder = make([][]int, nGPU)
	for g := 0; g < nGPU; g++ {
		m.GPUToNIC[g] = make([][]int, nNIC)
		for k := 0; k < nNIC; k++ {
			m.GPUToNIC[g][k] = []int{pciUp[g], nicUp[k]}
		}
		m.NICOrder[g] = []int{owner(g)}
	}
	m.NICToGPU = make([][][]int, nNIC)
	for k := 0; k < nNIC; k++ {
		m.NICToGPU[k] = make([][]int, nGPU)
		for g := 0; g < nGPU; g++ {
			m.NICToGPU[k][g] = []int{nicDown[k], pciDown[g]}
		}
	}
	return m
}
