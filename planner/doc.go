// Package planner decides what NCCL runs. From a machine description — an NCCL topology, the
// number of nodes that have it, the NCCL release and NCCL's settings (NCCL_ALGO, NCCL_PROTO,
// NCCL_MIN/MAX_NCHANNELS, NCCL_NVLS_ENABLE, buffer sizes, …) — it builds once what NCCL builds when
// a communicator is created: the system and its paths (graph, through topo), the channel search
// (search), the communicator parameters and the tuning model (tuning), the rings and trees over
// every rank, the transport of every pair of ranks. Per call it then answers NCCL's decision as a
// coll.Plan: algorithm, protocol, channels and chunking.
//
// It is the only place plans are made. Every simccl command, the simulator (simnet), both real
// engines (comm, cuda/engine), the report, the memory model and trace replay take their plans
// from a Planner, so that a simulated call and a real one run the same schedule and an NCCL
// setting means the same everywhere. Executors see it through the small coll.Planner interface;
// an executor that cannot run an algorithm or protocol asks again with coll.Call.Exclude and
// reports both decisions.
//
// Usage:
//
//	s, err := planner.SettingsFromEnv(os.Getenv)  // NCCL_* variables
//	name, doc, err := planner.LoadTopology("", os.Getenv) // --topo, NCCL_TOPO_FILE or the default
//	p, err := planner.New(planner.Machine{Name: name, Doc: doc, Nodes: 2, Settings: s})
//	plan, err := p.Plan(coll.TestCall(coll.AllReduce, 1<<20, coll.Float32, coll.Sum, p.NRanks()))
package planner
