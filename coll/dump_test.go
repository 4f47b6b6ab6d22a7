package coll

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestJSONRoundTrip(t *testing.T) {
	s, err := Compile(
		Plan{Func: AllReduce, Algo: Tree, Proto: LL, NRanks: 4, Count: 1000, DataType: Bfloat16, Op: Avg, NChannels: 2},
		Plan{Func: Broadcast, Algo: Ring, Proto: Simple, NRanks: 4, Count: 77, DataType: Int8, Root: 3},
		Plan{Func: AllReduce, Algo: NVLS, Proto: Simple, NRanks: 4, Count: 500, DataType: Float32},
		Plan{Func: AllReduce, Algo: CollNetChain, Proto: Simple, NRanks: 4, NNodes: 2, Count: 500, DataType: Float32},
		Plan{Func: SendRecv, Algo: Tree, Proto: Simple, NRanks: 4, Count: 64, DataType: Float32, NChannels: 2},
		Plan{Func: AllToAll, Proto: LL, NRanks: 4, Count: 16, DataType: Float32, NChannels: 2},
	)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Switches) != 2 || s.Switches[0].Kind != SwitchNVLS || s.Switches[1].Kind != SwitchCollNet {
		t.Errorf("switches %+v", s.Switches)
	}
	// Point-to-point ops are named P2P, as NCCL's rows (and simccl's) name them, whatever the plan's algorithm.
	for _, key := range []string{`"prim": "RecvReduceCopySend"`, `"func": "AllReduce"`, `"type": "bfloat16"`, `"buf": "recv"`, `"kind": "collnet"`, `"prim": "RecvReduceForward"`, `"algo": "P2P"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Error("schedule changed through JSON")
	}
	if _, err := ReadJSON(strings.NewReader(`{"nranks": 2, "nchannels": 1, "programs": []}`)); err == nil {
		t.Error("a schedule without programs was accepted")
	}
}

func TestWriteTextAndSummary(t *testing.T) {
	p := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 4, Count: 1 << 20, DataType: Float32, NChannels: 2}
	s, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := Summarize(s)
	// 4 MiB over 4 ranks: each rank sends 2·3/4 of the buffer.
	for _, r := range sum.Ranks {
		if r.SentBytes != 6<<20 {
			t.Errorf("rank %d: %d bytes sent, want %d", r.Rank, r.SentBytes, 6<<20)
		}
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, s, DumpOptions{Steps: true, Ranks: []int{1}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"op 0: AllReduce Ring Simple", "rank 1 channel 0", "RecvReduceCopySend", "postop", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rank 2 channel") {
		t.Error("dump shows rank 2 though only rank 1 was asked for")
	}
}

// FuzzReadJSON: no input makes ReadJSON (and so Validate) panic; whatever it accepts executes
// without panicking either.
func FuzzReadJSON(f *testing.F) {
	for _, p := range []Plan{
		{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 3, Count: 10, DataType: Float32},
		{Func: AllReduce, Algo: NVLS, Proto: Simple, NRanks: 2, Count: 10, DataType: Float32},
		{Func: SendRecv, Proto: LL, NRanks: 2, Count: 3, DataType: Int8},
	} {
		s, err := Compile(p)
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, s); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte(`{"nranks":1,"nchannels":1,"conns":[{"id":0,"from":0,"to":1,"messages":-1}],"programs":[{"rank":0,"channel":0,"steps":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		bufs := make([][]Buffers, len(s.Ops))
		for o, op := range s.Ops {
			elt := int64(op.DataType.Size())
			if op.SendBytes/elt > 1<<16 || op.RecvBytes/elt > 1<<16 || s.NRanks > 64 {
				return
			}
			bufs[o] = make([]Buffers, s.NRanks)
			for r := range bufs[o] {
				bufs[o][r] = Buffers{Send: make([]float64, op.SendBytes/elt), Recv: make([]float64, op.RecvBytes/elt)}
			}
		}
		_, _ = Execute(s, bufs, ExecOptions{})
	})
}
