package graph

// P2PLevel exposes p2pLevel to the external tests.
func (s *System) P2PLevel() PathType { return s.p2pLevel() }
