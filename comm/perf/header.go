package perf

// Header describes a run: what the text table prints above its first table and JSONWriter writes
// as "header". Keys are snake_case; nccl-tests' parameters keep the names of its long options
// (src/common.cu).
type Header struct {
	Program string `json:"program"` // "runccl"
	Version string `json:"version"`
	Backend string `json:"backend"` // "cpu" (package comm) or "cuda" (cuda/engine)
	NRanks  int    `json:"nranks"`
	// Transport is rank 0's transport to rank 1 (inproc, shm, tcp, cuda-p2p).
	Transport string `json:"transport"`
	// NCCLRelease is the NCCL release whose rules planned the calls; Machine the machine
	// description the plans were made on.
	NCCLRelease string `json:"nccl_release"`
	Machine     string `json:"machine"`
	// Collectives run, in order, as nccl-tests spells them (all_reduce, …).
	Collectives []string `json:"collectives"`
	Flags       Flags    `json:"flags"`
	Devices     []Device `json:"devices"`
	// Args is the command line (without the program).
	Args []string `json:"args"`
}

// Flags are the parameters of the run, named as nccl-tests' long options (src/common.cu) and,
// after them, runccl's own.
type Flags struct {
	NThreads      int     `json:"nthreads"`
	NGpus         int     `json:"ngpus"` // ranks in each process
	MinBytes      int64   `json:"minbytes"`
	MaxBytes      int64   `json:"maxbytes"`
	StepBytes     int64   `json:"stepbytes"`
	StepFactor    int64   `json:"stepfactor"` // 1: sizes step by StepBytes
	Iters         int     `json:"iters"`
	AggIters      int     `json:"agg_iters"`
	WarmupIters   int     `json:"warmup_iters"`
	RunCycles     int     `json:"run_cycles"` // 0: until interrupted
	ParallelInit  int     `json:"parallel_init"`
	Check         int     `json:"check"`
	Op            string  `json:"op"`       // as given: a name or "all"
	DataType      string  `json:"datatype"` // as given: a name or "all"
	Root          string  `json:"root"`     // as given: a rank or "all"
	Blocking      int     `json:"blocking"`
	Timeout       float64 `json:"timeout"` // seconds without progress before a call fails
	CudaGraph     int     `json:"cudagraph"`
	ReportCputime int     `json:"report_cputime"`
	Average       int     `json:"average"`
	LocalRegister int     `json:"local_register"`
	// runccl's flags.
	Algo          string `json:"algo,omitempty"`
	Proto         string `json:"proto,omitempty"`
	MinNChannels  int    `json:"min_nchannels,omitempty"`
	MaxNChannels  int    `json:"max_nchannels,omitempty"`
	ConnectAtInit bool   `json:"connect_at_init"`
	Procs         bool   `json:"procs"`
	ShareGPUs     bool   `json:"share_gpus,omitempty"`
}

// Device is one rank's line under "# Using devices" (nccl-tests' JSON keys).
type Device struct {
	Rank   int    `json:"rank"`
	Group  int    `json:"group"`
	Pid    int    `json:"pid"`
	Host   string `json:"hostname"`
	Device int    `json:"device"` // the rank's index among the ranks of its host
	// Bus is the GPU's PCI address as nccl-tests prints it ("0000:19:00"), "cpu" for a CPU rank.
	Bus  string `json:"device_hex"`
	Name string `json:"device_info"`
}
