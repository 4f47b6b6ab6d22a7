package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/graph"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/topo"
	"github.com/simccl/simccl/tuning"
)

func init() {
	register(&command{
		name:  "topo",
		short: "the system NCCL builds from a topology: the \"=== System\" tree and paths (NCCL log format or JSON); `topo dump` writes the live machine's XML",
		long: `simccl topo [--topo FILE] [--json] [--nccl-version 2.18|2.26|2.28|2.29|2.30] [--nodes N] [flags]: NCCL's
"=== System : maxBw … ===" tree and one path line per GPU and NIC, as NCCL's INFO log prints them
(--nodes above 1 makes the node inter-node: maxBw is GPU→NET). simccl topo dump writes the live
machine's topology as NCCL XML.`,
		define: defineTopo,
		subs:   []*command{topoDumpCommand},
	})
}

func defineTopo(fs *pflag.FlagSet) runFunc {
	topoFile := cli.AddTopo(fs)
	asJSON := cli.AddJSON(fs, `{"gpus","nics","links","paths"}`)
	version := cli.AddNCCLVersion(fs)
	nodes := cli.AddNodes(fs)
	gpuModel := cli.AddGPUModel(fs)
	nic := cli.AddNIC(fs)
	rank := fs.Int("rank", 0, "local rank whose view is printed (GPUs outside its P2P domain are trimmed, as NCCL does)")
	p2pDisable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1")
	p2pLevel := fs.String("p2p-level", "", "NCCL_P2P_LEVEL (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS)")
	p2pUnsupported := fs.Bool("no-pcie-p2p", false, "the driver reports no PCIe P2P (GeForce boards): GPU pairs go through the CPU")
	pxnDisable := fs.Bool("pxn-disable", false, "NCCL_PXN_DISABLE=1")
	gdrLevel := fs.String("net-gdr-level", "", "NCCL_NET_GDR_LEVEL (LOC … SYS)")
	strict := fs.Bool("strict", false, "treat warnings (inputs NCCL accepts silently, e.g. an NVLink count of 0) as errors")
	return func(stdout, stderr io.Writer) error {
		if *version == "" {
			*version = tuning.DefaultRelease
		}
		var rel planner.Settings
		if err := rel.SetRelease(*version); err != nil {
			return fmt.Errorf("%w: --nccl-version: %v", errUsage, err)
		}
		v := planner.GraphVersion(*version)
		for name, lv := range map[string]string{"--p2p-level": *p2pLevel, "--net-gdr-level": *gdrLevel} {
			if lv != "" {
				if _, err := graph.ParsePathType(lv); err != nil {
					return fmt.Errorf("%w: %s: %v", errUsage, name, err)
				}
			}
		}
		if *nodes < 1 || *nodes > graph.MaxClusterNodes {
			return fmt.Errorf("%w: --nodes %d: want 1..%d", errUsage, *nodes, graph.MaxClusterNodes)
		}
		// The topology as every command resolves it (file, embedded name, $NCCL_TOPO_FILE, the
		// default; a partial file completed for --gpu-model and --nic-speed).
		ls := planner.Settings{TopoFile: os.Getenv("NCCL_TOPO_FILE")}
		if err := nic.Apply(fs, &ls); err != nil {
			return err
		}
		_, doc, err := cli.LoadTopology(*topoFile, *gpuModel, ls)
		if err != nil {
			return err
		}
		opt := graph.Options{Version: v, LocalRank: *rank, P2PDisable: *p2pDisable, P2PLevel: *p2pLevel,
			P2PUnsupported: *p2pUnsupported, PXNDisable: *pxnDisable, NetGDRLevel: *gdrLevel, Strict: *strict}
		c, err := topo.NewCluster(doc, *nodes, opt)
		if err != nil {
			return err
		}
		s := c.Node
		if *asJSON {
			raw, err := json.Marshal(s)
			if err != nil {
				return err
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				return err
			}
			obj["nodes"], obj["ppn"], obj["nranks"], obj["rank"] = c.Nodes, c.PPN, c.NRanks, *rank
			out, err := json.MarshalIndent(obj, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "%s\n", out)
			return err
		}
		for _, w := range s.Warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		for _, u := range s.Unreachable {
			fmt.Fprintf(stderr, "unreachable: %s\n", u)
		}
		return s.Print(stdout)
	}
}
