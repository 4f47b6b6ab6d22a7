package search

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSearch is wrapped by every error this package returns for bad input (a topology the search
// cannot run on, a graph file that does not fit the topology).
var ErrSearch = errors.New("search")

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSearch, fmt.Sprintf(format, args...))
}

// Pattern is NCCL's NCCL_TOPO_PATTERN_* (graph.h).
type Pattern int

// Patterns, numbered as NCCL numbers them (unchanged since 2.12).
const (
	PatternBalancedTree  Pattern = 1 // NET→GPU a carries the tree parent and one child; the second child is on GPU b
	PatternSplitTree     Pattern = 2 // parent on GPU a, both children on GPU b
	PatternTree          Pattern = 3 // all NIC traffic on one GPU
	PatternRing          Pattern = 4
	PatternNVLS          Pattern = 5
	PatternCollNetDirect Pattern = 6
)

func (p Pattern) String() string {
	switch p {
	case PatternBalancedTree:
		return "BALANCED_TREE"
	case PatternSplitTree:
		return "SPLIT_TREE"
	case PatternTree:
		return "TREE"
	case PatternRing:
		return "RING"
	case PatternNVLS:
		return "NVLS"
	case PatternCollNetDirect:
		return "COLLNET_DIRECT"
	}
	return fmt.Sprintf("Pattern(%d)", int(p))
}

func (p Pattern) isTree() bool {
	return p == PatternBalancedTree || p == PatternTree || p == PatternSplitTree
}

// Graph ids as NCCL writes them in NCCL_GRAPH_DUMP_FILE (NCCL 2.28 init.cc).
const (
	IDRing          = 0
	IDTree          = 1
	IDCollNetChain  = 2
	IDNVLS          = 3
	IDCollNetDirect = 4
)

// PathType is NCCL's PATH_* in the 2.27.7+ numbering (graph.h); lower is better.
type PathType int

// Path types (2.27.7+ numbering, used by 2.28).
const (
	PathLOC PathType = 0
	PathNVL PathType = 1
	PathNVB PathType = 2
	PathC2C PathType = 3
	PathPIX PathType = 4
	PathPXB PathType = 5
	PathP2C PathType = 6
	PathPXN PathType = 7
	PathPHB PathType = 8
	PathSYS PathType = 9
	PathNET PathType = 10
	PathDIS PathType = 11
)

var pathNames = [...]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}

func (t PathType) String() string {
	if t >= 0 && int(t) < len(pathNames) {
		return pathNames[t]
	}
	return fmt.Sprintf("PathType(%d)", int(t))
}

// MarshalText writes the path type's name (JSON "NVL").
func (t PathType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a path type's name.
func (t *PathType) UnmarshalText(b []byte) error {
	v, err := ParsePathType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParsePathType reads a path type name as NCCL writes it in graph files (LOC … SYS, NET, DIS).
func ParsePathType(s string) (PathType, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for i, n := range pathNames {
		if n == u {
			return PathType(i), nil
		}
	}
	return 0, errorf("unknown path type %q (want one of %s)", s, strings.Join(pathNames[:], ", "))
}

// Link types as NCCL numbers them from 2.27.7 (topo.h LINK_*): equal to the matching path type.
const (
	linkLOC = 0
	linkNVL = 1
	linkC2C = 3
	linkPCI = 4
	linkSYS = 9
	linkNET = 10
)

// MaxChannels is NCCL's MAXCHANNELS (device.h, 64 since 2.12).
const MaxChannels = 64

// Graph is one search result: NCCL's struct ncclTopoGraph (graph.h).
type Graph struct {
	ID           int      `json:"id"`
	Pattern      Pattern  `json:"pattern"`
	CrossNic     int      `json:"cross_nic"`
	CollNet      bool     `json:"collnet"`
	MinChannels  int      `json:"min_channels"`
	MaxChannels  int      `json:"max_channels"`
	NChannels    int      `json:"nchannels"`
	BwIntra      float64  `json:"bw_intra"`
	BwInter      float64  `json:"bw_inter"`
	LatencyInter float64  `json:"latency_inter"`
	TypeIntra    PathType `json:"type_intra"`
	TypeInter    PathType `json:"type_inter"`
	SameChannels int      `json:"same_channels"`
	NHops        int      `json:"nhops"`
	// Intra holds, per channel, the ranks in channel order (NChannels × number of GPUs; an NVLS
	// channel holds its head rank only).
	Intra [][]int `json:"intra"`
	// Inter holds, per channel, the NET ids the channel starts and ends on (empty intra-node).
	Inter [][2]int64 `json:"inter,omitempty"`
	// FromFile says the graph was loaded from a graph file rather than searched.
	FromFile bool `json:"from_file,omitempty"`
}

// PatternName returns the pattern in words for tables.
func (g *Graph) PatternName() string { return g.Pattern.String() }
