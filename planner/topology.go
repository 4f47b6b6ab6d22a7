package planner

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/topo/ncclxml"
	"github.com/simccl/simccl/topo/partial"
)

// LoadTopology finds the topology a command works on, as NCCL does: the file or embedded example
// named by arg (a command's --topo); when arg is empty, the file NCCL_TOPO_FILE names
// (s.TopoFile); when that is empty too, the embedded default (a DGX H100). Files are read with
// ncclxml's bounds. The name returned is what errors and reports call it.
//
// A partial file (GPUs left to NCCL's hardware detection, as cloud VM files are) is completed
// from s.GPUModel as NCCL would complete it on those GPUs (partial.Complete), and its name says
// so; without a GPU model such a file is an error that says what it lacks. Where s.NICs gives a
// speed, its NIC devices without <nic><net> are completed too (partial.CompleteNICs), as NCCL's
// network plugin would report them.
func LoadTopology(arg string, s Settings) (string, *ncclxml.Document, error) {
	name, doc, err := loadTopology(arg, s)
	if err != nil {
		return "", nil, err
	}
	name, doc, err = completeTopology(name, doc, s.GPUModel)
	if err != nil || !(s.NICs.Speed > 0) {
		return name, doc, err
	}
	done, res, err := partial.CompleteNICs(doc, s.NICs)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("%s (%s)", name, res.DescribeNICs(s.NICs)), done, nil
}

func loadTopology(arg string, s Settings) (string, *ncclxml.Document, error) {
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

// completeTopology applies a GPU model to doc (partial.Complete), or, without one, refuses a
// file that cannot be simulated without detection, saying what it lacks.
func completeTopology(name string, doc *ncclxml.Document, model string) (string, *ncclxml.Document, error) {
	if strings.TrimSpace(model) == "" {
		if g := partial.Inspect(doc); g.NeedsModel() {
			return "", nil, fmt.Errorf("%s: a partial topology, which NCCL completes from the hardware it detects: %s; name the GPU model to complete it (--gpu-model: %s)",
				name, g.Describe(doc), strings.Join(partial.ModelNames(), ", "))
		}
		return name, doc, nil
	}
	done, res, err := partial.Complete(doc, model)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("%s (GPU model %s)", name, res.Model.Name), done, nil
}

// firstGPUs returns doc with only the GPUs of rank < k kept in the communicator (the others lose
// their rank, which takes them out as NCCL leaves out the GPUs no rank of the communicator uses):
// a communicator on k of a node's GPUs, as CUDA_VISIBLE_DEVICES gives one. The document is
// parsed again from its bytes, so that line numbers in errors stay those of the file.
func firstGPUs(doc *ncclxml.Document, k int) (*ncclxml.Document, error) {
	data, err := doc.Bytes()
	if err != nil {
		return nil, err
	}
	cp, err := ncclxml.ParseBytes(data, doc.Name)
	if err != nil {
		return nil, err
	}
	kept := 0
	for _, g := range cp.Doc.FindElements("//gpu") {
		a := g.SelectAttr("rank")
		if a == nil {
			continue
		}
		r, err := ncclxml.ParseInt(a.Value)
		if err != nil {
			return nil, cp.Errorf(g, "<gpu rank=%s>: not an integer", ncclxml.Quote(a.Value))
		}
		if r >= int64(k) {
			g.RemoveAttr("rank")
			continue
		}
		kept++
	}
	if kept < k {
		return nil, fmt.Errorf("%w %d: %s has only %d GPU(s) with a rank below %d", ErrTooFewGPUs, k, doc.Name, kept, k)
	}
	return cp, nil
}
