package intercept

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/internal/input"
)

func call(seq int64, rank int, op string, count int64, peer int) Record {
	r := Record{Seq: seq, Rank: rank, NRanks: 2, Comm: "c", Op: op, Count: count, Dtype: "float", Root: peer}
	if op == OpAllReduce {
		r.RedOp, r.Root = "sum", -1
	}
	return r
}

// TestCheckTraces: finding 10 of the input-bounds issue. simccl replay simulated traces that
// runccl replay refuses; both now refuse them through CheckTraces, naming the file and record.
func TestCheckTraces(t *testing.T) {
	good := func() []TraceFile {
		return []TraceFile{
			{Name: "r0.jsonl", Records: []Record{call(0, 0, OpAllReduce, 8, -1), call(1, 0, OpSend, 4, 1)}},
			{Name: "r1.jsonl", Records: []Record{call(0, 1, OpAllReduce, 8, -1), call(1, 1, OpRecv, 4, 0)}},
		}
	}
	require.NoError(t, CheckTraces(good(), CheckOptions{}))
	for _, tc := range []struct {
		name string
		edit func(fs []TraceFile) []TraceFile
		want string
	}{
		{"counts disagree", func(fs []TraceFile) []TraceFile { fs[1].Records[0].Count = 16; return fs },
			"collective 0 of communicator c differs between ranks: r0.jsonl: seq 0 (AllReduce 8 float sum, comm c rank 0 of 2) against r1.jsonl: seq 0 (AllReduce 16 float sum"},
		{"missing rank", func(fs []TraceFile) []TraceFile { return fs[:1] },
			"communicator c has 2 ranks but no trace holds rank 1 (missing rank file?); found rank 0 in r0.jsonl"},
		{"send without recv", func(fs []TraceFile) []TraceFile { fs[1].Records = fs[1].Records[:1]; return fs },
			"r0.jsonl: seq 1 (Send 4 float to 1, comm c rank 0 of 2) has no matching Recv on rank 1"},
		{"unclosed group", func(fs []TraceFile) []TraceFile {
			for i := range fs {
				fs[i].Records[1].Group, fs[i].Records[1].GID = 1, 1
				fs[i].Records = append(fs[i].Records, call(2, i, OpAllReduce, 8, -1), call(3, i, OpAllReduce, 8, -1))
				fs[i].Records[3].Group, fs[i].Records[3].GID = 1, 1
			}
			return fs
		}, "r0.jsonl: seq 3 (AllReduce 8 float sum, comm c rank 0 of 2): group 1 continues after other calls"},
		{"group depth without number", func(fs []TraceFile) []TraceFile { fs[0].Records[1].Group = 1; return fs },
			"r0.jsonl: seq 1 (Send 4 float to 1, comm c rank 0 of 2): group depth 1 with group number 0"},
		{"count 2^61", func(fs []TraceFile) []TraceFile {
			fs[0].Records[0].Count, fs[1].Records[0].Count = 1<<61, 1<<61
			return fs
		}, "r0.jsonl: seq 0 (AllReduce 2305843009213693952 float sum, comm c rank 0 of 2): 9.22e+18 bytes cannot be allocated or simulated (more than 1 TiB)"},
		{"unknown op", func(fs []TraceFile) []TraceFile { fs[0].Records[1].Op = "AllScatter"; return fs },
			`r0.jsonl: seq 1 (AllScatter, comm c rank 0 of 2): unknown op "AllScatter"`},
		{"two sizes", func(fs []TraceFile) []TraceFile { fs[1].Records[1].NRanks = 3; return fs },
			"communicator c has 2 ranks at r0.jsonl: seq 0"},
		{"rank in two files", func(fs []TraceFile) []TraceFile {
			for i := range fs[1].Records {
				fs[1].Records[i].Rank = 0
			}
			return fs
		}, "rank 0 of communicator c is in two traces"},
	} {
		err := CheckTraces(tc.edit(good()), CheckOptions{})
		require.ErrorIs(t, err, ErrTrace, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	// A virtual run (one process standing for every rank) may leave ranks out, for simccl replay
	// only; the ranks present must still agree.
	virt := func() []TraceFile {
		fs := good()
		for i := range fs {
			init := Record{Seq: -1, Rank: i, NRanks: 2, Comm: "c", Op: OpCommInit, Root: -1, Mode: "virtual"}
			fs[i].Records = append([]Record{init}, fs[i].Records...)
		}
		return fs[1:]
	}
	require.NoError(t, CheckTraces(virt(), CheckOptions{Virtual: true}))
	require.ErrorContains(t, CheckTraces(virt(), CheckOptions{}), "no trace holds rank 0")
	three := virt()
	three[0].Records = append(three[0].Records, call(2, 1, OpAllReduce, 8, -1))
	three = append(three, TraceFile{Name: "r2.jsonl", Records: []Record{{Seq: -1, Rank: 2, NRanks: 3, Comm: "c", Op: OpCommInit, Root: -1, Mode: "virtual"}}})
	require.ErrorContains(t, CheckTraces(three, CheckOptions{Virtual: true}), "communicator c has 2 ranks at")

	// The same count overflowed Record.Bytes in Launches (simccl replay printed the wrapped number).
	_, err := Launches([]Record{call(0, 0, OpAllReduce, 1<<61, -1)})
	require.ErrorContains(t, err, "cannot be allocated or simulated (more than 1 TiB)")
}

// TestReadTraceOrLogBounds: trace files and NCCL logs are read with internal/input's bounds; a
// line too long names the file and the line (it said "bufio.Scanner: token too long").
func TestReadTraceOrLogBounds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	long := write("long.jsonl", "# trace\n{"+strings.Repeat(" ", input.MaxLine)+"}\n")
	_, err := ReadTraceOrLog(long)
	require.ErrorIs(t, err, ErrTrace)
	require.ErrorIs(t, err, input.ErrTooLarge)
	require.ErrorContains(t, err, long+":2: input too large (a line longer than 1 MiB)")

	log := write("long.log", "host:1:1 [0] NCCL INFO hello\n"+strings.Repeat("x", input.MaxLine+1))
	_, err = ReadTraceOrLog(log)
	require.ErrorContains(t, err, log+":2: input too large (a line longer than 1 MiB)")

	none := write("none.log", "hello\nworld\n")
	_, err = ReadTraceOrLog(none)
	require.ErrorContains(t, err, none+": neither a trace (JSON lines) nor an NCCL log with COLL lines (2 lines read)")

	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err = ReadTraceOrLog("/dev/zero")
		require.ErrorIs(t, err, input.ErrTooLarge)
		require.ErrorContains(t, err, "/dev/zero: input too large (more than 64 MiB)")
	}
	_, err = ReadTraceOrLog(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestReadMeasuredBounds: a measured file (replay --measured) is read with internal/input's
// bounds and its calls counted as they are decoded.
func TestReadMeasuredBounds(t *testing.T) {
	dir := t.TempDir()
	many := filepath.Join(dir, "many.json")
	require.NoError(t, os.WriteFile(many, []byte(`{"rank":0,"calls":[`+strings.Repeat("{},", MaxMeasuredCalls)+`{}]}`), 0o644))
	_, err := ReadMeasured([]string{many})
	require.ErrorIs(t, err, ErrTrace)
	require.EqualError(t, err, "intercept: bad trace: "+many+": more than 262144 calls")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"rank":0,"calls":{}}`), 0o644))
	_, err = ReadMeasured([]string{bad})
	require.ErrorContains(t, err, bad+`: "calls" is not an array`)
}

// TestTraceRecordBounds: a trace of more than MaxRecords records is refused by a scan before any
// is decoded, and an NCCL log's lines that nearly match are bounded too.
func TestTraceRecordBounds(t *testing.T) {
	dir := t.TempDir()
	line := `{"seq":0,"rank":0,"nranks":1,"comm":"c","op":"AllReduce","count":8,"dtype":"float","root":-1,"group":0}` + "\n"
	many := filepath.Join(dir, "many.jsonl")
	require.NoError(t, os.WriteFile(many, []byte("# header\n\n"+strings.Repeat(line, MaxRecords+1)), 0o644))
	_, err := ReadTraceOrLog(many)
	require.EqualError(t, err, "intercept: bad trace: "+many+":262147: more than 262144 records")

	inits := filepath.Join(dir, "inits.log")
	initLine := "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n"
	require.NoError(t, os.WriteFile(inits, []byte(strings.Repeat(initLine, maxCommInits+1)), 0o644))
	_, err = ReadTraceOrLog(inits)
	require.EqualError(t, err, "intercept: bad trace: "+inits+":65537: more than 65536 communicator-init lines")

	long := filepath.Join(dir, "long.log")
	require.NoError(t, os.WriteFile(long, []byte("h:1:1 [0] NCCL INFO AllReduce: opCount 0 "+strings.Repeat("x", 5000)+"\n"), 0o644))
	_, err = ReadTraceOrLog(long)
	require.EqualError(t, err, "intercept: bad trace: "+long+":1: unrecognised COLL line of 5041 bytes")
}
