package tuning

import "github.com/simccl/simccl/graph"

// PathType is graph.PathType (NCCL 2.27.7+ numbering of graph.h PATH_*).
type PathType = graph.PathType

// Path types used by the tuning rules.
const (
	PathLOC = graph.PathLOC
	PathNVL = graph.PathNVL
	PathNVB = graph.PathNVB
	PathC2C = graph.PathC2C
	PathPIX = graph.PathPIX
	PathPXB = graph.PathPXB
	PathP2C = graph.PathP2C
	PathPXN = graph.PathPXN
	PathPHB = graph.PathPHB
	PathSYS = graph.PathSYS
	PathNET = graph.PathNET
	PathDIS = graph.PathDIS
)
