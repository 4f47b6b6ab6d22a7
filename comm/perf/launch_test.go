package perf

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/simccl/simccl/realnet"
)

// env is a getenv over the pairs kv.
func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDetectLaunch(t *testing.T) {
	cases := []struct {
		env     func(string) string
		ok      bool
		want    Launch
		wantErr string
	}{
		{env(), false, Launch{}, ""},
		{env("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "3", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500"), true,
			Launch{Launcher: "torchrun", RankVar: "RANK", SizeVar: "WORLD_SIZE", Rank: 3, Size: 8, LocalRank: 3, Addr: "10.0.0.1:29501"}, ""},
		{env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1", "SIMCCL_COMM_ID", "h:5000"), true,
			Launch{Launcher: "mpirun", RankVar: "OMPI_COMM_WORLD_RANK", SizeVar: "OMPI_COMM_WORLD_SIZE", Rank: 1, Size: 2, LocalRank: 1, Addr: "h:5000"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0", "SIMCCL_COMM_ID", "node1:7000"), true,
			Launch{Launcher: "srun", RankVar: "SLURM_PROCID", SizeVar: "SLURM_NTASKS", Rank: 0, Size: 4, Addr: "node1:7000"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4"), true, Launch{}, "SIMCCL_COMM_ID"},
		{env("RANK", "9", "WORLD_SIZE", "8", "MASTER_ADDR", "a", "MASTER_PORT", "1"), true, Launch{}, "rank 9 of 8"},
		{env("RANK", "x", "WORLD_SIZE", "8"), true, Launch{}, "RANK"},
		{env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "http"), true, Launch{}, "MASTER_PORT"},
		{env("RANK", "1", "WORLD_SIZE", "2", "SIMCCL_COMM_ID", "h:5000#s3cret", "TORCHELASTIC_RUN_ID", "r7"), true,
			Launch{Launcher: "torchrun", RankVar: "RANK", SizeVar: "WORLD_SIZE", Rank: 1, Size: 2, Addr: "h:5000", Secret: "s3cret", Job: "torchelastic r7"}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_JOB_ID", "42", "SLURM_STEP_ID", "1", "SIMCCL_COMM_ID", "n:7000", "HOME", "/home/u"), true,
			Launch{Launcher: "srun", RankVar: "SLURM_PROCID", SizeVar: "SLURM_NTASKS", Size: 4, Addr: "n:7000", SecretFile: "/home/u/.config/simccl/secret", Job: "slurm 42.1"}, ""},
		{env("RANK", "0", "WORLD_SIZE", "2", "SIMCCL_COMM_ID", "h:1#"), true, Launch{}, "empty secret"},
		{env("RANK", "0", "WORLD_SIZE", "2000000", "SIMCCL_COMM_ID", "h:1#s"), true, Launch{}, "at most 1048576"},
	}
	for i, c := range cases {
		l, ok, err := DetectLaunch(c.env)
		if ok != c.ok {
			t.Errorf("case %d: ok %v", i, ok)
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("case %d: error %v, want one naming %s", i, err, c.wantErr)
			}
			continue
		}
		if err != nil || l != c.want {
			t.Errorf("case %d: %+v, %v; want %+v", i, l, err, c.want)
		}
	}
}

// Every rank of a launcher job derives one id from its environment; another secret, address, size
// or (with a secret file) job gives another id; no secret at all is an error.
func TestLaunchUniqueID(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	base := Launch{Launcher: "torchrun", Size: 4, Addr: "10.0.0.1:29501", SecretFile: file, Job: "torchelastic a"}
	id := func(l Launch) realnet.UniqueID {
		t.Helper()
		v, err := l.UniqueID()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ref := id(base)
	r3 := base
	r3.Rank = 3
	if id(r3) != ref {
		t.Errorf("ranks 0 and 3 derive different ids")
	}
	for _, change := range []func(*Launch){
		func(l *Launch) { l.Job = "torchelastic b" },
		func(l *Launch) { l.Size = 8 },
		func(l *Launch) { l.Addr = "10.0.0.1:29601" },
		func(l *Launch) { l.Secret = "explicit" },
	} {
		l := base
		change(&l)
		if id(l).Secret() == ref.Secret() {
			t.Errorf("%+v: the same secret as %+v", l, base)
		}
	}
	if _, err := (Launch{Launcher: "mpirun", Size: 2, Addr: "h:1"}).UniqueID(); err == nil || !strings.Contains(err.Error(), "SIMCCL_COMM_ID") {
		t.Errorf("no secret: %v", err)
	}
}

// LauncherRank reads the rank variables alone: a Slurm batch script (SLURM_PROCID and
// SLURM_NTASKS, no bootstrap address) is rank 0 of its tasks without the error DetectLaunch gives
// for the missing address; the first launcher present wins; a malformed variable is named.
func TestLauncherRank(t *testing.T) {
	cases := []struct {
		env     func(string) string
		ok      bool
		want    Launch
		wantErr string
	}{
		{env(), false, Launch{}, ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0"), true,
			Launch{Launcher: "srun", RankVar: "SLURM_PROCID", SizeVar: "SLURM_NTASKS", Size: 4}, ""},
		{env("RANK", "2", "WORLD_SIZE", "4", "SLURM_PROCID", "0", "SLURM_NTASKS", "1"), true,
			Launch{Launcher: "torchrun", RankVar: "RANK", SizeVar: "WORLD_SIZE", Rank: 2, Size: 4}, ""},
		{env("RUNCCL_RANK", "1", "RUNCCL_NRANKS", "2", "RANK", "0", "WORLD_SIZE", "8"), true,
			Launch{Launcher: "runccl", RankVar: "RUNCCL_RANK", SizeVar: "RUNCCL_NRANKS", Rank: 1, Size: 2, LocalRank: 1}, ""},
		{env("PMI_RANK", "1", "PMI_SIZE", "x"), true, Launch{}, "PMI_SIZE"},
		{env("SLURM_PROCID", "4", "SLURM_NTASKS", "4"), true, Launch{}, "rank 4 of 4"},
	}
	for i, c := range cases {
		l, ok, err := LauncherRank(c.env)
		if ok != c.ok {
			t.Errorf("case %d: ok %v", i, ok)
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("case %d: error %v, want one naming %s", i, err, c.wantErr)
			}
			continue
		}
		if err != nil || l != c.want {
			t.Errorf("case %d: %+v, %v; want %+v", i, l, err, c.want)
		}
	}
}
