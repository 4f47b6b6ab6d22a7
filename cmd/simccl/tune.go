package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/internal/cli"
	"github.com/simccl/simccl/planner"
	"github.com/simccl/simccl/tuning"
)

func init() {
	register(&command{
		name:  "tune",
		short: "NCCL's cost model on a topology: the TUNING table and the per-size algorithm/protocol/channel choices",
		long: "simccl tune [--topo FILE] [--nodes N] [-b MIN -e MAX -f FACTOR] [--nccl-version V] [--algo …] [--proto …] [--tuner-file CSV] [--json]\n\n" +
			`Runs NCCL's topology search and cost model and prints what NCCL_DEBUG_SUBSYS=TUNING prints on rank 0:
the latency/bandwidth table and one line per collective and size. NCCL_* tuning variables
(NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_NTHREADS, NCCL_BUFFSIZE, NCCL_TOPO_FILE, …) are
read from the environment; flags override them. Sizes follow nccl-tests (the total buffer); the
choice line prints NCCL's Bytes (count × element size, the per-rank count for AllGather and
ReduceScatter). -c all is NCCL's tuned collectives (allreduce, allgather, reducescatter, broadcast,
reduce); sendrecv and alltoall print their point-to-point plans (NCCL prints no TUNING line for them).

` + tuning.OverrideHelp,
		define: defineTune,
	})
}

var tunedColls = []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce}

func defineTune(fs *pflag.FlagSet) runFunc {
	mf := addMachineFlags(fs)
	sweep := addSweepFlags(fs, "all") // sendrecv and alltoall: their point-to-point plans
	noTable := fs.Bool("no-table", false, "print only the per-size choices")
	asJSON := cli.AddJSON(fs, `{"table":[…],"choices":[…]}`)
	return func(stdout, stderr io.Writer) error {
		funcs, sizes, dt, _, err := sweep.parse(tunedColls)
		if err != nil {
			return err
		}

		p, err := mf.planner(fs)
		if err != nil {
			return err
		}
		var choices []tuning.Choice
		var p2p []tuning.P2PChoiceJSON
		var skipped []string
		for _, f := range funcs {
			for _, s := range sizes {
				call := coll.TestCall(f, s, dt, coll.Sum, p.NRanks())
				if call.Count == 0 {
					// nccl-tests rounds the per-rank count down to 16 bytes' worth of elements; a call
					// of no element is not made (and NCCL would not tune it).
					skipped = append(skipped, fmt.Sprintf("%v %d B: no element per rank, no call", f, s))
					continue
				}
				d, err := p.Decide(call)
				if err != nil {
					return fmt.Errorf("%s %d bytes: %w", f, s, err)
				}
				if d.Choice != nil {
					choices = append(choices, *d.Choice)
				} else {
					p2p = append(p2p, p2pChoices(f, s, p.PPN, d)...)
				}
			}
		}
		table := p.Table
		var note string
		if p.NRanks() == 1 {
			// NCCL 2.28 on one GPU prints no TUNING line at all (testdata/nccl/h200x1/onerank-tuning-*):
			// a one-rank collective is a device memcpy (ncclLaunchOneRank), chosen by no model.
			note = "one rank: NCCL prints no tuning table and makes no choice — every collective is a device memcpy; the table below is its cost model's, which NCCL does not compute here"
		}
		if *asJSON {
			r := table.NewReport(choices)
			r.P2P = p2p
			r.Note = note
			return r.WriteJSON(stdout)
		}
		fmt.Fprintf(stdout, "# simccl tune: %s, %d ranks on %d node(s), %d channels, NCCL %s rules\n", p.Name, p.NRanks(), p.Nodes, table.NChannels, table.K.Release)
		total, perPeer := table.P2PChannels()
		fmt.Fprintf(stdout, "# %d p2p channels, %d p2p channels per peer (as NCCL's init log says them)\n", total, perPeer)
		if note != "" {
			fmt.Fprintf(stdout, "# note: %s\n", note)
		}
		if !*noTable {
			if err := table.WriteText(stdout, ""); err != nil {
				return err
			}
		}
		for _, sk := range skipped {
			fmt.Fprintf(stdout, "# %s\n", sk)
		}
		for _, ch := range choices {
			prefix := ""
			if ch.OneRank {
				prefix = "# " // not a line NCCL prints
			}
			if _, err := fmt.Fprintln(stdout, prefix+ch.Line()); err != nil {
				return err
			}
		}
		for _, ch := range p2p {
			if _, err := fmt.Fprintln(stdout, ch.Line()); err != nil {
				return err
			}
		}
		return nil
	}
}

// p2pChoices describes the point-to-point plan d of nccl-tests size s of f (SendRecv, AllToAll):
// one entry per way its transfers are cut (a send/recv across nodes plans its in-node and its
// network peers apart), with the peer kind where ppn ranks share a node.
func p2pChoices(f coll.Func, s int64, ppn int, d planner.Decision) []tuning.P2PChoiceJSON {
	pl := d.Plan
	if f == coll.AllToAll || len(pl.Transfers) == 0 {
		c := tuning.P2PChoiceJSON{Coll: f.String(), Bytes: s, Transfers: pl.NRanks * pl.NRanks, Proto: pl.Proto.String(), NChannels: pl.NChannels}
		if f != coll.AllToAll {
			c.Transfers = pl.NRanks
		}
		if pl.Proto == coll.Simple {
			c.ChunkSize = pl.ChunkSize
		}
		return []tuning.P2PChoiceJSON{c}
	}
	var out []tuning.P2PChoiceJSON
	index := map[tuning.P2PChoiceJSON]int{}
	for _, t := range pl.Transfers {
		c := tuning.P2PChoiceJSON{Coll: f.String(), Bytes: s, Proto: coll.Simple.String(), NChannels: t.NChannels, ChunkSize: t.ChunkSize, Peer: "intra"}
		if t.LL {
			c.Proto = coll.LL.String()
		}
		if ppn > 0 && t.From/ppn != t.To/ppn {
			c.Peer = "net"
		}
		if i, ok := index[c]; ok {
			out[i].Transfers++
			continue
		}
		index[c] = len(out)
		c.Transfers = 1
		out = append(out, c)
	}
	return out
}
