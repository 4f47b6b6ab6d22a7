package perf

import (
	"fmt"
	"net"
	"strconv"
)

// Launch is one process's place in a job started by a launcher.
type Launch struct {
	Launcher  string // "torchrun", "mpirun" (Open MPI), "srun" (Slurm), "runccl"
	Rank      int
	Size      int
	LocalRank int
	// Addr is the bootstrap root's address ("host:port"): rank 0 starts the root there.
	Addr string
	// ID is a hex unique id (runccl's own children), instead of Addr.
	ID string
}

// DetectLaunch reads the launcher's environment. The bootstrap address comes from SIMCCL_COMM_ID
// ("host:port", like NCCL_COMM_ID) when set, else MASTER_ADDR and MASTER_PORT+1 (MASTER_PORT itself
// belongs to torchrun's own store). ok is false when no launcher variables are present.
func DetectLaunch(getenv func(string) string) (l Launch, ok bool, err error) {
	num := func(name string) (int, error) {
		v, err := strconv.Atoi(getenv(name))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("launcher variable %s=%q is not a non-negative integer", name, getenv(name))
		}
		return v, nil
	}
	type vars struct{ launcher, rank, size, local string }
	for _, v := range []vars{
		{"runccl", "RUNCCL_RANK", "RUNCCL_NRANKS", "RUNCCL_RANK"},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
		{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	} {
		if getenv(v.rank) == "" || getenv(v.size) == "" {
			continue
		}
		l.Launcher = v.launcher
		if l.Rank, err = num(v.rank); err != nil {
			return l, true, err
		}
		if l.Size, err = num(v.size); err != nil {
			return l, true, err
		}
		if l.Size == 0 || l.Rank >= l.Size {
			return l, true, fmt.Errorf("%s: rank %d of %d ranks", v.launcher, l.Rank, l.Size)
		}
		if getenv(v.local) != "" {
			if l.LocalRank, err = num(v.local); err != nil {
				return l, true, err
			}
		}
		break
	}
	if l.Launcher == "" {
		return l, false, nil
	}
	if l.Launcher == "runccl" {
		l.ID = getenv("RUNCCL_ID")
		if l.ID == "" {
			return l, true, fmt.Errorf("runccl child without RUNCCL_ID")
		}
		return l, true, nil
	}
	if a := getenv("SIMCCL_COMM_ID"); a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return l, true, fmt.Errorf("SIMCCL_COMM_ID=%q: want host:port", a)
		}
		l.Addr = a
		return l, true, nil
	}
	host, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	if host == "" || port == "" {
		return l, true, fmt.Errorf("%s rank %d: set SIMCCL_COMM_ID=host:port (or MASTER_ADDR and MASTER_PORT) for the bootstrap root", l.Launcher, l.Rank)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p >= 65535 {
		return l, true, fmt.Errorf("MASTER_PORT=%q is not a port", port)
	}
	l.Addr = net.JoinHostPort(host, strconv.Itoa(p+1))
	return l, true, nil
}
