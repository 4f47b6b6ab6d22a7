package planner

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/topo/ncclxml"
)

// LoadTopology finds the topology a command works on, as NCCL does: the file or embedded example
// named by arg (a command's --topo); when arg is empty, the file NCCL_TOPO_FILE names
// (s.TopoFile); when that is empty too, the embedded default (a DGX H100). Files are read with
// ncclxml's bounds. The name returned is what errors and reports call it.
func LoadTopology(arg string, s Settings) (string, *ncclxml.Document, error) {
	switch {
	case arg != "":
		doc, err := ncclxml.ReadFile(arg)
		if err == nil {
			return arg, doc, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, err
		}
		if data, gerr := topos.Get(arg); gerr == nil {
			doc, err := ncclxml.ParseBytes(data, arg)
			return arg, doc, err
		}
		return "", nil, fmt.Errorf("--topo %s: no such file, and not an embedded topology (embedded: %s)", arg, strings.Join(topos.Names(), ", "))
	case s.TopoFile != "":
		doc, err := ncclxml.ReadFile(s.TopoFile)
		if err != nil {
			return "", nil, fmt.Errorf("NCCL_TOPO_FILE: %w", err)
		}
		return s.TopoFile, doc, nil
	}
	name, data := topos.Default()
	doc, err := ncclxml.ParseBytes(data, name)
	return name, doc, err
}
