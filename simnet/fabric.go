package simnet

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/simccl/simccl/internal/input"
)

// Fabric describes the network between nodes. See docs/cluster.md for the file format.
type Fabric struct {
	// Topology is "rail" (rail-optimized: NIC k of every node plugs into a leaf of rail k) or
	// "fattree" (all NICs of a node plug into the same leaf).
	Topology string
	// Tiers is 2 (leaf/spine) or 3 (leaf/aggregation/core, leaves grouped in pods).
	Tiers int
	// HostsPerLeaf is the number of nodes under one leaf (per rail for "rail").
	HostsPerLeaf int
	// LeavesPerPod is the number of leaves that share aggregation switches (3 tiers).
	LeavesPerPod int
	// Oversub is the leaf's downlink:uplink bandwidth ratio (1 = non-blocking); Oversub2 the same
	// for aggregation switches (3 tiers).
	Oversub, Oversub2 float64
	// NICGBps overrides the node's NIC speed (GB/s) when > 0; UplinkGBps is the speed of
	// switch-to-switch links (0: the NIC speed).
	NICGBps, UplinkGBps float64
	// NICLatUs is the latency of a NIC-to-leaf cable, SwitchLatUs of each switch-to-switch link (µs).
	NICLatUs, SwitchLatUs float64
	// Routing picks the uplink of a flow: "ecmp" (hash of the flow's endpoints and channel),
	// "rail" (deterministic destination-mod-k, which spreads a permutation evenly) or "adaptive"
	// (per-packet adaptive routing, as InfiniBand's, for which NCCL's IB transport sends by
	// default on InfiniBand ports: NCCL_IB_ADAPTIVE_ROUTING), modelled as perfect spreading: each
	// flow over all of its equal-cost links in equal shares, which for max-min sharing is one
	// link of their summed capacity (NewCluster builds a tier's uplinks that way).
	Routing string
	// ECMPSeed changes ECMP's hash (0: the default hash). Which flows collide on an uplink is a
	// draw of the hash; other seeds are other draws, the way another switch firmware or another
	// set of source ports would hash the same flows (docs/cluster.md "ECMP: one draw of the hash").
	ECMPSeed uint64
	// QPs is the queue pairs of every network connection, NCCL_IB_QPS_PER_CONNECTION (0 and 1:
	// one; not a file key: NewMachine takes it from the planner's settings). Under ECMP routing
	// each queue pair of a connection is a flow of its own to the switches, hashed onto its own
	// equal-cost links, and carries 1/QPs of the connection's bytes: NCCL 2.28 sends a connection's
	// messages on its queue pairs in turn (NCCL_IB_SPLIT_DATA_ON_QPS=0, its default) or splits
	// each message over them (=1), either way 1/QPs of a long transfer each. Rail routing picks
	// uplinks by destination, the same for every queue pair.
	QPs int
}

// MaxQPs is the most queue pairs a connection takes (NCCL 2.28's NCCL_IB_MAX_QPS).
const MaxQPs = 128

// DefaultFabric is a non-blocking two-tier rail-optimized leaf/spine with 32 nodes per leaf and
// ECMP routing. The switch latency (0.3 µs per switch-to-switch hop) is an assumption of this
// project, typical of a cut-through InfiniBand switch; it is not an NCCL constant.
func DefaultFabric() *Fabric {
	return &Fabric{Topology: "rail", Tiers: 2, HostsPerLeaf: 32, LeavesPerPod: 16, Oversub: 1, Oversub2: 1,
		SwitchLatUs: 0.3, Routing: "ecmp"}
}

// Bounds on a fabric's values, so that no value can make the simulator allocate without limit
// or overflow its picosecond clock: a leaf with a billion ports, an uplink a billion times slower
// than the NIC (a billion uplinks per leaf), a latency of 10^13 µs (past int64 picoseconds). They
// are far beyond real fabrics: a leaf switch has tens of ports, a chassis a few thousand.
const (
	MaxHostsPerLeaf  = 4096    // hosts_per_leaf
	MaxLeavesPerPod  = 4096    // leaves_per_pod
	MaxOversub       = 1024    // oversubscription, oversubscription2
	MinSpeedGBps     = 0.01    // nic_speed, uplink_speed: 80 Mb/s
	MaxSpeedGBps     = 100000  // 800 Tb/s
	MaxLatencyUs     = 1e6     // nic_latency_us, switch_latency_us: one second
	MaxLeafUplinks   = 4096    // uplinks of one leaf (ceil(downlinks × NIC speed / (oversubscription × uplink speed)))
	MaxClusterLinks  = 1 << 22 // simulator links of a cluster: its nodes' links, NIC ports and switch-to-switch links
	maxFabricKeyText = 64      // a value longer than this is quoted clipped in errors
)

// fabricKeys are the file's keys, in the order of docs/cluster.md.
const fabricKeys = "topology, tiers, hosts_per_leaf, leaves_per_pod, oversubscription, oversubscription2, nic_speed, uplink_speed, nic_latency_us, switch_latency_us, routing, ecmp_seed"

// Validate checks the fabric's fields and their bounds. Its errors name the file key of the
// field at fault.
func (f *Fabric) Validate() error {
	for _, key := range strings.Split(fabricKeys, ", ") {
		if err := f.check(key); err != nil {
			return err
		}
	}
	if f.QPs < 0 || f.QPs > MaxQPs {
		return fmt.Errorf("fabric: %d queue pairs a connection (NCCL_IB_QPS_PER_CONNECTION; want 1..%d)", f.QPs, MaxQPs)
	}
	return nil
}

// qps is the queue pairs a connection's traffic spreads over: QPs under ECMP routing, else 1.
func (f *Fabric) qps() int {
	if f.Routing != "ecmp" || f.QPs < 2 {
		return 1
	}
	return f.QPs
}

// check validates the field of one file key.
func (f *Fabric) check(key string) error {
	inRange := func(v, lo, hi float64) bool { return v >= lo && v <= hi } // false for NaN
	switch key {
	case "topology":
		if f.Topology != "rail" && f.Topology != "fattree" {
			return fmt.Errorf("fabric: topology %q (want rail or fattree)", clipValue(f.Topology))
		}
	case "tiers":
		if f.Tiers != 2 && f.Tiers != 3 {
			return fmt.Errorf("fabric: tiers %d (want 2 or 3)", f.Tiers)
		}
	case "hosts_per_leaf":
		if f.HostsPerLeaf < 1 || f.HostsPerLeaf > MaxHostsPerLeaf {
			return fmt.Errorf("fabric: hosts_per_leaf %d (want 1..%d)", f.HostsPerLeaf, MaxHostsPerLeaf)
		}
	case "leaves_per_pod":
		// Only used with 3 tiers, but never out of its range.
		if (f.Tiers == 3 && f.LeavesPerPod < 1) || f.LeavesPerPod > MaxLeavesPerPod {
			return fmt.Errorf("fabric: leaves_per_pod %d (want 1..%d)", f.LeavesPerPod, MaxLeavesPerPod)
		}
	case "oversubscription", "oversubscription2":
		v := f.Oversub
		if key == "oversubscription2" {
			v = f.Oversub2
			if f.Tiers != 3 && v == 0 {
				return nil
			}
		}
		if !inRange(v, 1, MaxOversub) {
			return fmt.Errorf("fabric: %s %v (want 1..%d)", key, v, MaxOversub)
		}
	case "nic_speed", "uplink_speed":
		v := f.NICGBps
		if key == "uplink_speed" {
			v = f.UplinkGBps
		}
		if v != 0 && !inRange(v, MinSpeedGBps, MaxSpeedGBps) { // 0: the NIC's speed
			return fmt.Errorf("fabric: %s %g GB/s (want %g..%g GB/s, i.e. %g Gb/s..%g Tb/s)", key, v, MinSpeedGBps, float64(MaxSpeedGBps), MinSpeedGBps*8, float64(MaxSpeedGBps)*8/1000)
		}
	case "nic_latency_us", "switch_latency_us":
		v := f.NICLatUs
		if key == "switch_latency_us" {
			v = f.SwitchLatUs
		}
		if !inRange(v, 0, MaxLatencyUs) {
			return fmt.Errorf("fabric: %s %g (want 0..%g µs)", key, v, MaxLatencyUs)
		}
	case "routing":
		if f.Routing != "ecmp" && f.Routing != "rail" && f.Routing != "adaptive" {
			return fmt.Errorf("fabric: routing %q (want ecmp, rail or adaptive)", clipValue(f.Routing))
		}
	}
	return nil
}

func clipValue(s string) string {
	if len(s) > maxFabricKeyText {
		return s[:maxFabricKeyText] + "…"
	}
	return s
}

// ParseFabric reads the key = value format of docs/cluster.md, starting from DefaultFabric, with
// internal/input's bounds (64 MiB, 1 MiB a line). name is used in error messages
// ("file.fabric:3: ..."); a value out of its range is reported at its line.
func ParseFabric(r io.Reader, name string) (*Fabric, error) {
	f := DefaultFabric()
	sc := input.NewScanner(r, name)
	for sc.Scan() {
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want key = value, got %q", name, sc.Line(), clipValue(s))
		}
		if err := f.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, sc.Line(), err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return f, nil
}

// Set assigns one field by its file key (also used for command-line overrides) and checks the
// value's range (the fields it depends on, such as tiers, are checked again by Validate).
func (f *Fabric) Set(key, val string) error {
	atoi := func() (int, error) {
		n, err := strconv.Atoi(val)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", key, clipValue(val))
		}
		return n, nil
	}
	num := func() (float64, error) {
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%s: %q is not a number", key, clipValue(val))
		}
		return x, nil
	}
	var err error
	key = strings.ToLower(key)
	switch key {
	case "topology":
		f.Topology = strings.ToLower(val)
	case "tiers":
		f.Tiers, err = atoi()
	case "hosts_per_leaf":
		f.HostsPerLeaf, err = atoi()
	case "leaves_per_pod":
		f.LeavesPerPod, err = atoi()
	case "oversubscription":
		f.Oversub, err = num()
	case "oversubscription2":
		f.Oversub2, err = num()
	case "nic_speed":
		f.NICGBps, err = ParseSpeed(val)
	case "uplink_speed":
		f.UplinkGBps, err = ParseSpeed(val)
	case "nic_latency_us":
		f.NICLatUs, err = num()
	case "switch_latency_us":
		f.SwitchLatUs, err = num()
	case "routing":
		f.Routing = strings.ToLower(val)
	case "ecmp_seed":
		if f.ECMPSeed, err = strconv.ParseUint(val, 10, 64); err != nil {
			return fmt.Errorf("ecmp_seed: %q is not an integer 0..%d", clipValue(val), uint64(math.MaxUint64))
		}
	default:
		return fmt.Errorf("unknown key %q (want %s)", clipValue(key), fabricKeys)
	}
	if err != nil {
		return err
	}
	if key == "leaves_per_pod" && f.Tiers != 3 && f.LeavesPerPod < 1 {
		// 0 is fine until tiers = 3 says otherwise (Validate).
		return nil
	}
	return f.check(key)
}

// ParseSpeed reads a link speed with its unit: "400Gbps", "400Gb/s" (bits) or "50GBps", "50GB/s"
// (bytes), or the same in T ("1.6Tbps"), and returns GB/s.
func ParseSpeed(s string) (float64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suf string
		mul float64
	}{{"Gb/s", 1.0 / 8}, {"Gbps", 1.0 / 8}, {"GB/s", 1}, {"GBps", 1}, {"Tb/s", 1000.0 / 8}, {"Tbps", 1000.0 / 8}, {"TB/s", 1000}, {"TBps", 1000}}
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			x, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, u.suf)), 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				break
			}
			return x * u.mul, nil
		}
	}
	return 0, fmt.Errorf("bad speed %q (want e.g. 400Gbps, 400Gb/s, 50GBps, 50GB/s or 1.6Tbps)", clipValue(s))
}

// Cluster is nodes copies of a node model joined by a fabric, instantiated as links of an Engine.
// Rank r is GPU r%G of node r/G.
type Cluster struct {
	Node     *NodeModel
	NumNodes int
	Fabric   *Fabric

	nl       int // links per node
	nodeBase LinkID
	nics     int
	nicUp    []LinkID // [node*nics+k]: NIC -> leaf
	nicDown  []LinkID // leaf -> NIC
	nLeafUp  int      // uplinks per leaf
	nAggUp   int      // uplinks per aggregation switch (3 tiers)
	leafUp   []LinkID // [leaf*nLeafUp+s]
	leafDown []LinkID
	aggUp    []LinkID // [(pod*nLeafUp+s)*nAggUp+m]
	aggDown  []LinkID
	nLeaves  int
	groups   int // leaf groups (leaves per rail)
	// swLo..swHi-1 are the switch-to-switch links (leaf uplinks and downlinks, then the
	// aggregation layer's): the links ECMP spreads flows over. mean[l-swLo] is the link that
	// stands for l's group of equal-cost links in the ECMP mean model (relax.go): one link per
	// leaf and direction with the capacity of all its uplinks, and one per pod and direction
	// with that of all its aggregation uplinks. No route crosses those.
	swLo, swHi LinkID
	mean       []LinkID
	// first ids of the NIC, leaf, aggregation and mean-model links (rotation, orbit)
	nicBase, leafBase, aggBase, meanBase LinkID
	// ownNICs: collective connections take each GPU's own NICs (withOwnNICs: NVLS heads)
	ownNICs bool
}

// maxRanks bounds the cluster size this simulator accepts.
const maxRanks = 1 << 20

// ErrTooLarge is wrapped by the error for a cluster of more than 1,048,576 ranks.
var ErrTooLarge = errors.New("more ranks than this simulator accepts")

func tooLarge(what string, nodes, gpus int) error {
	return fmt.Errorf("%s: %d nodes x %d GPUs = %d ranks, %w (%d)", what, nodes, gpus, nodes*gpus, ErrTooLarge, maxRanks)
}

// NewCluster instantiates nodes copies of node, joined by f (nil: DefaultFabric when nodes > 1),
// as links of e.
func NewCluster(e *Engine, node *NodeModel, nodes int, f *Fabric) (*Cluster, error) {
	if err := node.Validate(); err != nil {
		return nil, err
	}
	if nodes <= 0 {
		return nil, fmt.Errorf("cluster: %d nodes (want >= 1)", nodes)
	}
	if nodes*node.NumGPUs > maxRanks {
		return nil, tooLarge("cluster", nodes, node.NumGPUs)
	}
	if nodes > 1 && len(node.NICs) == 0 {
		return nil, fmt.Errorf("cluster: node model %q has no NIC, cannot join %d nodes", node.Name, nodes)
	}
	if f == nil {
		f = DefaultFabric()
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := checkClusterSize(node, nodes, f); err != nil {
		return nil, err
	}
	c := &Cluster{Node: node, NumNodes: nodes, Fabric: f, nl: len(node.Links), nics: len(node.NICs)}
	c.nodeBase = LinkID(e.NumLinks())
	// Room for the nodes' links and their NICs' at once: grown by append, a list of 128-byte
	// links is copied into every larger one (8.7 MB written for 1.7 MB of links, 128 nodes).
	e.links = slices.Grow(e.links, nodes*(len(node.Links)+2*len(node.NICs)))
	for n := 0; n < nodes; n++ {
		for _, l := range node.Links {
			e.AddLink("", GBps(l.GBps), FromMicros(l.LatUs))
		}
	}
	nl := LinkID(c.nl)
	e.SetNamer(c.nodeBase, LinkID(e.NumLinks()), func(l LinkID) string {
		i := l - c.nodeBase
		return fmt.Sprintf("n%d.%s", i/nl, node.Links[i%nl].Name)
	})
	if nodes == 1 {
		return c, nil
	}
	// NIC ports.
	nicSpeed := func(k int) float64 {
		if f.NICGBps > 0 {
			return f.NICGBps
		}
		return node.NICs[k].GBps
	}
	portGBps, fastGBps := leafPortSpeeds(node, f)
	upl := f.UplinkGBps
	if upl == 0 {
		upl = fastGBps
	}
	c.groups = (nodes + f.HostsPerLeaf - 1) / f.HostsPerLeaf
	down := f.HostsPerLeaf // ports per leaf
	if f.Topology == "rail" {
		c.nLeaves = c.nics * c.groups
	} else {
		c.nLeaves = c.groups
		down *= c.nics
	}
	c.nicUp = make([]LinkID, nodes*c.nics)
	c.nicDown = make([]LinkID, nodes*c.nics)
	nicBase := LinkID(e.NumLinks())
	c.nicBase = nicBase
	for n := 0; n < nodes; n++ {
		for k := 0; k < c.nics; k++ {
			lat := FromMicros(f.NICLatUs + node.NICs[k].LatUs)
			c.nicUp[n*c.nics+k] = e.AddLink("", GBps(nicSpeed(k)), lat)
			c.nicDown[n*c.nics+k] = e.AddLink("", GBps(nicSpeed(k)), lat)
		}
	}
	e.SetNamer(nicBase, LinkID(e.NumLinks()), func(l LinkID) string {
		i := int(l - nicBase)
		n, k := i/2/c.nics, i/2%c.nics
		if i%2 == 0 {
			return fmt.Sprintf("n%d.%s->leaf%d", n, node.NICs[k].Name, c.leafOf(n, k))
		}
		return fmt.Sprintf("leaf%d->n%d.%s", c.leafOf(n, k), n, node.NICs[k].Name)
	})
	if c.nLeaves == 1 {
		return c, nil
	}
	// Leaf uplinks: enough links of speed upl to carry the downlinks' bandwidth / oversubscription.
	c.nLeafUp = int(leafUplinks(down, portGBps, f.Oversub, upl))
	leafCap, aggCap := upl, upl // each switch-to-switch link's speed
	adaptive := f.Routing == "adaptive"
	if adaptive {
		// Adaptive routing spreads every flow over all of a tier's equal-cost links in equal
		// shares: under max-min sharing each link then carries 1/U of every flow through the
		// tier, whose rates are bound only by their sum against U links' capacity, one link of
		// U × upl (the ECMP mean model's links, exact here).
		leafCap, c.nLeafUp = upl*float64(c.nLeafUp), 1
	}
	slat := FromMicros(f.SwitchLatUs)
	c.leafUp = make([]LinkID, c.nLeaves*c.nLeafUp)
	c.leafDown = make([]LinkID, c.nLeaves*c.nLeafUp)
	leafBase := LinkID(e.NumLinks())
	c.leafBase = leafBase
	c.swLo = leafBase
	for lf := 0; lf < c.nLeaves; lf++ {
		for s := 0; s < c.nLeafUp; s++ {
			c.leafUp[lf*c.nLeafUp+s] = e.AddLink("", GBps(leafCap), slat)
			c.leafDown[lf*c.nLeafUp+s] = e.AddLink("", GBps(leafCap), slat)
		}
	}
	e.SetNamer(leafBase, LinkID(e.NumLinks()), func(l LinkID) string {
		i := int(l - leafBase)
		lf, s := i/2/c.nLeafUp, fmt.Sprint(i/2%c.nLeafUp)
		if adaptive {
			s = "*" // the tier's links as one
		}
		up := "spine"
		if c.Fabric.Tiers == 3 {
			up = fmt.Sprintf("pod%d.agg", c.podOf(lf))
		}
		if i%2 == 0 {
			return fmt.Sprintf("leaf%d->%s%s", lf, up, s)
		}
		return fmt.Sprintf("%s%s->leaf%d", up, s, lf)
	})
	if f.Tiers == 3 && c.pods() > 1 {
		c.nAggUp = int(math.Ceil(float64(f.LeavesPerPod)/f.Oversub2 - 1e-9))
		if c.nAggUp < 1 {
			c.nAggUp = 1
		}
		if adaptive {
			// Every aggregation switch's uplinks of the pod as one: U switches of M each.
			aggCap, c.nAggUp = leafCap*float64(c.nAggUp), 1
		}
		np := c.pods()
		c.aggUp = make([]LinkID, np*c.nLeafUp*c.nAggUp)
		c.aggDown = make([]LinkID, np*c.nLeafUp*c.nAggUp)
		aggBase := LinkID(e.NumLinks())
		c.aggBase = aggBase
		for p := 0; p < np; p++ {
			for s := 0; s < c.nLeafUp; s++ {
				for m := 0; m < c.nAggUp; m++ {
					i := (p*c.nLeafUp+s)*c.nAggUp + m
					c.aggUp[i] = e.AddLink("", GBps(aggCap), slat)
					c.aggDown[i] = e.AddLink("", GBps(aggCap), slat)
				}
			}
		}
		e.SetNamer(aggBase, LinkID(e.NumLinks()), func(l LinkID) string {
			i := int(l-aggBase) / 2
			m, s, p := fmt.Sprint(i%c.nAggUp), fmt.Sprint(i/c.nAggUp%c.nLeafUp), i/c.nAggUp/c.nLeafUp
			if adaptive {
				m, s = "*", "*"
			}
			if int(l-aggBase)%2 == 0 {
				return fmt.Sprintf("pod%d.agg%s->core%s.%s", p, s, s, m)
			}
			return fmt.Sprintf("core%s.%s->pod%d.agg%s", s, m, p, s)
		})
	}
	c.swHi = LinkID(e.NumLinks())
	for l := c.swLo; l < c.swHi; l++ {
		e.relaxLink(l)
	}
	if q := f.qps(); q > 1 && c.swHi > c.swLo {
		// A connection's queue pairs cross the switch-to-switch links side by side (routeNet),
		// each with 1/q of its bytes.
		e.setShare(c.swLo, c.swHi, 1/float64(q))
	}
	c.addMeanLinks(e, leafCap, aggCap, slat)
	return c, nil
}

// leafUplinks is a leaf's uplink count U = ceil(D × nic / (oversubscription × uplink)), at least
// 1, for D downlinks (docs/cluster.md, "Shape"); a float, so that checkClusterSize can bound it
// before it is an int.
func leafUplinks(down int, nic, oversub, upl float64) float64 {
	return max(1, math.Ceil(float64(down)*nic/(oversub*upl)-1e-9))
}

// leafPortSpeeds returns the speed a leaf's uplinks are sized by, per downlink (port), and the
// fastest NIC's speed (the uplinks' default speed), in GB/s, for nodes whose NICs may differ
// (nic_speed, where set, is every NIC's). The uplinks carry the downlinks' bandwidth divided by
// the oversubscription: under rail routing a leaf serves one NIC index, and every leaf is sized
// for the fastest NIC's (the others' are then under-subscribed); under fattree a leaf serves all
// of a node's NICs, whose mean speed is its port speed. An uplink is as fast as the fastest NIC,
// so that no NIC's flow through the spine is slower than its port. Where a node's NICs have one
// speed both are that speed. (Until stop 38 both were NIC 0's speed: on
// b200-8gpu-gvisor-sandbox-flat.xml, NIC 0 at 100 Gb/s and others at 400, the 400 Gb/s rails'
// leaves were 4:1 oversubscribed and their flows through the spine capped at 100 Gb/s.)
func leafPortSpeeds(node *NodeModel, f *Fabric) (port, fastest float64) {
	if f.NICGBps > 0 {
		return f.NICGBps, f.NICGBps
	}
	sum := 0.0
	for _, n := range node.NICs {
		fastest = max(fastest, n.GBps)
		sum += n.GBps
	}
	if f.Topology == "rail" {
		return fastest, fastest
	}
	return sum / float64(len(node.NICs)), fastest
}

// checkClusterSize bounds what NewCluster would allocate before it allocates anything: a leaf's
// uplinks (MaxLeafUplinks) and the simulator links of the whole cluster (MaxClusterLinks), so
// that speeds and counts within their own ranges cannot multiply into billions of links. It
// computes the counts as NewCluster does, in floats (no overflow).
func checkClusterSize(node *NodeModel, nodes int, f *Fabric) error {
	links := float64(nodes) * float64(len(node.Links))
	if nodes > 1 {
		nics := float64(len(node.NICs))
		nic, fast := leafPortSpeeds(node, f)
		upl := f.UplinkGBps
		if upl == 0 {
			upl = fast
		}
		groups := math.Ceil(float64(nodes) / float64(f.HostsPerLeaf))
		down, leaves := f.HostsPerLeaf, groups*nics
		if f.Topology != "rail" {
			down, leaves = f.HostsPerLeaf*len(node.NICs), groups
		}
		links += 2 * float64(nodes) * nics
		if leaves > 1 {
			u := leafUplinks(down, nic, f.Oversub, upl)
			if !(u <= MaxLeafUplinks) {
				return fmt.Errorf("fabric: a leaf would need %.3g uplinks of %g GB/s for its %d downlinks of %g GB/s at oversubscription %g (at most %d): raise uplink_speed or oversubscription",
					u, upl, down, nic, f.Oversub, MaxLeafUplinks)
			}
			links += 2 * leaves * u
			if pods := math.Ceil(leaves / float64(f.LeavesPerPod)); f.Tiers == 3 && pods > 1 {
				links += 2 * pods * u * math.Max(1, math.Ceil(float64(f.LeavesPerPod)/f.Oversub2-1e-9))
			}
		}
	}
	if !(links <= MaxClusterLinks) {
		return fmt.Errorf("cluster: %d nodes of %q with this fabric make %.3g simulator links, more than the %d this simulator accepts", nodes, node.Name, links, MaxClusterLinks)
	}
	return nil
}

// addMeanLinks adds the links of the ECMP mean model (Cluster.mean): each tier's links of a leaf
// (of a pod) as one, of their summed capacity (leafCap and aggCap: one link's speed).
func (c *Cluster) addMeanLinks(e *Engine, leafCap, aggCap float64, slat Time) {
	c.mean = make([]LinkID, c.swHi-c.swLo)
	base := LinkID(e.NumLinks())
	c.meanBase = base
	leafUp := make([]LinkID, c.nLeaves)
	leafDown := make([]LinkID, c.nLeaves)
	for lf := 0; lf < c.nLeaves; lf++ {
		leafUp[lf] = e.AddLink("", GBps(leafCap*float64(c.nLeafUp)), slat)
		leafDown[lf] = e.AddLink("", GBps(leafCap*float64(c.nLeafUp)), slat)
		for s := 0; s < c.nLeafUp; s++ {
			c.mean[c.leafUp[lf*c.nLeafUp+s]-c.swLo] = leafUp[lf]
			c.mean[c.leafDown[lf*c.nLeafUp+s]-c.swLo] = leafDown[lf]
		}
	}
	np := 0
	if c.nAggUp > 0 {
		np = c.pods()
		for p := 0; p < np; p++ {
			up := e.AddLink("", GBps(aggCap*float64(c.nLeafUp*c.nAggUp)), slat)
			down := e.AddLink("", GBps(aggCap*float64(c.nLeafUp*c.nAggUp)), slat)
			for i := p * c.nLeafUp * c.nAggUp; i < (p+1)*c.nLeafUp*c.nAggUp; i++ {
				c.mean[c.aggUp[i]-c.swLo] = up
				c.mean[c.aggDown[i]-c.swLo] = down
			}
		}
	}
	// Named without "->": no route crosses them (they stand for groups of links in the ECMP
	// mean model).
	e.SetNamer(base, LinkID(e.NumLinks()), func(l LinkID) string {
		dir := [2]string{"up", "down"}
		i := int(l - base)
		if i < 2*c.nLeaves {
			return fmt.Sprintf("ecmp-mean:leaf%d:%s", i/2, dir[i%2])
		}
		i -= 2 * c.nLeaves
		return fmt.Sprintf("ecmp-mean:pod%d:%s", i/2, dir[i%2])
	})
}

// standIn reports whether l is a switch-to-switch link of the fabric, which a symmetric replay may
// leave out and check instead, and returns the link that stands for its group of equal-cost links
// (relax.go).
func (c *Cluster) standIn(l LinkID) (LinkID, bool) {
	if l < c.swLo || l >= c.swHi {
		return -1, false
	}
	return c.mean[l-c.swLo], true
}

// standInsImplied reports whether every stand-in of c's relaxed links is implied whatever the
// routes, by the rule implied applies first (relax.go): a leaf's uplinks carry only what the NIC
// ports into that leaf send, and a pod's aggregation uplinks only what the NIC ports under its
// leaves send (the nearest link of a route before them that is not relaxed is the sending NIC's
// port); its downlinks only what goes out of the NIC ports below them (the nearest after). Where
// those ports' capacities add up to no more than the stand-in's, for every stand-in, a walk of the
// routes would drop them all: the fabric is non-blocking on every tier. Otherwise only a walk
// tells (an oversubscribed tier may still carry little enough).
func (c *Cluster) standInsImplied(e *Engine) bool {
	if c.swHi <= c.swLo {
		return true
	}
	up, down := make([]float64, c.nLeaves), make([]float64, c.nLeaves)
	for n := 0; n < c.NumNodes; n++ {
		for k := 0; k < c.nics; k++ {
			lf := c.leafOf(n, k)
			up[lf] += float64(e.LinkCap(c.nicUp[n*c.nics+k]))
			down[lf] += float64(e.LinkCap(c.nicDown[n*c.nics+k]))
		}
	}
	fits := func(sum float64, sw LinkID) bool {
		return sum <= float64(e.LinkCap(c.mean[sw-c.swLo]))*(1+relaxTolerance)
	}
	for lf := 0; lf < c.nLeaves; lf++ {
		if c.nLeafUp > 0 && (!fits(up[lf], c.leafUp[lf*c.nLeafUp]) || !fits(down[lf], c.leafDown[lf*c.nLeafUp])) {
			return false
		}
	}
	if c.nAggUp > 0 {
		for p := 0; p < c.pods(); p++ {
			var pu, pd float64
			for lf := p * c.Fabric.LeavesPerPod; lf < min((p+1)*c.Fabric.LeavesPerPod, c.nLeaves); lf++ {
				pu, pd = pu+up[lf], pd+down[lf]
			}
			i := p * c.nLeafUp * c.nAggUp
			if !fits(pu, c.aggUp[i]) || !fits(pd, c.aggDown[i]) {
				return false
			}
		}
	}
	return true
}

// isSwitch reports whether l is a switch-to-switch link of the fabric, which a connection's queue
// pairs cross side by side (routeNet: consecutive in its route, one tier at a time).
func (c *Cluster) isSwitch(l LinkID) bool { return l >= c.swLo && l < c.swHi }

// ecmp reports whether the fabric hashes flows over equal-cost links (the ECMP mean model
// applies; relax.go).
func (c *Cluster) ecmp() bool { return c.Fabric.Routing == "ecmp" }

// railRouted: rail routing, every flow on the fixed uplink of its destination node.
func (c *Cluster) railRouted() bool { return c.Fabric.Routing == "rail" }

// Rotations. Rotating the nodes by R (node n becomes node n+R mod NumNodes) maps every route
// onto a route of the rotated ranks, link by link, except for the links the fabric picks by hash:
// a node's own links and NIC ports keep their places, a leaf's links move to the leaf R nodes
// further where R is a multiple of the nodes under a leaf, a pod's where it is a multiple of the
// nodes under a pod, and destination-mod-k routing keeps its uplink index where R is a multiple
// of the uplinks (and of uplinks × aggregation uplinks). Executors that replay one rank per orbit
// of the rotation (SimulateP2P) use it.

// linkKind classes of rotation.
const (
	kindNode = iota // a node's own link or NIC port
	kindLeafMean
	kindPodMean
	kindLeaf // a real leaf uplink or downlink
	kindAgg  // a real aggregation uplink or downlink
)

// kindOf is the rotation class of link l.
func (c *Cluster) kindOf(l LinkID) int {
	switch {
	case c.swLo == c.swHi || l < c.swLo:
		return kindNode
	case l < c.swHi:
		if c.nAggUp > 0 && l >= c.aggBase {
			return kindAgg
		}
		return kindLeaf
	case int(l-c.meanBase) < 2*c.nLeaves:
		return kindLeafMean
	}
	return kindPodMean
}

// rotation returns the smallest rotation R (a divisor of NumNodes) under which the routes, with
// only the links for which use is true, map onto each other (NumNodes where none does).
func (c *Cluster) rotation(kinds [5]bool) int {
	N := c.NumNodes
	if N == 1 {
		return 1
	}
	H := c.Fabric.HostsPerLeaf
	req := 1
	lcm := func(a, b int) int {
		g, x := a, b
		for x != 0 {
			g, x = x, g%x
		}
		return a / g * b
	}
	podNodes := H * c.Fabric.LeavesPerPod
	podOK := c.nAggUp == 0 || c.groups%c.Fabric.LeavesPerPod == 0
	if kinds[kindLeafMean] {
		req = lcm(req, H)
	}
	if kinds[kindPodMean] {
		if !podOK {
			return N
		}
		req = lcm(req, podNodes)
	}
	if kinds[kindLeaf] || kinds[kindAgg] {
		if c.Fabric.Routing == "ecmp" {
			return N
		}
		req = lcm(req, lcm(H, c.nLeafUp))
		if c.nAggUp > 0 {
			if !podOK {
				return N
			}
			req = lcm(req, lcm(podNodes, c.nLeafUp*c.nAggUp))
		}
	}
	for R := req; R < N; R += req {
		if N%R == 0 {
			return R
		}
	}
	return N
}

// symmetry returns the rotation R under which the routes map onto each other, counting the
// links of kinds only, and whether R's orbits are replayed as one although the relaxed links'
// latencies (of latKinds) tell their members apart (latency-mean): with exact, R is instead the
// rotation under which those latencies map too, and latMean is false.
func (c *Cluster) symmetry(kinds, latKinds [5]bool, exact bool) (R int, latMean bool) {
	for k, v := range kinds {
		latKinds[k] = latKinds[k] || v
	}
	R, Rl := c.rotation(kinds), c.rotation(latKinds)
	switch {
	case Rl == R:
		return R, false
	case exact:
		return Rl, false
	}
	return R, true
}

// orbit returns the representative of link l's orbit under rotation by R (a value rotation
// returned for l's kind): the link that l's node, leaf or pod at the smallest position holds.
func (c *Cluster) orbit(l LinkID, R int) LinkID {
	if R >= c.NumNodes {
		return l
	}
	kind := c.kindOf(l)
	if kind == kindNode {
		if c.nicBase == 0 || l < c.nicBase {
			i := int(l - c.nodeBase)
			n, j := i/c.nl, i%c.nl
			return c.nodeBase + LinkID((n%R)*c.nl+j)
		}
		i := int(l - c.nicBase)
		n, rest := i/(2*c.nics), i%(2*c.nics)
		return c.nicBase + LinkID((n%R)*2*c.nics+rest)
	}
	// Leaves and pods: the leaf group index moves by R / HostsPerLeaf.
	H := c.Fabric.HostsPerLeaf
	gs := max(R/H, 1) // leaf groups per rotation
	leafRep := func(lf int) int {
		k, g := lf/c.groups, lf%c.groups
		if c.Fabric.Topology != "rail" {
			k, g = 0, lf
		}
		return k*c.groups + g%gs
	}
	podRep := func(p int) int {
		lp := c.Fabric.LeavesPerPod
		pg := c.groups / lp // pods per rail
		if c.Fabric.Topology != "rail" {
			return p % max(gs/lp, 1)
		}
		k, q := p/pg, p%pg
		return k*pg + q%max(gs/lp, 1)
	}
	switch kind {
	case kindLeafMean:
		i := int(l - c.meanBase)
		return c.meanBase + LinkID(2*leafRep(i/2)+i%2)
	case kindPodMean:
		i := int(l-c.meanBase) - 2*c.nLeaves
		return c.meanBase + LinkID(2*c.nLeaves+2*podRep(i/2)+i%2)
	case kindAgg:
		i := int(l - c.aggBase)
		dir, j := i%2, i/2
		m, s, p := j%c.nAggUp, j/c.nAggUp%c.nLeafUp, j/c.nAggUp/c.nLeafUp
		return c.aggBase + LinkID(2*((podRep(p)*c.nLeafUp+s)*c.nAggUp+m)+dir)
	}
	i := int(l - c.leafBase)
	dir, j := i%2, i/2
	lf, s := j/c.nLeafUp, j%c.nLeafUp
	return c.leafBase + LinkID(2*(leafRep(lf)*c.nLeafUp+s)+dir)
}

// leafOf is the leaf that NIC k of node n plugs into.
func (c *Cluster) leafOf(n, k int) int {
	g := n / c.Fabric.HostsPerLeaf
	if c.Fabric.Topology == "rail" {
		return k*c.groups + g
	}
	return g
}

// podOf is the pod of a leaf: leaves of one rail are numbered consecutively, so a pod holds
// LeavesPerPod consecutive leaf groups of one rail (rail) or LeavesPerPod leaves (fattree).
func (c *Cluster) podOf(leaf int) int { return leaf / c.Fabric.LeavesPerPod }

func (c *Cluster) pods() int { return (c.nLeaves + c.Fabric.LeavesPerPod - 1) / c.Fabric.LeavesPerPod }

// NumRanks is the number of GPUs.
func (c *Cluster) NumRanks() int { return c.NumNodes * c.Node.NumGPUs }

func (c *Cluster) nodeLink(n, l int) LinkID { return c.nodeBase + LinkID(n*c.nl+l) }

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RouteSwitch appends to buf the link between rank and the NVSwitch of node (toward the switch
// when up), the route of an NVLS schedule's message to or from its switch endpoint. The rank must
// be on that node, and the node must have an NVSwitch.
func (c *Cluster) RouteSwitch(rank, node int, up bool, buf []LinkID) ([]LinkID, error) {
	G := c.Node.NumGPUs
	if rank < 0 || rank >= c.NumRanks() || rank/G != node {
		return buf, fmt.Errorf("simnet: rank %d is not on node %d, whose NVSwitch the schedule routes it to", rank, node)
	}
	if c.Node.GPUToNVS == nil {
		return buf, fmt.Errorf("simnet: node %q has no NVSwitch (NVLS needs one)", c.Node.Name)
	}
	l := c.Node.NVSToGPU[rank%G]
	if up {
		l = c.Node.GPUToNVS[rank%G]
	}
	return append(buf, c.nodeLink(node, l)), nil
}

// HasNVSwitch reports whether the cluster's nodes have an NVSwitch every GPU reaches directly.
func (c *Cluster) HasNVSwitch() bool { return c.Node.GPUToNVS != nil }

// Route appends to buf the links a transfer from rank src to rank dst on channel ch crosses, and
// returns them with the route's hardware class (NET if it leaves the node, else PCI if it crosses
// a PCI link, else NVLINK).
func (c *Cluster) Route(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	G := c.Node.NumGPUs
	sn, sg := src/G, src%G
	dn, dg := dst/G, dst%G
	if sn == dn {
		class := ClassNVLink
		if sg != dg {
			buf = c.appendNode(buf, sn, c.Node.GPUPaths[sg][dg], &class)
		}
		return buf, class
	}
	// Both ends use the NIC local to the receiving GPU on the channel (one rail): NCCL's search
	// graph gives channel c a NET in, local to the first GPU of the node's chain, and the
	// previous node's chain leaves on the same NET index — crossNic 0 (DGX A100, B200) ends the
	// chain on its start NET, crossNic 2 (DGX H100) alternates the chains of odd nodes so that it
	// does (coll.BuildRings, NCCL's ncclTopoPostset). Until 2026-11-30 both ends took the
	// sender's NIC, which on a DGX H100 ring is not the receiving GPU's: every ring message into
	// a node crossed PCIe, the CPU and PCIe again to its GPU.
	ord := c.Node.NICOrder
	if c.ownNICs {
		ord = c.nicOwn()
	}
	k := ord[dg][ch%len(ord[dg])]
	return c.routeNet(src, dst, ch, k, k, buf), ClassNet
}

// nicOwn is NodeModel.NICOwn, or NICOrder where the node model has none.
func (c *Cluster) nicOwn() [][]int {
	if c.Node.NICOwn != nil {
		return c.Node.NICOwn
	}
	return c.Node.NICOrder
}

// withOwnNICs is c routing collective connections over each GPU's own NICs (NodeModel.NICOwn), as
// NCCL's NVLS heads use them: the same links and state, shared.
func (c *Cluster) withOwnNICs() *Cluster {
	d := *c
	d.ownNICs = true
	return &d
}

// RouteP2P is Route for a point-to-point message (NCCL's send/recv connections, connIndex 1).
// In a node it is Route's path. Across nodes each end takes its own NIC, not a ring's NET
// device: the receiver its local NIC for the channel, the sender the NIC that the GPU of its
// node with the receiver's local index would use on the channel (the receiver's rail) when its
// path to that NIC is of type PXN or better — through that GPU over NVLink where the NIC is not
// on its own PCIe switch — and else its own local NIC (NCCL 2.28's send/recv NIC choice with
// NCCL_P2P_PXN_LEVEL at its default 1: the destination's preferred NIC when reachable through
// PXN; NCCL_PXN_DISABLE=1 removes the PXN paths, see graph).
func (c *Cluster) RouteP2P(src, dst, ch int, buf []LinkID) ([]LinkID, LinkClass) {
	G := c.Node.NumGPUs
	sg, dg := src%G, dst%G
	if src/G == dst/G {
		return c.Route(src, dst, ch, buf)
	}
	own := c.nicOwn() // NCCL's send/recv NET: ncclTopoGetLocalNet of the channel
	kr, ks := own[dg][ch%len(own[dg])], own[sg][ch%len(own[sg])]
	if pxn := c.Node.NICViaPXN; pxn != nil && pxn[sg][kr] {
		ks = kr
	}
	return c.routeNet(src, dst, ch, ks, kr, buf), ClassNet
}

// appendNode appends node n's links ls to buf, raising *class to PCI where one is a PCI link.
func (c *Cluster) appendNode(buf []LinkID, n int, ls []int, class *LinkClass) []LinkID {
	for _, l := range ls {
		buf = append(buf, c.nodeLink(n, l))
		if c.Node.Links[l].Class == ClassPCI && *class == ClassNVLink {
			*class = ClassPCI
		}
	}
	return buf
}

// qpPick is the leaf uplink s (and, with 3 tiers, the aggregation uplink m) that queue pair i of a
// connection to node dn takes: under ECMP by the connection's hash h (queue pair 0) or a hash of
// it and i, else by destination (destination-mod-k, the same for every queue pair).
func (c *Cluster) qpPick(h uint64, i, dn int) (s, m int) {
	if c.Fabric.Routing != "ecmp" {
		s = dn % c.nLeafUp
		if c.nAggUp > 0 {
			m = (dn / c.nLeafUp) % c.nAggUp
		}
		return s, m
	}
	if i > 0 {
		h = mix64(h ^ uint64(i)*0xd6e8feb86659fd93)
	}
	s = int(h % uint64(c.nLeafUp))
	if c.nAggUp > 0 {
		m = int((h >> 32) % uint64(c.nAggUp))
	}
	return s, m
}

// routeNet appends the route from rank src out of NIC k of its node, across the fabric, into
// NIC k2 of rank dst's node and on to dst.
func (c *Cluster) routeNet(src, dst, ch, k, k2 int, buf []LinkID) []LinkID {
	G := c.Node.NumGPUs
	sn, sg := src/G, src%G
	dn, dg := dst/G, dst%G
	class := ClassNet
	buf = c.appendNode(buf, sn, c.Node.GPUToNIC[sg][k], &class)
	buf = append(buf, c.nicUp[sn*c.nics+k])
	l1, l2 := c.leafOf(sn, k), c.leafOf(dn, k2)
	if l1 != l2 {
		// Each queue pair of the connection (Fabric.QPs, under ECMP) takes the uplinks its own
		// hash picks (qpPick): the first pair the connection's hash, as with one. A tier's links
		// come together, the pairs in order.
		q := c.Fabric.qps()
		var h uint64
		if c.Fabric.Routing == "ecmp" {
			h = mix64(uint64(src)<<32 ^ uint64(dst)<<8 ^ uint64(ch) ^ c.Fabric.ECMPSeed*0x9e3779b97f4a7c15)
		}
		for i := range q {
			s, _ := c.qpPick(h, i, dn)
			buf = append(buf, c.leafUp[l1*c.nLeafUp+s])
		}
		if c.nAggUp > 0 {
			p1, p2 := c.podOf(l1), c.podOf(l2)
			if p1 != p2 {
				for i := range q {
					s, m := c.qpPick(h, i, dn)
					buf = append(buf, c.aggUp[(p1*c.nLeafUp+s)*c.nAggUp+m])
				}
				for i := range q {
					s, m := c.qpPick(h, i, dn)
					buf = append(buf, c.aggDown[(p2*c.nLeafUp+s)*c.nAggUp+m])
				}
			}
		}
		for i := range q {
			s, _ := c.qpPick(h, i, dn)
			buf = append(buf, c.leafDown[l2*c.nLeafUp+s])
		}
	}
	buf = append(buf, c.nicDown[dn*c.nics+k2])
	return c.appendNode(buf, dn, c.Node.NICToGPU[k2][dg], &class)
}
