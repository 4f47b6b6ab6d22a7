"""Asks NCCL (through torch) for per-call TUNING choices that test package tuning beyond single calls:
grouped collectives (aggregation, numPipeOps, shared channel schedule), data types, and NCCL_* settings.
Run on the 2xH200 device machine with torchrun --nproc_per_node=2 (see capture.sh). Writes, on rank 0,
the list of groups (each a list of [collective, count, dtype]) as JSON to $CAPTURE_JSON; NCCL's own log
goes to NCCL_DEBUG_FILE."""
import json, os, torch, torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("nccl")
world = dist.get_world_size()
dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
DT = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8, "double": torch.float64}

def call(coll, count, dt):
    t = DT[dt]
    if coll == "allreduce":
        dist.all_reduce(torch.ones(count, dtype=t, device=dev))
    elif coll == "broadcast":
        dist.broadcast(torch.ones(count, dtype=t, device=dev), 0)
    elif coll == "reduce":
        dist.reduce(torch.ones(count, dtype=t, device=dev), 0)
    elif coll == "allgather":  # count = per-rank send count
        x = torch.ones(count, dtype=t, device=dev); y = torch.empty(count * world, dtype=t, device=dev)
        dist.all_gather_into_tensor(y, x)
    elif coll == "reducescatter":  # count = per-rank receive count
        x = torch.ones(count * world, dtype=t, device=dev); y = torch.empty(count, dtype=t, device=dev)
        dist.reduce_scatter_tensor(y, x)

groups = []
mode = os.environ.get("CAPTURE_MODE", "single")
if mode == "single":
    for dt in ["float", "half", "int8"]:
        for e in range(2, 29, 2):
            n = max((1 << e) // torch.tensor([], dtype=DT[dt]).element_size(), 1)
            for c in ["allreduce", "allgather", "reducescatter", "broadcast", "reduce"]:
                groups.append([[c, n, dt]])
else:
    groups = [
        [["allreduce", 256, "float"], ["allreduce", 512, "float"], ["allreduce", 768, "float"]],
        [["allreduce", 1 << 18, "float"], ["allreduce", 25 << 20, "float"]],
        [["allreduce", 1 << 14, "float"]] * 30,
        [["allreduce", 2, "float"]] * 50,
        [["allreduce", 1 << 20, "float"], ["allreduce", 1 << 10, "float"], ["allreduce", 1 << 16, "float"], ["allreduce", 3 << 16, "float"]],
        [["allreduce", 1 << 12, "half"], ["allreduce", 5 << 12, "half"], ["allreduce", 3 << 12, "half"]],
        [["allgather", 1 << 10, "float"], ["allgather", 1 << 12, "float"], ["allgather", 1 << 14, "float"], ["allgather", 1 << 16, "float"]],
        [["reducescatter", 1 << 20, "float"]] * 8,
    ]
for g in groups:
    if len(g) == 1:
        call(*g[0])
    else:
        with dist._coalescing_manager(device=dev):
            for c in g:
                call(*c)
    torch.cuda.synchronize()
if rank == 0 and os.environ.get("CAPTURE_JSON"):
    with open(os.environ["CAPTURE_JSON"], "w") as f:
        json.dump(groups, f)
dist.destroy_process_group()
