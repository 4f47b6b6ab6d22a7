package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/examples/topos"
	"github.com/simccl/simccl/intercept"
	"github.com/simccl/simccl/planner"
)

// One plan: on every embedded topology and every corpus topology that loads, at 1, 2 and 16 nodes,
// for every collective from 8 B to 1 GiB, with NCCL's defaults and with NCCL_ALGO, NCCL_PROTO and
// NCCL_MAX_NCHANNELS set, what run (its --dry-run), mem (its picks) and plan act on is tune's
// decision (for send/recv and all-to-all, which tune does not cover, run and plan agree). By
// default the corpus runs at one node with NCCL's defaults and plan compiles two sizes per
// collective; SIMCCL_LONG=1 (make test-long) runs the whole matrix and every size. report and
// replay, which simulate, are checked on a sample below.

type decision struct {
	algo, proto string
	nch         int
}

var planNote = regexp.MustCompile(`NCCL runs (\w+)/(\w+) on (\d+) channel\(s\)(?: — (\w+): (\d+) Bytes)?`)

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func (d decision) String() string { return fmt.Sprintf("%s/%s/%d", d.algo, d.proto, d.nch) }

func parseDecision(s string) decision {
	var d decision
	parts := strings.Split(s, "/")
	if len(parts) == 3 {
		d.algo, d.proto = parts[0], parts[1]
		fmt.Sscan(parts[2], &d.nch)
	}
	return d
}

func mustRun(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := mainRun(args, &out, &errb); rc != 0 {
		t.Fatalf("simccl %s: rc %d: %s", strings.Join(args, " "), rc, errb.String())
	}
	return out.Bytes()
}

func onePlanTopologies(t *testing.T) []string {
	var out []string
	out = append(out, topos.Names()...)
	files, err := filepath.Glob("../../testdata/topos/*.xml")
	require.NoError(t, err)
	for _, f := range files {
		_, doc, err := planner.LoadTopology(f, planner.Settings{})
		if err != nil {
			continue
		}
		if _, err := planner.New(planner.Machine{Name: f, Doc: doc, Nodes: 1}); err != nil {
			continue // partial vendor files, graph dumps: they do not load
		}
		out = append(out, f)
	}
	require.Greater(t, len(out), 25)
	return out
}

// onePlanMaxNodes caps the node counts TestOnePlan tries on some embedded topologies.
// On gb200-nvl72 (72 GPUs in one MNNVL node) the inter-node search takes about 10 s per command
// (NCCL's search budget over 72 GPUs), so 2 racks run only with SIMCCL_LONG; 16 racks are 1152
// ranks, where run's ring Broadcast schedule is over coll's bound on the steps of one schedule,
// so run --dry-run refuses every Broadcast size. dgx-h200 is dgx-h100 to the model (same sm and
// links; examples/topos TestDGXH200IsDGXH100ToTheModel compares their searches at 1 and 2
// nodes), so it runs at one node unless SIMCCL_LONG.
func onePlanMaxNodes(topo string, long bool) (int, bool) {
	switch topo {
	case "gb200-nvl72":
		if long {
			return 2, true
		}
		return 1, true
	case "dgx-h200":
		if long {
			return 0, false
		}
		return 1, true
	}
	return 0, false
}

func TestOnePlan(t *testing.T) {
	long := os.Getenv("SIMCCL_LONG") != ""
	envs := []map[string]string{
		{},
		{"NCCL_ALGO": "ring,tree", "NCCL_PROTO": "^LL128", "NCCL_MAX_NCHANNELS": "4"},
	}
	checked := 0
	embedded := map[string]bool{}
	for _, n := range topos.Names() {
		embedded[n] = true
	}
	for _, topo := range onePlanTopologies(t) {
		for _, nodes := range []int{1, 2, 16} {
			for ei, env := range envs {
				if !long && !embedded[topo] && (nodes > 1 || ei > 0) {
					continue // the corpus at one node with NCCL's defaults, unless -long
				}
				if max, ok := onePlanMaxNodes(topo, long); ok && nodes > max {
					continue
				}
				name := fmt.Sprintf("%s/%d/env%d", filepath.Base(topo), nodes, ei)
				for _, k := range []string{"NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS"} {
					t.Setenv(k, env[k])
				}
				common := []string{"--topo", topo, "--nodes", fmt.Sprint(nodes)}
				// A topology without a NIC cannot join nodes: every command must say so alike.
				var out, errb bytes.Buffer
				if rc := mainRun(append([]string{"tune", "--json", "-c", "all", "-b", "8", "-e", "1G"}, common...), &out, &errb); rc != 0 {
					require.Greater(t, nodes, 1, "%s: %s", name, errb.String())
					for _, cmd := range [][]string{{"run", "--dry-run"}, {"mem"}, {"plan"}} {
						var o, e bytes.Buffer
						require.NotEqual(t, 0, mainRun(append(cmd, common...), &o, &e), "%s: %v succeeds where tune fails (%s)", name, cmd, errb.String())
					}
					continue
				}
				var tj struct {
					NRanks  int `json:"nranks"`
					Choices []struct {
						Coll      string `json:"coll"`
						Bytes     int64  `json:"bytes"`
						Algo      string `json:"algo"`
						Proto     string `json:"proto"`
						NChannels int    `json:"nchannels"`
					} `json:"choices"`
				}
				require.NoError(t, json.Unmarshal(out.Bytes(), &tj))
				tune := map[string]decision{} // "Func bytes" (NCCL's bytes) → decision
				for _, c := range tj.Choices {
					tune[fmt.Sprintf("%s %d", c.Coll, c.Bytes)] = decision{c.Algo, c.Proto, c.NChannels}
				}
				require.NotEmpty(t, tune)

				// run --dry-run: NCCL's decision is the row's NCCL field, else its plan.
				var rj struct {
					Rows []struct {
						Coll      string `json:"coll"`
						Bytes     int64  `json:"bytes"`
						Count     int64  `json:"count"`
						Algo      string `json:"algo"`
						Proto     string `json:"proto"`
						NChannels int    `json:"nchannels"`
						NCCL      string `json:"nccl"`
					} `json:"rows"`
				}
				require.NoError(t, json.Unmarshal(mustRun(t, append([]string{"run", "--dry-run", "--json", "-c", "all", "-b", "8", "-e", "1G"}, common...)...), &rj))
				p2p := map[string]decision{} // "coll bytes" → decision, send/recv and all-to-all
				for _, r := range rj.Rows {
					if r.Count == 0 {
						continue
					}
					d := decision{r.Algo, r.Proto, r.NChannels}
					if r.NCCL != "" {
						d = parseDecision(r.NCCL)
					}
					f, err := coll.FuncOfTest(r.Coll)
					require.NoError(t, err)
					if f >= coll.NumTunedFuncs {
						p2p[fmt.Sprintf("%s %d", r.Coll, r.Count)] = d
						continue
					}
					key := fmt.Sprintf("%s %d", f, r.Count*4)
					want, ok := tune[key]
					require.True(t, ok, "%s: run plans %s, which tune did not", name, key)
					require.Equal(t, want, d, "%s: run's decision for %s", name, key)
					checked++
				}

				// mem: its picks are the decisions it connects.
				var mj struct {
					Lazy struct {
						Picks []struct {
							Coll      string `json:"coll"`
							Bytes     int64  `json:"bytes"`
							Algo      string `json:"algo"`
							Proto     string `json:"proto"`
							NChannels int    `json:"nchannels"`
						} `json:"picks"`
					} `json:"lazy"`
				}
				require.NoError(t, json.Unmarshal(mustRun(t, append([]string{"mem", "--json", "-c", "allreduce,allgather,reducescatter,broadcast,reduce", "-b", "8", "-e", "1G"}, common...)...), &mj))
				for _, pk := range mj.Lazy.Picks {
					f, err := coll.FuncOfTest(pk.Coll)
					require.NoError(t, err)
					count, _ := coll.TestCount(f, pk.Bytes, 4, tj.NRanks)
					key := fmt.Sprintf("%s %d", f, count*4)
					require.Equal(t, tune[key], decision{pk.Algo, pk.Proto, pk.NChannels}, "%s: mem's pick for %s", name, key)
					checked++
				}

				// plan: the note states NCCL's decision; for a tuned collective its choice line is tune's.
				sizes := []string{"8", "64K", "8192"} // -b -e -f: 8 B and 64 KiB
				if long {
					sizes = []string{"8", "1G", "2"}
				}
				var o, e bytes.Buffer
				args := append([]string{"plan", "--json", "--summary", "-c", "all", "-b", sizes[0], "-e", sizes[1], "-f", sizes[2]}, common...)
				rc := mainRun(args, &o, &e)
				var pj struct {
					Plans []struct {
						Coll  string `json:"coll"`
						Count int64  `json:"count"`
						Note  string `json:"note"`
						Error string `json:"error"`
					} `json:"plans"`
				}
				require.NoError(t, json.Unmarshal(o.Bytes(), &pj), "%s: %s", name, e.String())
				require.True(t, rc == 0 || strings.Contains(e.String(), "not compiled"), "%s: plan: %s", name, e.String())
				require.NotEmpty(t, pj.Plans)
				for _, pl := range pj.Plans {
					m := planNote.FindStringSubmatch(pl.Note)
					require.NotNil(t, m, "%s: plan note %q", name, pl.Note)
					got := decision{m[1], m[2], atoi(m[3])}
					if m[4] != "" {
						require.Equal(t, tune[m[4]+" "+m[5]], got, "%s: plan: %s", name, pl.Note)
					} else {
						// Point-to-point: run's decision for the same call (its rows say P2P).
						want, ok := p2p[fmt.Sprintf("%s %d", pl.Coll, pl.Count)]
						require.True(t, ok, "%s: plan %s %d not in run", name, pl.Coll, pl.Count)
						require.Equal(t, want, decision{"P2P", got.proto, got.nch}, "%s: plan: %s", name, pl.Note)
					}
					checked++
				}
			}
		}
	}
	require.Greater(t, checked, 1000)
	t.Logf("%d run decisions checked against tune", checked)
}

// The report's tuner rows are tune's decisions and its simulated rows run's, at one and two nodes.
func TestOnePlanReport(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		for _, topo := range []string{"dgx-h100", "dgx-a100", "pcie-8gpu-2socket"} {
			common := []string{"--topo", topo, "--nodes", fmt.Sprint(nodes)}
			var rj struct {
				Tuner []struct {
					Coll   string `json:"coll"`
					Points []struct {
						Size      int64  `json:"size"`
						Algo      string `json:"algo"`
						Proto     string `json:"proto"`
						NChannels int    `json:"nchannels"`
						SimAlgo   string `json:"sim_algo"`
					} `json:"points"`
				} `json:"tuner"`
			}
			out := mustRun(t, append([]string{"report", "--json", "-o", os.DevNull, "-c", "allreduce,allgather", "-b", "8", "-e", "1G", "-f", "16", "--progress", "off"}, common...)...)
			require.NoError(t, json.Unmarshal(out, &rj))
			require.Len(t, rj.Tuner, 2)
			for _, tr := range rj.Tuner {
				f, err := coll.FuncOfTest(tr.Coll)
				require.NoError(t, err)
				var dj struct {
					Rows []struct {
						Bytes     int64  `json:"bytes"`
						Algo      string `json:"algo"`
						Proto     string `json:"proto"`
						NChannels int    `json:"nchannels"`
						NCCL      string `json:"nccl"`
					} `json:"rows"`
				}
				for _, pt := range tr.Points {
					require.NoError(t, json.Unmarshal(mustRun(t, append([]string{"run", "--dry-run", "--json", "-c", f.String(), "-b", fmt.Sprint(pt.Size), "-e", fmt.Sprint(pt.Size)}, common...)...), &dj))
					require.Len(t, dj.Rows, 1)
					r := dj.Rows[0]
					d := decision{r.Algo, r.Proto, r.NChannels}
					if r.NCCL != "" {
						d = parseDecision(r.NCCL)
					}
					require.Equal(t, d, decision{pt.Algo, pt.Proto, pt.NChannels}, "%s ×%d %s %d", topo, nodes, tr.Coll, pt.Size)
					require.Equal(t, r.Algo, pt.SimAlgo, "%s ×%d %s %d: simulated algorithm", topo, nodes, tr.Coll, pt.Size)
				}
			}
		}
	}
}

// replay simulates a trace's calls with the decisions run makes for them.
func TestOnePlanReplay(t *testing.T) {
	dir := t.TempDir()
	var recs [8][]byte
	seq := int64(0)
	var sizes []int64
	for s := int64(64); s <= 1<<30; s *= 16 {
		sizes = append(sizes, s)
	}
	ops := map[coll.Func]string{coll.AllReduce: intercept.OpAllReduce, coll.AllGather: intercept.OpAllGather,
		coll.ReduceScatter: intercept.OpReduceScatter, coll.Broadcast: intercept.OpBroadcast, coll.Reduce: intercept.OpReduce}
	funcs := []coll.Func{coll.AllReduce, coll.AllGather, coll.ReduceScatter, coll.Broadcast, coll.Reduce}
	type key struct {
		f    coll.Func
		size int64
	}
	var order []key
	for _, f := range funcs {
		for _, s := range sizes {
			count, _ := coll.TestCount(f, s, 4, 8)
			for r := 0; r < 8; r++ {
				rec := intercept.Record{Seq: seq, Rank: r, NRanks: 8, Comm: "c", Op: ops[f], Count: count, Dtype: "float", RedOp: "sum", Root: 0}
				if f != coll.Broadcast && f != coll.Reduce {
					rec.Root = -1
				}
				recs[r] = intercept.AppendRecord(recs[r], &rec)
			}
			order = append(order, key{f, s})
			seq++
		}
	}
	var files []string
	for r := range recs {
		p := filepath.Join(dir, fmt.Sprintf("rank%d.jsonl", r))
		require.NoError(t, os.WriteFile(p, recs[r], 0o644))
		files = append(files, p)
	}
	var rep struct {
		Launches []struct {
			Index     int    `json:"index"`
			Algo      string `json:"algo"`
			Proto     string `json:"proto"`
			NChannels int    `json:"nchannels"`
			NCCL      string `json:"nccl"`
		} `json:"launches"`
	}
	require.NoError(t, json.Unmarshal(mustRun(t, append([]string{"replay", "--json", "--calls", "--progress", "off"}, files...)...), &rep))
	require.Len(t, rep.Launches, len(order))
	sort.Slice(rep.Launches, func(i, j int) bool { return rep.Launches[i].Index < rep.Launches[j].Index })
	for i, k := range order {
		l := rep.Launches[i]
		var dj struct {
			Rows []struct {
				Algo      string `json:"algo"`
				Proto     string `json:"proto"`
				NChannels int    `json:"nchannels"`
				NCCL      string `json:"nccl"`
			} `json:"rows"`
		}
		require.NoError(t, json.Unmarshal(mustRun(t, "run", "--dry-run", "--json", "-c", k.f.String(), "-b", fmt.Sprint(k.size), "-e", fmt.Sprint(k.size)), &dj))
		r := dj.Rows[0]
		require.Equal(t, fmt.Sprintf("%s/%s/%d %s", r.Algo, r.Proto, r.NChannels, r.NCCL), fmt.Sprintf("%s/%s/%d %s", l.Algo, l.Proto, l.NChannels, l.NCCL), "%v %d", k.f, k.size)
	}
}
