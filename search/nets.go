package search

// getLocal is ncclTopoGetLocal: the nodes of kind rk with the best path from n (highest bandwidth,
// then lowest path type), in index order, and that path type (DIS when there is none).
func getLocal(n *node, rk NodeKind) ([]int, PathType) {
	minType := PathDIS
	var maxBw float32
	var out []int
	for i := range n.paths[rk] {
		p := &n.paths[rk][i]
		if p.bw > maxBw || (p.bw == maxBw && p.typ < minType) {
			maxBw, minType = p.bw, p.typ
			out = out[:0]
		}
		if p.bw == maxBw && p.typ == minType {
			out = append(out, i)
		}
	}
	return out, minType
}

func isPow2(v int) bool { return v > 0 && v&(v-1) == 0 }

// mirrorBits reverses the low log2(pow2) bits of val (NCCL's mirrorBits).
func mirrorBits(val, pow2 int) int {
	m := 0
	for b, mb := 1, pow2>>1; b < pow2; b, mb = b<<1, mb>>1 {
		if val&b != 0 {
			m |= mb
		}
	}
	return m
}

// localNet is ncclTopoGetLocalNet (NCCL 2.28 topo.cc): the NET index that GPU g uses on
// channel c. localNets = the GPU's best NETs; localGpus = the best GPUs of localNets[0];
// netsPerGpu = ceil(|localNets|/|localGpus|) (NCCL_NETDEVS_POLICY=AUTO); the start is the GPU's
// NVML index, bit-mirrored when |localNets| is a power of two. (2.30 takes the NVML index modulo
// |localGpus| first; 2.28 does not.)
func (t *Topology) localNet(g, c int) (int, error) {
	key := [2]int{g, c}
	if n, ok := t.localNetCache[key]; ok {
		return n, nil
	}
	n, err := t.computeLocalNet(g, c)
	if err != nil {
		return n, err
	}
	if t.localNetCache == nil {
		t.localNetCache = map[[2]int]int{}
	}
	t.localNetCache[key] = n
	return n, nil
}

func (t *Topology) computeLocalNet(g, c int) (int, error) {
	gpu := t.nodes[KindGPU][g]
	nets, _ := getLocal(gpu, KindNET)
	if len(nets) == 0 {
		return -1, errorf("no local path from GPU %d (rank %d) to any NET", g, gpu.rank)
	}
	gpus, _ := getLocal(t.nodes[KindNET][nets[0]], KindGPU)
	nGpus := max(len(gpus), 1)
	perGpu := (len(nets) + nGpus - 1) / nGpus
	net := gpu.dev
	if t.rules230 {
		net %= nGpus // 2.30.7 takes the NVML index modulo |localGpus| first
	}
	if isPow2(len(nets)) {
		net = mirrorBits(net, len(nets))
	}
	net += c % perGpu
	return nets[net%len(nets)], nil
}

// localGpuOfNet is ncclTopoGetLocalGpu: the first of the NET's best GPUs that picks this NET on
// the lowest channel; -1 when none does.
func (t *Topology) localGpuOfNet(n *node) (int, error) {
	if len(t.nodes[KindGPU]) == 0 {
		return -1, nil
	}
	gpus, _ := getLocal(n, KindGPU)
	for c := 0; c < MaxChannels; c++ {
		for _, g := range gpus {
			ni, err := t.localNet(g, c)
			if err != nil {
				return -1, nil
			}
			if ni == n.index {
				return g, nil
			}
		}
	}
	return -1, nil
}

// selectNets is ncclTopoSelectNets (2.28): first the GPUs' preferred NETs (all GPUs when g is -1),
// ordered channel-first (GPU-first on a multi-host MNNVL system, NCCL_MNNVL_SCATTER_NETS_ENABLE=1),
// then every other NET whose path type from a GPU is ≤ typeInter, by type then GPU then index.
func (t *Topology) selectNets(typeInter PathType, g int) []int {
	key := [2]int{int(typeInter), g}
	if nets, ok := t.selectNetCache[key]; ok {
		return nets
	}
	nets := t.computeSelectNets(typeInter, g)
	if t.selectNetCache == nil {
		t.selectNetCache = map[[2]int][]int{}
	}
	t.selectNetCache[key] = nets
	return nets
}

func (t *Topology) computeSelectNets(typeInter PathType, g int) []int {
	var nets []int
	add := func(n int) {
		for _, x := range nets {
			if x == n {
				return
			}
		}
		nets = append(nets, n)
	}
	ngpus := len(t.nodes[KindGPU])
	if t.nHosts > 1 {
		// GPU first: for each channel, each GPU's NET, until each GPU comes back to its first.
		ids := []int{}
		if g == -1 {
			for i := 0; i < ngpus; i++ {
				ids = append(ids, i)
			}
		} else {
			ids = append(ids, g)
		}
		first := make([]int, len(ids))
		left := len(ids)
		for c := 0; c < MaxChannels && left > 0; c++ {
			for i, gi := range ids {
				if gi == -1 {
					continue
				}
				n, err := t.localNet(gi, c)
				if err != nil {
					ids[i] = -1
					left--
					continue
				}
				if c == 0 {
					first[i] = n
				} else if first[i] == n {
					ids[i] = -1
					left--
					continue
				}
				add(n)
			}
		}
	} else {
		for gi := 0; gi < ngpus; gi++ {
			if g != -1 && g != gi {
				continue
			}
			var local []int
			for c := 0; c < MaxChannels; c++ {
				n, err := t.localNet(gi, c)
				if err != nil {
					break
				}
				if len(local) > 0 && n == local[0] {
					break
				}
				local = append(local, n)
			}
			for _, n := range local {
				add(n)
			}
		}
	}
	for typ := PathType(0); typ <= typeInter; typ++ {
		for gi := 0; gi < ngpus; gi++ {
			if g != -1 && g != gi {
				continue
			}
			ps := t.nodes[KindGPU][gi].paths[KindNET]
			for n := 0; n < len(ps) && n < MaxChannels; n++ {
				if ps[n].typ == typ {
					add(n)
				}
			}
		}
	}
	return nets
}

// LocalNet is ncclTopoGetLocalNet for callers: the NET a rank uses on a channel (its id and
// plugin device), as NCCL picks it for point-to-point and for the graphs' NIC choice.
func (t *Topology) LocalNet(rank, channel int) (id int64, dev int, err error) {
	if !t.finished {
		if err := t.finish(); err != nil {
			return 0, 0, err
		}
	}
	g := t.gpuIndexOfRank(rank)
	if g < 0 {
		return 0, 0, errorf("rank %d is not in the topology", rank)
	}
	if channel < 0 {
		return 0, 0, errorf("channel %d < 0", channel)
	}
	n, err := t.localNet(g, channel)
	if err != nil {
		return 0, 0, err
	}
	net := t.nodes[KindNET][n]
	return net.id, net.net.Dev, nil
}

// LocalGPU is ncclTopoGetLocalGpu: the rank of the GPU that uses the NET with this id on the
// lowest channel, or -1 when no GPU picks it.
func (t *Topology) LocalGPU(netID int64) (int, error) {
	if !t.finished {
		if err := t.finish(); err != nil {
			return -1, err
		}
	}
	n := t.netIndexOfID(netID)
	if n < 0 {
		return -1, errorf("no NET with id %#x", netID)
	}
	g := t.nodes[KindNET][n].localGpu
	if g < 0 {
		return -1, nil
	}
	return t.nodes[KindGPU][g].rank, nil
}
