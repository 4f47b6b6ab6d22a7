package simnet

import "fmt"

// CollNetRouter is a Router that also places the network's in-network reduction, CollNet (SHARP
// on InfiniBand): the links between a rank and the reduction that Schedule.Switches of kind
// coll.SwitchCollNet stands for.
type CollNetRouter interface {
	RouteCollNet(rank, ch int, up bool, buf []LinkID) ([]LinkID, error)
}

// RouteCollNet appends to buf the links between rank and the network's reduction on channel ch
// (toward the network when up): the rank's path to the NIC its channels use (the NIC order of its
// rings, as the CollNet graph of NCCL 2.28 keeps one NET device per channel) and that NIC's link
// into the fabric. The reduction happens in the switches (SHARP aggregates at every level and
// forwards one reduced stream up, so no switch-to-switch link carries more than a NIC's share of
// it); what bounds a CollNet collective here is the NICs' rate and the GPUs' paths to them, the
// same bound NCCL's cost model takes (bwInter of the CollNet graph). The switch tree's own time is
// NCCL's CollNet network latency (hwLat NET of the algorithm), charged on the way up
// (Simulate).
func (c *Cluster) RouteCollNet(rank, ch int, up bool, buf []LinkID) ([]LinkID, error) {
	G := c.Node.NumGPUs
	if rank < 0 || rank >= c.NumRanks() {
		return buf, fmt.Errorf("simnet: rank %d outside the cluster's %d ranks", rank, c.NumRanks())
	}
	if c.nics == 0 || len(c.Node.NICOrder) <= rank%G || len(c.Node.NICOrder[rank%G]) == 0 {
		return buf, fmt.Errorf("simnet: node %q has no NIC for CollNet", c.Node.Name)
	}
	n, g := rank/G, rank%G
	ord := c.Node.NICOrder[g]
	k := ord[ch%len(ord)]
	class := ClassNet
	if up {
		buf = c.appendNode(buf, n, c.Node.GPUToNIC[g][k], &class)
		return append(buf, c.nicUp[n*c.nics+k]), nil
	}
	buf = append(buf, c.nicDown[n*c.nics+k])
	return c.appendNode(buf, n, c.Node.NICToGPU[k][g], &class), nil
}
