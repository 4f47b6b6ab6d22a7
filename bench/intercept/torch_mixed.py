"""A torchrun program issuing a few hundred NCCL calls of mixed sizes (all_reduce,
all_gather_into_tensor, reduce_scatter_tensor, broadcast, send/recv, batched isend/irecv),
timing each one (CUDA events and host wall time, synchronized before and after) and checking
results. Each rank writes <out>.rank<R>.json: {"start_ns","end_ns","calls":[{op,bytes,event_us,
wall_us}],"checksum"}. Run: torchrun --nproc_per_node=2 torch_mixed.py --out DIR/name
"""
import argparse, json, os, random, time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--iters", type=int, default=50)
p.add_argument("--profile", action="store_true", help="record NCCL kernel times with torch.profiler (CUPTI)")
a = p.parse_args()

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)

rng = random.Random(1234)  # same sequence on every rank
SIZES = [4 << 10, 64 << 10, 1 << 20, 8 << 20, 32 << 20, 128 << 20]
DTYPES = [torch.float32, torch.bfloat16]
OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "batch_p2p"]

calls, checksum, bad = [], 0.0, 0


def timed(op, nbytes, fn):
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter_ns()
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    calls.append({"op": op, "bytes": nbytes, "event_us": e0.elapsed_time(e1) * 1e3, "wall_us": (t1 - t0) / 1e3})


plan = []
for it in range(a.iters):
    for op in OPS:
        plan.append((op, rng.choice(SIZES), rng.choice(DTYPES)))

prof = None
if a.profile:
    from torch.profiler import profile, ProfilerActivity
    prof = profile(activities=[ProfilerActivity.CUDA])
    prof.__enter__()
start_ns = time.time_ns()
for op, nbytes, dt in plan:
    esz = torch.tensor([], dtype=dt).element_size()
    n = nbytes // esz
    if op == "all_reduce":
        x = torch.full((n,), float(rank + 1), dtype=dt, device=dev)
        timed(op, nbytes, lambda: dist.all_reduce(x))
        bad += int((x != sum(range(1, world + 1))).any())
        checksum += float(x[:4].float().sum())
    elif op == "all_gather":
        x = torch.full((n // world,), float(rank), dtype=dt, device=dev)
        y = torch.empty((n // world) * world, dtype=dt, device=dev)
        timed(op, nbytes, lambda: dist.all_gather_into_tensor(y, x))
        bad += int((y.view(world, -1)[:, 0].float().cpu() != torch.arange(world).float()).any())
        checksum += float(y.view(world, -1)[:, :2].float().sum())
    elif op == "reduce_scatter":
        x = torch.full((n,), float(rank + 1), dtype=dt, device=dev)
        y = torch.empty(n // world, dtype=dt, device=dev)
        timed(op, nbytes, lambda: dist.reduce_scatter_tensor(y, x))
        bad += int((y != sum(range(1, world + 1))).any())
        checksum += float(y[:4].float().sum())
    elif op == "broadcast":
        x = torch.full((n,), float(rank + 7), dtype=dt, device=dev)
        timed(op, nbytes, lambda: dist.broadcast(x, src=0))
        bad += int((x != 7).any())
        checksum += float(x[:4].float().sum())
    elif op == "sendrecv":
        x = torch.full((n,), float(rank + 3), dtype=dt, device=dev)
        if rank == 0:
            timed(op, nbytes, lambda: dist.send(x, dst=1))
        elif rank == 1:
            timed(op, nbytes, lambda: dist.recv(x, src=0))
            bad += int((x != 3).any())
        checksum += float(x[:4].float().sum())
    elif op == "batch_p2p":
        x = torch.full((n,), float(rank + 5), dtype=dt, device=dev)
        y = torch.empty(n, dtype=dt, device=dev)
        nxt, prv = (rank + 1) % world, (rank - 1) % world

        def exch():
            for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, y, prv)]):
                r.wait()
        timed(op, nbytes, exch)
        bad += int((y != prv + 5).any())
        checksum += float(y[:4].float().sum())
end_ns = time.time_ns()
kernels = []
if prof is not None:
    prof.__exit__(None, None, None)
    tmp = f"{a.out}.rank{rank}.prof.json"
    prof.export_chrome_trace(tmp)
    with open(tmp) as f:
        evs = json.load(f)["traceEvents"]
    os.remove(tmp)
    kernels = sorted(({"name": e["name"][:48], "ts": e["ts"], "dur": e["dur"]} for e in evs
                      if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()), key=lambda k: k["ts"])

with open(f"{a.out}.rank{rank}.json", "w") as f:
    json.dump({"rank": rank, "world": world, "start_ns": start_ns, "end_ns": end_ns, "checksum": checksum,
               "bad": bad, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__,
               "calls": calls, "kernels": kernels}, f)
print(f"rank {rank}: {len(calls)} calls, checksum {checksum}, bad {bad}, "
      f"{len(kernels)} nccl kernels, kernel total {sum(k['dur'] for k in kernels):.1f} us, "
      f"event total {sum(c['event_us'] for c in calls):.1f} us, wall total {sum(c['wall_us'] for c in calls):.1f} us")
dist.destroy_process_group()
