package planner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/search"
	"github.com/simccl/simccl/topo/partial"
	"github.com/simccl/simccl/tuning"
)

// Settings are what NCCL reads from its environment when it builds a communicator, and the
// release whose rules apply. SettingsFromEnv fills them from NCCL_* variables; commands then
// overwrite the fields their flags set (--algo is NCCL_ALGO, --nccl-version the release, …).
type Settings struct {
	// Release is the NCCL release whose rules apply ("2.28" when empty; "2.26", "2.29", "2.30").
	Release string
	// Tuning holds NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_NTHREADS, the buffer and
	// chunk sizes, NCCL_PAT_ENABLE and the tuner-file rules. Its Version is set from Release.
	Tuning tuning.Config
	// Graph holds NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NVB_DISABLE, NCCL_PXN_DISABLE,
	// NCCL_PXN_C2C and NCCL_NET_GDR_LEVEL, and the rank whose view is built. Its Version and
	// NRanks are set by New.
	Graph graph.Options
	// NVLS is NCCL_NVLS_ENABLE: nil leaves NCCL's rule (an NVSwitch, every GPU sm ≥ 90, more
	// than two GPUs), false is 0, true is 1.
	NVLS *bool
	// CollNet is NCCL_COLLNET_ENABLE=1 with a CollNet (SHARP) plugin present: the CollNet graphs
	// are searched and CollNet algorithms can be chosen.
	CollNet bool
	// CrossNic is NCCL_CROSS_NIC (nil: NCCL's default, 2).
	CrossNic *int
	// IBQPs is NCCL_IB_QPS_PER_CONNECTION, the queue pairs of every network connection (0: unset,
	// NCCL's default of one). Nothing in the plan depends on it: the simulation's ECMP fabric
	// hashes each queue pair onto its own equal-cost links (simnet.Fabric.QPs).
	IBQPs int
	// GraphFile is NCCL_GRAPH_FILE: graphs loaded from it replace the search's.
	GraphFile string
	// TopoFile is NCCL_TOPO_FILE: the topology used when none is named (LoadTopology).
	TopoFile string
	// GPUModel names the GPUs of the machine (topo/partial: "h100", "a100", …) so that
	// LoadTopology completes a partial file (cloud VM topologies whose GPUs NCCL fills in from
	// the hardware it detects) as NCCL would on those GPUs. It is not an NCCL variable:
	// SettingsFromEnv leaves it empty, and empty takes files as they are.
	GPUModel string
	// NICs, where its Speed is set, completes the NIC devices a partial file lists without
	// <nic><net> as NCCL's network plugin would report them (partial.CompleteNICs): what a
	// multi-node run of such a file needs. Not an NCCL variable either; the zero value leaves
	// files as they are.
	NICs partial.NIC
}

// MaxIBQPs is the most queue pairs a connection takes (NCCL 2.28's NCCL_IB_MAX_QPS).
const MaxIBQPs = 128

// Releases the planner has rules for (the tuning model's releases).
func Releases() []string { return tuning.Releases() }

// SettingsFromEnv reads NCCL's variables through getenv (os.Getenv in a program). A bad value is
// an error naming the variable.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	var s Settings
	cfg, err := tuning.ConfigFromEnv(getenv)
	if err != nil {
		return s, err
	}
	s.Tuning = *cfg
	flag := func(name string) (*bool, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("planner: %s=%q: want 0 or 1", name, v)
		}
		b := n != 0
		return &b, nil
	}
	if v := strings.TrimSpace(getenv("NCCL_NVLS_ENABLE")); v != "" && v != "2" {
		// 2 is NCCL's "auto", the same as unset.
		if s.NVLS, err = flag("NCCL_NVLS_ENABLE"); err != nil {
			return s, err
		}
	}
	if b, err := flag("NCCL_COLLNET_ENABLE"); err != nil {
		return s, err
	} else if b != nil {
		s.CollNet = *b
	}
	if v := strings.TrimSpace(getenv("NCCL_CROSS_NIC")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 2 {
			return s, fmt.Errorf("planner: NCCL_CROSS_NIC=%q: want 0, 1 or 2", v)
		}
		s.CrossNic = &n
	}
	if v := strings.TrimSpace(getenv("NCCL_IB_QPS_PER_CONNECTION")); v != "" {
		// NCCL 2.28 takes 1 to NCCL_IB_MAX_QPS (128) queue pairs a connection.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxIBQPs {
			return s, fmt.Errorf("planner: NCCL_IB_QPS_PER_CONNECTION=%q: want 1..%d", v, MaxIBQPs)
		}
		s.IBQPs = n
	}
	for _, b := range []struct {
		name   string
		dst    *bool
		invert bool
	}{
		{"NCCL_P2P_DISABLE", &s.Graph.P2PDisable, false},
		{"NCCL_NVB_DISABLE", &s.Graph.NVBDisable, false},
		{"NCCL_PXN_DISABLE", &s.Graph.PXNDisable, false},
		{"NCCL_PXN_C2C", &s.Graph.PXNC2CDisable, true},
	} {
		v, err := flag(b.name)
		if err != nil {
			return s, err
		}
		if v != nil {
			*b.dst = *v != b.invert
		}
	}
	if v := strings.TrimSpace(getenv("NCCL_P2P_LEVEL")); v != "" {
		if _, err := graph.ParsePathType(v); err != nil {
			return s, fmt.Errorf("planner: NCCL_P2P_LEVEL=%q: %v", v, err)
		}
		s.Graph.P2PLevel = v
	}
	if v := strings.TrimSpace(getenv("NCCL_NET_GDR_LEVEL")); v != "" {
		if _, err := graph.ParsePathType(v); err != nil {
			return s, fmt.Errorf("planner: NCCL_NET_GDR_LEVEL=%q: %v", v, err)
		}
		s.Graph.NetGDRLevel = v
	}
	s.GraphFile = strings.TrimSpace(getenv("NCCL_GRAPH_FILE"))
	s.TopoFile = strings.TrimSpace(getenv("NCCL_TOPO_FILE"))
	return s, nil
}

// SetRelease sets the NCCL release whose rules apply. The search knows more releases than the
// tuning model (SearchReleases); New says so when it needs the tuning model of one it lacks.
func (s *Settings) SetRelease(v string) error {
	v = strings.TrimSpace(v)
	if _, err := search.ParamsFor(MajorMinor(v)); err != nil {
		return fmt.Errorf("planner: NCCL release %q: want one of %s", v, strings.Join(SearchReleases(), ", "))
	}
	s.Release = v
	return nil
}

// SearchReleases are the releases whose channel-search rules the planner has (Releases, whose
// tuning model it has too, and older or newer ones known to the search only).
func SearchReleases() []string { return []string{"2.18", "2.26", "2.28", "2.29", "2.30"} }

// versions resolves the release for the graph and the search. A release the graph package has no
// rules of (2.18, 2.29) builds the system with 2.28's, which did not change in between for the
// inputs the search reads.
func (s *Settings) versions() (graph.Version, search.Params, error) {
	rel := s.Release
	if rel == "" {
		rel = tuning.DefaultRelease
	}
	params, err := search.ParamsFor(MajorMinor(rel))
	if err != nil {
		return graph.Version{}, params, fmt.Errorf("planner: NCCL release %q: %v", rel, err)
	}
	return GraphVersion(rel), params, nil
}

// GraphVersion is the graph package's rules for release rel: its own where it has them, else
// 2.28's (2.18, 2.29), which did not change in between for the inputs the search reads.
func GraphVersion(rel string) graph.Version {
	gv, err := graph.ParseVersion(rel)
	if err != nil {
		return graph.V2_28
	}
	return gv
}

// MajorMinor is the release "2.28" of a version "2.28.9" (and of "2.28").
func MajorMinor(v string) string {
	if parts := strings.Split(v, "."); len(parts) > 2 {
		return parts[0] + "." + parts[1]
	}
	return v
}
