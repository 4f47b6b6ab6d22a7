package planner

import (
	"fmt"
	"strings"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/topo/ncclxml"
)

// MaxCPURanksPerHost bounds the ranks of one host in CPUMachine (NCCL_TOPO_MAX_NODES of GPUs).
const MaxCPURanksPerHost = 512

// CPUMachine describes the CPU engine's machine to the planner as a topology NCCL understands, so
// that the engine runs NCCL's plan for it: every host is a node whose ranks are GPUs attached
// straight to one CPU socket, with no NVLink and no PCIe switch between them, so that NCCL reaches
// a peer of the same host through host memory (PHB path: the SHM transport, as the engine's
// shared-memory and in-process transports do); hosts are joined by one NIC each (the engine's TCP
// transport, taken as a 100 Gb/s port). The GPUs are declared sm 80 so that NCCL's tuning
// constants of a current generation apply; comm's CPU engine runs Simple only (it excludes LL and
// LL128 from its calls), so the protocol tables of that generation matter little.
func CPUMachine(ranksPerHost, hosts int, s Settings) (Machine, error) {
	if ranksPerHost < 1 || ranksPerHost > MaxCPURanksPerHost {
		return Machine{}, fmt.Errorf("planner: %d ranks per host (want 1..%d)", ranksPerHost, MaxCPURanksPerHost)
	}
	if hosts < 1 || hosts > MaxNodes {
		return Machine{}, fmt.Errorf("planner: %d hosts (want 1..%d)", hosts, MaxNodes)
	}
	var b strings.Builder
	b.WriteString("<system version=\"1\">\n")
	b.WriteString("  <cpu host_hash=\"0x1\" numaid=\"0\" affinity=\"ffffffff\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"106\">\n")
	for r := 0; r < ranksPerHost; r++ {
		// One PCIe device per rank straight under the CPU (bus r+1).
		fmt.Fprintf(&b, "    <pci busid=\"0000:%02x:%02x.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x20b0\" subsystem_vendor=\"0x10de\" subsystem_device=\"0x1450\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n", 1+r/32, r%32)
		fmt.Fprintf(&b, "      <gpu dev=\"%d\" sm=\"80\" rank=\"%d\" gdr=\"0\"/>\n", r, r)
		b.WriteString("    </pci>\n")
	}
	b.WriteString("    <pci busid=\"0000:ff:00.0\" class=\"0x020000\" vendor=\"0x15b3\" device=\"0x101d\" subsystem_vendor=\"0x15b3\" subsystem_device=\"0x0016\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n")
	b.WriteString("      <nic>\n        <net name=\"eth0\" dev=\"0\" latency=\"0\" speed=\"100000\" port=\"1\" guid=\"0x1\" maxconn=\"65536\" gdr=\"0\"/>\n      </nic>\n    </pci>\n")
	b.WriteString("  </cpu>\n</system>\n")
	name := fmt.Sprintf("cpu-engine-%dx%d", hosts, ranksPerHost)
	doc, err := ncclxml.ParseBytes([]byte(b.String()), name)
	if err != nil {
		return Machine{}, err
	}
	return Machine{Name: name, Doc: doc, Nodes: hosts, Settings: s}, nil
}

// CPU makes the CPU engine's planners (comm.Config.Planners): for a communicator of hosts hosts
// with ranksPerHost ranks each, the planner of CPUMachine under NCCL's settings.
type CPU struct {
	Settings Settings
	// RankPerHost describes every rank as a host of its own, whatever the layout: the machine on
	// which NCCL enables PAT (one rank per node).
	RankPerHost bool
}

// For returns the planner of a communicator laid out as ranksPerHost ranks on each of hosts hosts.
func (c CPU) For(ranksPerHost, hosts int) (coll.Planner, error) {
	if c.RankPerHost {
		ranksPerHost, hosts = 1, ranksPerHost*hosts
	}
	m, err := CPUMachine(ranksPerHost, hosts, c.Settings)
	if err != nil {
		return nil, err
	}
	return New(m)
}
