package tuning

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/simccl/simccl/coll"
)

// Config is the environment NCCL's tuner reads. The zero value is NCCL's default for
// DefaultRelease; ConfigFromEnv fills it from NCCL_* variables.
type Config struct {
	// Version is the NCCL release whose constants apply ("2.28" default; "2.26", "2.29", "2.30").
	Version string
	// Algo and Proto are NCCL_ALGO and NCCL_PROTO in NCCL's syntax (NCCL 2.24+ parseList):
	// "ring,tree", "^nvls", "allreduce:tree;allgather:^pat" (case-insensitive).
	Algo, Proto string
	// MinNChannels/MaxNChannels: NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (0 = unset).
	MinNChannels, MaxNChannels int
	// MinCTAs/MaxCTAs: NCCL_MIN_CTAS / NCCL_MAX_CTAS, the communicator config's minCTAs and
	// maxCTAs (NCCL 2.17+, init.cc envConfigOverride; 0 = unset: 1 and MAXCHANNELS). They bound
	// the channel count with NCCL_MIN/MAX_NCHANNELS (connect.cc ncclTopoPostset) and also
	// comm->nvlsChannels (transport/nvls.cc), which NCCL_MIN/MAX_NCHANNELS do not.
	MinCTAs, MaxCTAs int
	// MinP2PNChannels/MaxP2PNChannels: NCCL_MIN_P2P_NCHANNELS / NCCL_MAX_P2P_NCHANNELS (0 = unset:
	// 1 and MAXCHANNELS). NCCL 2.28 paths.cc clamps the communicator's channel count to them
	// before rounding it up to a power of two for point-to-point (p2pnChannels); the channels
	// per peer never exceed it.
	MinP2PNChannels, MaxP2PNChannels int
	// NChannelsPerNetPeer is NCCL_NCHANNELS_PER_NET_PEER, the channels per network peer (0 = unset:
	// NCCL's rule, Table.P2PChannels). P2PPerChannelNetBw is NCCL_P2P_PER_CHANNEL_NET_BW in GB/s,
	// the bandwidth 2.29+ gives one such channel (0 = unset: 14).
	NChannelsPerNetPeer, P2PPerChannelNetBw int
	// NThreads and LL128NThreads: NCCL_NTHREADS / NCCL_LL128_NTHREADS (0 = unset).
	NThreads, LL128NThreads int
	// BuffSize, LLBuffSize, LL128BuffSize: NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE in
	// bytes (0 = default, NCCL 2.28 device.h).
	BuffSize, LLBuffSize, LL128BuffSize int64
	// NetOverheadNs is NCCL_NET_OVERHEAD in ns (nil = unset: 1 µs Intel/other, 2 µs AMD, NCCL 2.28
	// tuning.cc).
	NetOverheadNs *float64
	// PatEnable is NCCL_PAT_ENABLE: nil = auto (cc ≥ 60, one GPU per node, host networking).
	PatEnable *bool
	// LL128C2C is NCCL_LL128_C2C (nil = default 1): on cc ≥ 90 the LL128 auto rule accepts inter
	// paths up to PXN instead of PXB (NCCL 2.28 tuning.cc).
	LL128C2C *bool
	// ThreadThresholds is NCCL_THREAD_THRESHOLDS: "treeLL treeLL128 treeSimple ringLL ringLL128
	// ringSimple" bytes per thread; negative entries keep the default.
	ThreadThresholds string
	// P2PLLThreshold: NCCL_P2P_LL_THRESHOLD (0 = 16384). P2P chunk sizes: NCCL_P2P_NET_CHUNKSIZE,
	// NCCL_P2P_NVL_CHUNKSIZE, NCCL_P2P_PCI_CHUNKSIZE (0 = defaults, NCCL 2.28 init.cc).
	P2PLLThreshold                                    int64
	P2PNetChunkSize, P2PNVLChunkSize, P2PPCIChunkSize int64
	AllocP2PNetLLBuffers                              bool
	NVLSChunkSize                                     int64 // NCCL_NVLS_CHUNKSIZE (0 = 128 KiB)
	// Overrides are tuner-file rules (see ParseOverrides), applied per call after the model.
	Overrides []Override
}

// ConfigFromEnv reads NCCL's variables through getenv (os.Getenv in a program). Bad values are
// errors naming the variable.
func ConfigFromEnv(getenv func(string) string) (*Config, error) {
	c := &Config{}
	c.Algo = getenv("NCCL_ALGO")
	c.Proto = getenv("NCCL_PROTO")
	ints := []struct {
		name  string
		alias string
		dst   *int
		lo    int
		hi    int
	}{
		{"NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS", &c.MinNChannels, 1, MaxChannels},
		{"NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS", &c.MaxNChannels, 1, MaxChannels},
		{"NCCL_MIN_CTAS", "", &c.MinCTAs, 1, 1 << 16},
		{"NCCL_MAX_CTAS", "", &c.MaxCTAs, 1, 1 << 16},
		{"NCCL_MIN_P2P_NCHANNELS", "", &c.MinP2PNChannels, 1, MaxChannels},
		{"NCCL_MAX_P2P_NCHANNELS", "", &c.MaxP2PNChannels, 1, MaxChannels},
		{"NCCL_NCHANNELS_PER_NET_PEER", "", &c.NChannelsPerNetPeer, 1, MaxChannels},
		{"NCCL_P2P_PER_CHANNEL_NET_BW", "", &c.P2PPerChannelNetBw, 1, 1 << 20},
		{"NCCL_NTHREADS", "", &c.NThreads, 1, 1 << 16},
		{"NCCL_LL128_NTHREADS", "", &c.LL128NThreads, 1, 1 << 16},
	}
	for _, v := range ints {
		s := getenv(v.name)
		name := v.name
		if s == "" && v.alias != "" {
			s, name = getenv(v.alias), v.alias
		}
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < v.lo || n > v.hi {
			return nil, fmt.Errorf("tuning: %s=%q: want an integer in %d..%d", name, s, v.lo, v.hi)
		}
		*v.dst = n
	}
	sizes := []struct {
		name string
		dst  *int64
		min  int64 // the least the simulator's schedules take (coll.MinBuffSize), else 1
	}{
		{"NCCL_BUFFSIZE", &c.BuffSize, coll.MinBuffSize(coll.Simple)}, {"NCCL_LL_BUFFSIZE", &c.LLBuffSize, coll.MinBuffSize(coll.LL)},
		{"NCCL_LL128_BUFFSIZE", &c.LL128BuffSize, coll.MinBuffSize(coll.LL128)},
		{"NCCL_P2P_LL_THRESHOLD", &c.P2PLLThreshold, 1}, {"NCCL_P2P_NET_CHUNKSIZE", &c.P2PNetChunkSize, 1},
		{"NCCL_P2P_NVL_CHUNKSIZE", &c.P2PNVLChunkSize, 1}, {"NCCL_P2P_PCI_CHUNKSIZE", &c.P2PPCIChunkSize, 1},
		{"NCCL_NVLS_CHUNKSIZE", &c.NVLSChunkSize, 1},
	}
	for _, v := range sizes {
		s := strings.TrimSpace(getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil || n <= 0 || n > 1<<40 {
			return nil, fmt.Errorf("tuning: %s=%q: want a positive number of bytes", v.name, s)
		}
		if n < v.min {
			return nil, fmt.Errorf("tuning: %s=%q: want at least %d bytes (one protocol grain for each of the %d NCCL_STEPS slots)", v.name, s, v.min, coll.NCCLSteps)
		}
		*v.dst = n
	}
	// NCCL caps both at MAXCHANNELS and lowers minCTAs to maxCTAs (init.cc envConfigOverride).
	c.MinCTAs, c.MaxCTAs = min(c.MinCTAs, MaxChannels), min(c.MaxCTAs, MaxChannels)
	if c.MaxCTAs > 0 && c.MinCTAs > c.MaxCTAs {
		c.MinCTAs = c.MaxCTAs
	}
	if s := strings.TrimSpace(getenv("NCCL_NET_OVERHEAD")); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0 && f <= 1e9) {
			// Bounded (one second) so that the cost model's times stay finite and meaningful.
			return nil, fmt.Errorf("tuning: NCCL_NET_OVERHEAD=%q: want a number of ns in 0..1e9", s)
		}
		c.NetOverheadNs = &f
	}
	bools := []struct {
		name string
		dst  **bool
	}{{"NCCL_PAT_ENABLE", &c.PatEnable}, {"NCCL_LL128_C2C", &c.LL128C2C}}
	for _, v := range bools {
		s := strings.TrimSpace(getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			want := "an integer (0: off, other: on)"
			if v.name == "NCCL_PAT_ENABLE" {
				want = "an integer (0: off, 2: auto, other: on)"
			}
			return nil, fmt.Errorf("tuning: %s=%q: want %s", v.name, s, want)
		}
		if v.name == "NCCL_PAT_ENABLE" && n == 2 {
			continue // auto
		}
		b := n != 0
		*v.dst = &b
	}
	if s := strings.TrimSpace(getenv("NCCL_ALLOC_P2P_NET_LL_BUFFERS")); s != "" {
		c.AllocP2PNetLLBuffers = s != "0"
	}
	c.ThreadThresholds = getenv("NCCL_THREAD_THRESHOLDS")
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}

// Check returns an error for a setting NCCL would reject: an unknown release, a bad
// NCCL_ALGO, NCCL_PROTO or NCCL_THREAD_THRESHOLDS.
func (c *Config) Check() error {
	if _, err := c.threadThresholds(2); err != nil {
		return err
	}
	if _, err := ConstantsFor(c.Version); err != nil {
		return err
	}
	if _, err := parseEnableList("NCCL_ALGO", c.Algo, algoNames[:]); err != nil {
		return err
	}
	if _, err := parseEnableList("NCCL_PROTO", c.Proto, protoNames[:]); err != nil {
		return err
	}
	return nil
}

func (c *Config) buffSize(p coll.Proto) int64 {
	switch p {
	case coll.LL:
		if c.LLBuffSize > 0 {
			return c.LLBuffSize
		}
		return defaultLLBuffSize
	case coll.LL128:
		if c.LL128BuffSize > 0 {
			return c.LL128BuffSize
		}
		return defaultLL128BuffSize
	}
	if c.BuffSize > 0 {
		return c.BuffSize
	}
	return defaultSimpleBuffSize
}

// threadThresholds returns NCCL's threadThresholds[algo][proto] (NCCL 2.28 ncclTopoTuneModel) with
// NCCL_THREAD_THRESHOLDS applied to the Tree and Ring rows.
func (c *Config) threadThresholds(nRanks int) ([coll.NumAlgos][coll.NumProtos]int64, error) {
	var t [coll.NumAlgos][coll.NumProtos]int64
	for a := range t {
		t[a] = [coll.NumProtos]int64{llThreadThreshold, ll128ThreadThreshold, simpleThreadThreshold}
	}
	t[coll.Ring][coll.LL] *= int64(nRanks)
	t[coll.CollNetDirect][coll.Simple] = collNetThreadThresh
	t[coll.CollNetChain][coll.Simple] = collNetThreadThresh
	if strings.TrimSpace(c.ThreadThresholds) == "" {
		return t, nil
	}
	f := strings.Fields(c.ThreadThresholds)
	if len(f) > 6 {
		return t, fmt.Errorf("tuning: NCCL_THREAD_THRESHOLDS=%q: want at most 6 numbers (treeLL treeLL128 treeSimple ringLL ringLL128 ringSimple)", c.ThreadThresholds)
	}
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return t, fmt.Errorf("tuning: NCCL_THREAD_THRESHOLDS=%q: field %d %q is not an integer", c.ThreadThresholds, i+1, s)
		}
		if v >= 0 {
			t[[]coll.Algo{coll.Tree, coll.Ring}[i/3]][coll.Proto(i%3)] = v
		}
	}
	return t, nil
}

// funcSpellings are the function prefixes NCCL_ALGO/NCCL_PROTO accept (NCCL 2.24+ parseList).
var funcSpellings = [coll.NumTunedFuncs]string{"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}

// parseEnableList parses NCCL_ALGO / NCCL_PROTO (NCCL 2.24+ parseList):
// "elem,elem;func:elem,…;func:^elem". A list sets the listed elements and clears the rest; "^list"
// clears the listed and sets the others. Only the first entry may omit the function prefix; it
// applies to every function. The result is enable[func][elem]; -1 means "not set by the user" (the
// default applies).
func parseEnableList(varName, s string, elems []string) ([coll.NumTunedFuncs][]int, error) {
	var out [coll.NumTunedFuncs][]int
	for f := range out {
		out[f] = make([]int, len(elems))
		for i := range out[f] {
			out[f][i] = -1
		}
	}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		funcs := []int{0, 1, 2, 3, 4}
		list := entry
		if k := strings.IndexByte(entry, ':'); k >= 0 {
			name := strings.ToLower(strings.TrimSpace(entry[:k]))
			list = entry[k+1:]
			fi := -1
			for j, fs := range funcSpellings {
				if fs == name {
					fi = j
				}
			}
			if fi < 0 {
				return out, fmt.Errorf("tuning: %s=%q: entry %d: unknown function %q (want broadcast, reduce, allgather, reducescatter, allreduce)", varName, s, i+1, entry[:k])
			}
			funcs = []int{fi}
		} else if i > 0 {
			return out, fmt.Errorf("tuning: %s=%q: entry %d %q needs a function prefix (only the first entry may omit it)", varName, s, i+1, entry)
		}
		list = strings.TrimSpace(list)
		def, set := 0, 1
		if strings.HasPrefix(list, "^") {
			def, set = 1, 0
			list = list[1:]
		}
		vals := make([]int, len(elems))
		for j := range vals {
			vals[j] = def
		}
		for _, tok := range strings.Split(list, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				continue
			}
			found := false
			for j, e := range elems {
				if strings.EqualFold(tok, e) {
					vals[j] = set
					found = true
				}
			}
			if !found {
				return out, fmt.Errorf("tuning: %s=%q: entry %d: unknown element %q (want one of %s)", varName, s, i+1, tok, strings.Join(elems, ", "))
			}
		}
		for _, f := range funcs {
			copy(out[f], vals)
		}
	}
	return out, nil
}

// algoNames and protoNames are coll's spellings in NCCL's numbering, the names NCCL_ALGO and
// NCCL_PROTO accept.
var algoNames, protoNames = func() (a [coll.NumAlgos]string, p [coll.NumProtos]string) {
	for i := range a {
		a[i] = coll.Algo(i).String()
	}
	for i := range p {
		p[i] = coll.Proto(i).String()
	}
	return a, p
}()

// ChannelBounds is the clamp ncclTopoPostset applies to the communicator's channel count
// (NCCL 2.28 connect.cc): at most min(NCCL_MAX_NCHANNELS, maxCTAs, MAXCHANNELS), then at least
// max(NCCL_MIN_NCHANNELS, minCTAs), duplicating channels up to it. lo is 0 when neither minimum
// is set.
func (c *Config) ChannelBounds() (lo, hi int) {
	hi = MaxChannels
	if c == nil {
		return 0, hi
	}
	if c.MaxNChannels > 0 {
		hi = min(hi, c.MaxNChannels)
	}
	if c.MaxCTAs > 0 {
		hi = min(hi, c.MaxCTAs)
	}
	return min(max(c.MinNChannels, c.MinCTAs), MaxChannels), hi
}

// clampNVLSChannels bounds comm->nvlsChannels by minCTAs and maxCTAs (NCCL 2.28
// transport/nvls.cc: max(minCTAs, min(maxCTAs, nvlsChannels))).
func (c *Config) clampNVLSChannels(n int) int {
	if c == nil {
		return n
	}
	if c.MaxCTAs > 0 {
		n = min(n, c.MaxCTAs)
	}
	return max(n, c.MinCTAs)
}
