package main

import (
	"fmt"
	"io"

	"github.com/simccl/simccl/internal/buildinfo"
)

// versionString is set at build time: go build -ldflags "-X main.versionString=v0.9.0". When it is
// empty, version() reads the module version and VCS revision Go records in the binary.
var versionString string

// version is runccl's version (buildinfo.Version).
func version() string { return buildinfo.Version(versionString) }

const helpHead = `runccl runs NCCL's collectives for real and prints nccl-tests' table: on CPUs (goroutine ranks,
one process per rank, or one rank per process under a launcher) or on this machine's GPUs.

Usage:
  runccl [COLLECTIVE] [flags]        a sweep, as all_reduce_perf & co run it
  runccl replay [flags] TRACE…       run a captured workload trace for real (runccl help replay)
  runccl help [replay]               this help, or replay's
  runccl completion bash|zsh|fish    a shell's completion script (flags, collectives, types)

COLLECTIVE is one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv
(also spelled all_reduce_perf or allreduce), a comma-separated list, or all; all_reduce by default.
It may also come from --collective, or from the program's name: a link to runccl named
all_gather_perf runs all_gather, so that nccl-tests' command lines run unchanged.

nccl-tests flags (the same letters, long names, defaults and meaning as nccl-tests' src/common.cu):
`

const helpMid = `
  -c/--check is nccl-tests' check: 1 by default, 0 for none. Before, runccl's -c named the
  collective; -c NAME still does, with a note on stderr, until ` + deprecatedUntil + `.
  Sizes step by -i bytes unless -f is above 1 (giving both is an error).
  Not supported, accepted only at their default: -t other than 1 (runccl has no threads: -g
  gives the ranks), -y/--stream_null, -S/--report_timestamps, -J/--output_file, -R/--local_register,
  -x/--cta_policy, -D/--device_implementation, -V/--device_cta_count, -M/--memory. With --backend
  cuda also -m above 1, -z 1, -C 1 and -c above 1.

runccl flags:
`

const helpTail = `
NCCL settings: NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE,
NCCL_TOPO_FILE (cuda) and the others planner.SettingsFromEnv reads steer the plans, as in NCCL;
the flags above override the first four.

Launchers: under torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_RANK,
OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, or PMI_RANK/PMI_SIZE) or Slurm's srun
(SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) every process is one rank (-g 1, as nccl-tests under
mpirun) and only rank 0 prints. The bootstrap root is started by rank 0 at
SIMCCL_COMM_ID=host:port[#SECRET], else at MASTER_ADDR:(MASTER_PORT+1); the job's secret is the
#SECRET part or the user's secret file (SIMCCL_SECRET_FILE, default ~/.config/simccl/secret).
An explicit -g N above 1 wins over such variables left in rank 0's environment (a Slurm batch
script or allocation): N goroutine ranks run here, with a note on stderr; on another rank it is
an error.

Output: nccl-tests' table, one line per size as it finishes (a run killed half way keeps its
lines), with the plan the engine ran (algo, proto, nch) after nccl-tests' columns; --json writes
one JSON document (a header, the rows, the sums). Exit status: 0, 1 on a failure or wrong
elements, 2 on bad usage, as simccl's (docs/cli.md). See cmd/runccl/README.md.

Examples:
  runccl all_reduce_perf -b 8 -e 128M -f 2 -g 4
  runccl --collective all -b 8 -e 1M -f 4 -g 4 -c 1
  torchrun --nproc-per-node 8 runccl all_reduce_perf -b 8 -e 64M -f 2 -g 1
  runccl --backend cuda -g 2 -b 8 -e 1G -f 2 -G 10
`

// writeHelp prints runccl's help.
func writeHelp(w io.Writer) {
	s := newFlagSet()
	fmt.Fprint(w, helpHead)
	fmt.Fprint(w, s.nt.FlagUsagesWrapped(100))
	fmt.Fprint(w, helpMid)
	fmt.Fprint(w, s.own.FlagUsagesWrapped(100))
	fmt.Fprint(w, helpTail)
}
