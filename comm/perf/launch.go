package perf

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/simccl/simccl/realnet"
)

// Launch is one process's place in a job started by a launcher.
type Launch struct {
	Launcher string // "torchrun", "mpirun" (Open MPI), "srun" (Slurm), "runccl"
	// RankVar and SizeVar name the variables the rank and size were read from (SLURM_PROCID, …).
	RankVar, SizeVar string
	Rank             int
	Size             int
	LocalRank        int
	// Addr is the bootstrap root's address ("host:port"): rank 0 starts the root there.
	Addr string
	// Secret is the job's secret as the user gave it (SIMCCL_COMM_ID=host:port#SECRET); "" = none,
	// the secret then comes from SecretFile.
	Secret string
	// SecretFile holds this user's secret when Secret is "": SIMCCL_SECRET_FILE, else
	// $XDG_CONFIG_HOME/simccl/secret, else $HOME/.config/simccl/secret ("" when none can be named).
	// It is created (random, mode 0600) on first use; ranks on several hosts need the same file.
	SecretFile string
	// Job names this run as the launcher does (TORCHELASTIC_RUN_ID, SLURM_JOB_ID.SLURM_STEP_ID,
	// OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE; "" = none): with a secret file, jobs of one user
	// that differ in it, in Addr or in Size get different secrets.
	Job string
	// ID is a hex unique id (runccl's own children), instead of Addr.
	ID string
}

// UniqueID returns the id of a launcher job (not of runccl's children, which are handed theirs):
// the root at Addr and a secret every rank of the job derives alike, from Secret or else from the
// user's SecretFile (created when absent), bound to the address and size (and, from a file, to the
// launcher and Job).
func (l Launch) UniqueID() (realnet.UniqueID, error) {
	var secret realnet.Secret
	bind := [][]byte{[]byte(l.Addr), []byte(strconv.Itoa(l.Size))}
	switch {
	case l.Secret != "":
		secret = realnet.SecretFromString(l.Secret)
	case l.SecretFile != "":
		var err error
		if secret, err = realnet.UserSecret(l.SecretFile); err != nil {
			return realnet.UniqueID{}, fmt.Errorf("%s rank %d: the job's secret: %w (or give one: SIMCCL_COMM_ID=host:port#SECRET)", l.Launcher, l.Rank, err)
		}
		bind = append(bind, []byte(l.Launcher), []byte(l.Job))
	default:
		return realnet.UniqueID{}, fmt.Errorf("%s rank %d: no secret for the job: set SIMCCL_COMM_ID=host:port#SECRET (the same on every rank) or SIMCCL_SECRET_FILE", l.Launcher, l.Rank)
	}
	return realnet.UniqueIDFromAddr(l.Addr, secret.Derive("launch", bind...))
}

// LauncherRank reads only the launcher's rank variables (the first set present of runccl's own
// RUNCCL_RANK/RUNCCL_NRANKS, torchrun's RANK/WORLD_SIZE/LOCAL_RANK, Open MPI's
// OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID): the
// launcher, rank, size and local rank. ok is false when none is present; err names a malformed
// variable (Launcher and the variables read before it are then set).
func LauncherRank(getenv func(string) string) (l Launch, ok bool, err error) {
	num := func(name string) (int, error) {
		v, err := strconv.Atoi(getenv(name))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("launcher variable %s=%q is not a non-negative integer", name, getenv(name))
		}
		return v, nil
	}
	for _, v := range launcherVars {
		if getenv(v.rank) == "" || getenv(v.size) == "" {
			continue
		}
		l.Launcher, l.RankVar, l.SizeVar = v.launcher, v.rank, v.size
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
		return l, true, nil
	}
	return l, false, nil
}

// launcherVars are the launchers' variables, in the order LauncherRank tries them.
var launcherVars = []struct{ launcher, rank, size, local string }{
	{"runccl", "RUNCCL_RANK", "RUNCCL_NRANKS", "RUNCCL_RANK"},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
	{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
	{"mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
	{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
}

// DetectLaunch reads the launcher's environment. The bootstrap address comes from SIMCCL_COMM_ID
// ("host:port" like NCCL_COMM_ID, or "host:port#SECRET" with the job's secret) when set, else
// MASTER_ADDR and MASTER_PORT+1 (MASTER_PORT itself belongs to torchrun's own store); the secret
// (Launch.UniqueID) from SIMCCL_COMM_ID or a secret file. ok is false when no launcher variables are
// present.
func DetectLaunch(getenv func(string) string) (l Launch, ok bool, err error) {
	if l, ok, err = LauncherRank(getenv); !ok || err != nil {
		return l, ok, err
	}
	if l.Launcher == "runccl" {
		l.ID = getenv("RUNCCL_ID")
		if l.ID == "" {
			return l, true, fmt.Errorf("runccl child without RUNCCL_ID")
		}
		return l, true, nil
	}
	if l.Size > realnet.MaxRanks {
		return l, true, fmt.Errorf("%s: %d ranks: at most %d", l.Launcher, l.Size, realnet.MaxRanks)
	}
	l.SecretFile = getenv("SIMCCL_SECRET_FILE")
	if l.SecretFile == "" {
		if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
			l.SecretFile = filepath.Join(d, "simccl", "secret")
		} else if h := getenv("HOME"); filepath.IsAbs(h) {
			l.SecretFile = filepath.Join(h, ".config", "simccl", "secret")
		}
	}
	switch {
	case getenv("TORCHELASTIC_RUN_ID") != "":
		l.Job = "torchelastic " + getenv("TORCHELASTIC_RUN_ID")
	case getenv("SLURM_JOB_ID") != "":
		l.Job = "slurm " + getenv("SLURM_JOB_ID") + "." + getenv("SLURM_STEP_ID")
	case getenv("OMPI_MCA_ess_base_jobid") != "":
		l.Job = "ompi " + getenv("OMPI_MCA_ess_base_jobid")
	case getenv("PMIX_NAMESPACE") != "":
		l.Job = "pmix " + getenv("PMIX_NAMESPACE")
	}
	if a := getenv("SIMCCL_COMM_ID"); a != "" {
		a, secret, hasSecret := strings.Cut(a, "#")
		if _, _, err := net.SplitHostPort(a); err != nil {
			return l, true, fmt.Errorf("SIMCCL_COMM_ID=%q: want host:port or host:port#SECRET", a)
		}
		if hasSecret && secret == "" {
			return l, true, fmt.Errorf("SIMCCL_COMM_ID: an empty secret after '#'")
		}
		l.Addr, l.Secret = a, secret
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
