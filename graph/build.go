package graph

import (
	"errors"

	"github.com/simccl/simccl/topo/xml"
)

// ErrTopology is wrapped by every error FromXML returns for a topology NCCL would reject.
var ErrTopology = errors.New("graph: bad topology")

// FromXML builds the system NCCL would build from a topology document (ncclTopoGetSystemFromXml
// followed by ncclTopoComputePaths, the GPU trimming and the maxBw/totalBw computation).
func FromXML(doc *xml.Document, opt Options) (*System, error) {
	return nil, errors.New("graph: FromXML under construction")
}
