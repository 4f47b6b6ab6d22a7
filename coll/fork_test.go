package coll

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// An NVLSTree schedule compiled with the upper half of its channels on a second builder (fork,
// join) is the one a single pass compiles: the same programs, connections and numbers.
func TestCompileForkSame(t *testing.T) {
	base := nvlsTreeBenchPlan
	odd := base
	odd.NChannels, odd.Count = 3, base.Count+12344
	lo := base
	lo.ChannelLo, lo.NChannels, lo.Count = 2, 4, base.Count/3
	star := Plan{Func: AllReduce, Algo: NVLSTree, Proto: Simple, NRanks: 8, NNodes: 4, Count: 1 << 16, NChannels: 2,
		NodeTrees: starTrees, DataType: Float32}
	ring := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 128, NNodes: 16, NChannels: 2, Count: 1 << 16, DataType: Float32}
	for i, plans := range [][]Plan{{base}, {odd}, {lo}, {star}, {ring, base}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var got []*Schedule
			for _, fork := range []bool{false, true} {
				old := forkChannels
				forkChannels = func(int64) bool { return fork }
				s, err := Compile(plans...)
				forkChannels = old
				require.NoError(t, err)
				got = append(got, s)
			}
			require.Equal(t, got[0], got[1])
		})
	}
}

// NewIndex in parts (IndexChecker), its programs checked by two goroutines at once in two
// ranges, gives NewIndex's index, and on a spoiled schedule NewIndex's error: the lower range's
// first error, else the upper's, else Index's.
func TestIndexCheckerParts(t *testing.T) {
	for name, spoil := range map[string]func(s *Schedule){
		"none":     func(*Schedule) {},
		"bytes":    func(s *Schedule) { s.Programs[len(s.Programs)-1].Steps[3].Bytes += 4 },
		"sequence": func(s *Schedule) { firstRecv(s, 5).Seq = 1 << 20 },
		"used twice": func(s *Schedule) {
			// The second send of a connection of a program of the upper half takes the first's
			// sequence number.
			for pi := len(s.Programs) / 2; pi < len(s.Programs); pi++ {
				first := map[int]int{}
				for i := range s.Programs[pi].Steps {
					for k, x := range s.Programs[pi].Steps[i].Send {
						if seq, ok := first[int(x.Conn)]; ok {
							s.Programs[pi].Steps[i].Send[k].Seq = int32(seq)
							return
						}
						first[int(x.Conn)] = int(x.Seq)
					}
				}
			}
			panic("no connection with two sends")
		},
		"both halves":    func(s *Schedule) { s.Programs[3].Steps[0].Index = 9; s.Programs[len(s.Programs)-2].Steps[0].Index = 9 },
		"program's rank": func(s *Schedule) { s.Programs[len(s.Programs)/2+1].Rank = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Compile(nvlsTreeBenchPlan)
			require.NoError(t, err)
			spoil(s)
			want, wantErr := NewIndex(s)
			c, err := NewIndexChecker(s)
			require.NoError(t, err)
			half := len(s.Programs) / 2
			errs := make([]error, 2)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for pi := half; pi < len(s.Programs) && errs[1] == nil; pi++ {
					errs[1] = c.CheckProgram(pi)
				}
			}()
			for pi := 0; pi < half && errs[0] == nil; pi++ {
				errs[0] = c.CheckProgram(pi)
			}
			<-done
			var got *Index
			switch {
			case errs[0] != nil:
				err = errs[0]
			case errs[1] != nil:
				err = errs[1]
			default:
				got, err = c.Index()
			}
			if wantErr != nil {
				require.EqualError(t, err, wantErr.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// firstRecv is the first received transfer of the programs from lo on.
func firstRecv(s *Schedule, lo int) *Xfer {
	for pi := lo; pi < len(s.Programs); pi++ {
		for i := range s.Programs[pi].Steps {
			if st := &s.Programs[pi].Steps[i]; len(st.Recv) > 0 {
				return &st.Recv[0]
			}
		}
	}
	panic("no receive")
}
