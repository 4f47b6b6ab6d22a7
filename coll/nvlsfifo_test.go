package coll

import "testing"

// TestNVLSFifosPerHead: NCCL's NVLS kernels scatter a rank's chunks to every head over a
// connection per head (FanAsymmetric<0, NCCL_MAX_NVLS_ARITY> over nvls->up; NCCL 2.28
// all_reduce.h) and gather them back the same way, each with NCCL_STEPS slots, so a rank's scatter
// may run NCCL_STEPS loops ahead of the switch, not NCCL_STEPS chunks. The schedule keeps one
// connection from a rank to its switch (and back) whose messages take the heads in turn: message
// k waits for message k − NCCLSteps×heads to be consumed. A head's own connections (its reduced
// chunk to and from the switch, the tree between nodes) keep NCCLSteps.
func TestNVLSFifosPerHead(t *testing.T) {
	for _, c := range []struct {
		algo   Algo
		nodes  int
		ppn    int
		oneLap int // heads: messages per loop on a rank's scatter connection
	}{{NVLS, 1, 8, 8}, {NVLSTree, 2, 8, 8}, {NVLSTree, 2, 4, 4}} {
		p := Plan{Func: AllReduce, Algo: c.algo, Proto: Simple, NRanks: c.nodes * c.ppn, NNodes: c.nodes,
			Count: 16 << 20, DataType: Float32, NChannels: 2}
		s, err := Compile(p)
		if err != nil {
			t.Fatalf("%v: %v", c.algo, err)
		}
		n := s.NRanks
		checked := map[string]int{}
		for _, pr := range s.Programs {
			for _, st := range pr.Steps {
				for _, x := range st.Send {
					cn := s.Conns[x.Conn]
					var kind string
					window := NCCLSteps
					switch {
					case cn.From < n && cn.To >= n && cn.ConnIndex == connUp && st.Lane == 0:
						kind, window = "scatter", NCCLSteps*c.oneLap
					case cn.From >= n && cn.To < n && cn.ConnIndex == connDown:
						kind, window = "gather", NCCLSteps*c.oneLap
					case cn.From < n && cn.To >= n:
						kind = "head to switch"
					case cn.From >= n:
						kind = "switch to head"
					default:
						kind = "between heads"
					}
					want := int(x.Seq) - window
					if want < 0 {
						want = -1
					}
					if int(x.CreditSeq) != want {
						t.Fatalf("%v ppn %d: %s message %d (%d→%d) waits for %d, want %d", c.algo, c.ppn, kind, x.Seq, cn.From, cn.To, x.CreditSeq, want)
					}
					if int(x.Seq) >= window {
						checked[kind]++
					}
				}
			}
		}
		for _, k := range []string{"scatter", "gather", "head to switch", "switch to head"} {
			if checked[k] == 0 {
				t.Errorf("%v ppn %d: no %s message past its first window (call too small for the test)", c.algo, c.ppn, k)
			}
		}
	}
}

// TestNVLSGatherScatterFifos: single-node NVLS AllGather gathers over per-head FIFOs and sends its
// own part over one (nvls->down); ReduceScatter scatters over per-head FIFOs and receives its
// part over one.
func TestNVLSGatherScatterFifos(t *testing.T) {
	const n = 4
	for _, f := range []Func{AllGather, ReduceScatter} {
		p := Plan{Func: f, Algo: NVLS, Proto: Simple, NRanks: n, NNodes: 1, Count: 4 << 20, DataType: Float32, NChannels: 2}
		s, err := Compile(p)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		wide := 0
		for _, pr := range s.Programs {
			for _, st := range pr.Steps {
				for _, x := range st.Send {
					cn := s.Conns[x.Conn]
					window := NCCLSteps
					if (f == AllGather && cn.From >= n) || (f == ReduceScatter && cn.From < n) {
						window = NCCLSteps * n
					}
					want := int(x.Seq) - window
					if want < 0 {
						want = -1
					}
					if int(x.CreditSeq) != want {
						t.Fatalf("%v: message %d (%d→%d) waits for %d, want %d", f, x.Seq, cn.From, cn.To, x.CreditSeq, want)
					}
					if window > NCCLSteps && int(x.Seq) >= window {
						wide++
					}
				}
			}
		}
		if wide == 0 {
			t.Errorf("%v: no message past a per-head window (call too small for the test)", f)
		}
	}
}
