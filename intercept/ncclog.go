package intercept

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/simccl/simccl/internal/input"
)

// collLine matches the per-call line NCCL prints with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS
// including COLL (enqueue.cc, stable from 2.x to 2.28.9):
//
//	host:pid:tid [dev] NCCL INFO AllReduce: opCount 0 sendbuff 0x… recvbuff 0x… count 2 datatype 7 op 0 root 0 comm 0x… [nranks=2] stream 0x…
//
// opCount is hexadecimal; "[nranks=N]" appears from 2.4 on; stream may print "(nil)". For
// Send/Recv the root field holds the peer.
var collLine = regexp.MustCompile(`([^\s:]+):(\d+):(\d+) \[(\d+)\] NCCL INFO ([A-Za-z]+): opCount ([0-9a-fA-Fx]+) sendbuff (\S+) recvbuff (\S+) count (\d+) datatype (-?\d+) op (-?\d+) root (-?\d+) comm (\S+)(?: \[nranks=(\d+)\])? stream (\S+)`)

// logOps maps NCCL's opName spellings in COLL lines to the trace's ops.
var logOps = map[string]string{
	"AllReduce": OpAllReduce, "Broadcast": OpBroadcast, "Bcast": OpBroadcast, "Reduce": OpReduce,
	"AllGather": OpAllGather, "ReduceScatter": OpReduceScatter, "Send": OpSend, "Recv": OpRecv,
	"AlltoAll": OpAllToAll, "AllToAll": OpAllToAll,
}

// commInitLine matches the line NCCL prints when a communicator is ready (init.cc):
// "comm 0x… rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId … commId 0x… - Init COMPLETE". It gives the
// caller's rank and a commId equal on every rank (2.12+), which names the communicator.
var commInitLine = regexp.MustCompile(`comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) (?:.*?commId (0x[0-9a-fA-F]+))?.*Init COMPLETE`)

// maxLogLine bounds the lines ParseLog matches: NCCL's COLL and init lines are about 200 bytes.
const maxLogLine = 4096

// maxCommInits bounds the communicator-init lines of one log (a process creates a few
// communicators per parallel group, not thousands).
const maxCommInits = 1 << 16

// initMatch matches a communicator-init line (commInitLine), only run when the line holds
// "Init COMPLETE".
func initMatch(isInit bool, line string) []string {
	if !isInit || !strings.Contains(line, " NCCL INFO ") {
		return nil
	}
	return commInitLine.FindStringSubmatch(line)
}

// LogStats counts what ParseLog read.
type LogStats struct {
	Lines, Calls, Skipped int
	// Version is the release the log's first "NCCL version 2.28.9+cuda13.0" line names (init.cc
	// prints it once per process with NCCL_DEBUG=INFO or VERSION): "2.28.9", or "" when the log has none.
	Version string
}

// versionLine matches NCCL's version line; the release is its first group.
var versionLine = regexp.MustCompile(`NCCL INFO NCCL version (\d+\.\d+\.\d+)`)

// ParseLog reads an NCCL INFO log (any subsystems; only COLL lines and communicator-init lines are
// used) into trace records, one per COLL line, in log order. name is used in errors. Pass the
// logs of all ranks (one file per process, NCCL_DEBUG_FILE=…%p) to replay them together.
//
// The log does not say the caller's rank in COLL lines: it comes from the communicator's
// "Init COMPLETE" line when the log has it (NCCL_DEBUG_SUBSYS=INIT,COLL), else the device index
// of the line ("[dev]") is taken as the rank. The communicator id is NCCL's commId when known,
// else "log<k>.n<nranks>" for the k-th communicator seen on the line's device in its process. Group membership is not printed by NCCL: records from
// a log have group 0.
func ParseLog(r io.Reader, name string) ([]Record, LogStats, error) {
	type commKey struct {
		pid  int
		addr string
	}
	type commMeta struct {
		rank, nranks int
		id           string
	}
	comms := map[commKey]commMeta{}
	anon := map[commKey]string{}
	perDev := map[[2]int]int{}
	var out []Record
	var st LogStats
	sc := input.NewScanner(r, name)
	inits := 0
	for sc.Scan() {
		st.Lines++
		// Cheap tests first: the regular expressions run only on short lines that hold their
		// fixed words, and communicator-init lines are bounded as calls are, so that a 64 MiB log
		// of lines that nearly match costs a scan, not millions of matches.
		raw := sc.Bytes()
		if st.Version == "" && len(raw) <= maxLogLine && bytes.Contains(raw, []byte("NCCL version ")) {
			if m := versionLine.FindSubmatch(raw); m != nil {
				st.Version = string(m[1])
			}
		}
		isInit, isColl := bytes.Contains(raw, []byte("Init COMPLETE")), bytes.Contains(raw, []byte(": opCount "))
		if (!isInit && !isColl) || !bytes.Contains(raw, []byte("NCCL INFO")) {
			continue
		}
		if len(raw) > maxLogLine {
			if isColl {
				return nil, st, fmt.Errorf("%w: %s:%d: unrecognised COLL line of %d bytes", ErrTrace, name, st.Lines, len(raw))
			}
			continue
		}
		line := string(raw)
		if m := initMatch(isInit, line); m != nil {
			if inits++; inits > maxCommInits {
				return nil, st, fmt.Errorf("%w: %s:%d: more than %d communicator-init lines", ErrTrace, name, st.Lines, maxCommInits)
			}
			pid := 0
			if f := strings.SplitN(line, ":", 3); len(f) == 3 {
				pid, _ = strconv.Atoi(f[1])
			}
			rank, _ := strconv.Atoi(m[2])
			n, _ := strconv.Atoi(m[3])
			if m[4] != "" {
				comms[commKey{pid, m[1]}] = commMeta{rank: rank, nranks: n, id: "commId:" + m[4]}
			}
			continue
		}
		if !isColl {
			continue
		}
		m := collLine.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, ": opCount ") {
				return nil, st, fmt.Errorf("%w: %s:%d: unrecognised COLL line %q", ErrTrace, name, st.Lines, clip(line))
			}
			continue
		}
		op, ok := logOps[m[5]]
		if !ok {
			st.Skipped++
			continue
		}
		num := func(s, what string, bits int) (int64, error) {
			v, err := strconv.ParseInt(s, 10, bits)
			if err != nil {
				return 0, fmt.Errorf("%w: %s:%d: %s %q: %v", ErrTrace, name, st.Lines, what, s, err)
			}
			return v, nil
		}
		pid, err := num(m[2], "pid", 32)
		if err != nil {
			return nil, st, err
		}
		dev, err := num(m[4], "device", 32)
		if err != nil {
			return nil, st, err
		}
		count, err := num(m[9], "count", 64)
		if err != nil {
			return nil, st, err
		}
		dt, err := num(m[10], "datatype", 32)
		if err != nil {
			return nil, st, err
		}
		redop, err := num(m[11], "op", 32)
		if err != nil {
			return nil, st, err
		}
		root, err := num(m[12], "root", 32)
		if err != nil {
			return nil, st, err
		}
		opCount, err := strconv.ParseUint(strings.TrimPrefix(m[6], "0x"), 16, 64)
		if err != nil {
			return nil, st, fmt.Errorf("%w: %s:%d: opCount %q: %v", ErrTrace, name, st.Lines, m[6], err)
		}
		nranks := 0
		if m[14] != "" {
			v, err := num(m[14], "nranks", 32)
			if err != nil {
				return nil, st, err
			}
			nranks = int(v)
		}
		meta, known := comms[commKey{int(pid), m[13]}]
		rank := int(dev)
		id, seen := anon[commKey{int(pid), m[13]}]
		if !seen {
			// Named by its order of first appearance among the communicators of its device in
			// this process, and its size: the other ranks of a symmetric program (other
			// processes, or other devices of a single-process program) reproduce it.
			dk := [2]int{int(pid), int(dev)}
			perDev[dk]++
			id = fmt.Sprintf("log%d.n%s", perDev[dk], m[14])
			anon[commKey{int(pid), m[13]}] = id
		}
		if known {
			rank, id = meta.rank, meta.id
			if nranks == 0 {
				nranks = meta.nranks
			}
		}
		if nranks == 0 {
			return nil, st, fmt.Errorf("%w: %s:%d: no [nranks=…] on the line and no Init COMPLETE line for comm %s", ErrTrace, name, st.Lines, m[13])
		}
		if rank >= nranks {
			// The device index is not a rank of this communicator (one GPU per process).
			rank = 0
		}
		rec := Record{Seq: int64(len(out)), Rank: rank, NRanks: nranks, Comm: id, Op: op, Count: count,
			Dtype: DtypeName(int(dt)), Root: -1, PID: int(pid), Host: m[1], Mode: "log"}
		_ = opCount // NCCL's per-communicator launch counter; not needed to order calls of one log
		switch op {
		case OpAllReduce, OpReduce, OpReduceScatter:
			rec.RedOp = RedOpName(int(redop))
		}
		switch op {
		case OpBroadcast, OpReduce, OpSend, OpRecv:
			rec.Root = int(root)
		}
		if m[15] != "(nil)" {
			rec.Stream = m[15]
		}
		if err := checkRecord(&rec); err != nil {
			return nil, st, fmt.Errorf("%w: %s:%d: %v", ErrTrace, name, st.Lines, err)
		}
		if len(out) == MaxRecords {
			return nil, st, fmt.Errorf("%w: %s:%d: more than %d records", ErrTrace, name, st.Lines, MaxRecords)
		}
		out = append(out, rec)
		st.Calls++
	}
	if err := sc.Err(); err != nil {
		return nil, st, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	return out, st, nil
}

// ParseLogFile reads one NCCL log file.
func ParseLogFile(path string) ([]Record, LogStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, LogStats{}, err
	}
	defer f.Close()
	return ParseLog(f, path)
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
