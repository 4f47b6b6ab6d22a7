package tuning

// PathType is a path type in NCCL's 2.27.7+ numbering (fact sheet §3.1).
//
// Placeholder until graph/types.go is published; it will become an alias of graph.PathType.
type PathType int

// Path types, lower is better (fact sheet §3.1, 2.27.7+ numbering).
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
