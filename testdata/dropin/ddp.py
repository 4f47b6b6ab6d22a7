"""A small DDP training loop, 2 processes on GPU 0, under a given backend; rank 0 writes the
loss of every step. Run once with backend gloo and once with nccl (our library preloaded):
the curves must agree. The labels come from a fixed linear teacher, so the loss falls.

    python3 ddp.py --backend nccl|gloo --steps 300 --nprocs 2 --out FILE
"""
import argparse, json, os, sys, time

p = argparse.ArgumentParser()
p.add_argument("--backend", default="nccl")
p.add_argument("--steps", type=int, default=300)
p.add_argument("--nprocs", type=int, default=2)
p.add_argument("--out", required=True)
p.add_argument("--rank", type=int, default=-1)
p.add_argument("--port", type=int, default=29533)
a = p.parse_args()

if a.rank < 0:
    import subprocess
    procs = [subprocess.Popen([sys.executable] + sys.argv + ["--rank", str(r)]) for r in range(a.nprocs)]
    rcs = []
    for pr in procs:
        try:
            rcs.append(pr.wait(timeout=240))
        except subprocess.TimeoutExpired:
            pr.kill()
            rcs.append("timeout")
    print(f"[ddp {a.backend}] exit codes {rcs}", flush=True)
    sys.exit(0 if all(r == 0 for r in rcs) else 1)

import torch
import torch.distributed as dist
import torch.nn as nn

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ["MASTER_PORT"] = str(a.port)
# SIMCCL_CHECK_GPUS=1: rank r on GPU r mod the GPU count (else every rank on GPU 0)
dev = a.rank % torch.cuda.device_count() if os.environ.get("SIMCCL_CHECK_GPUS") == "1" else 0
torch.cuda.set_device(dev)
dist.init_process_group(a.backend, rank=a.rank, world_size=a.nprocs)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev], bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
g = torch.Generator().manual_seed(1234 + a.rank)
teacher = torch.randn(64, 10, generator=torch.Generator().manual_seed(99))
losses = []
t0 = time.time()
for step in range(a.steps):
    xc = torch.randn(32, 64, generator=g)
    x, y = xc.cuda(), (xc @ teacher).argmax(1).cuda()
    loss = nn.functional.cross_entropy(ddp(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    # the loss averaged over ranks, through the backend too
    l = loss.detach().clone()
    dist.all_reduce(l)
    losses.append(l.item() / a.nprocs)
torch.cuda.synchronize()
el = time.time() - t0
# a few more calls PyTorch users make
t = torch.arange(4, dtype=torch.float32, device="cuda") + a.rank
dist.broadcast(t, src=1)
gathered = [torch.zeros(4, device="cuda") for _ in range(a.nprocs)]
dist.all_gather(gathered, torch.full((4,), float(a.rank), device="cuda"))
ok_extra = bool(torch.equal(t.cpu(), torch.arange(4, dtype=torch.float32) + 1)) and all(bool((gathered[r] == r).all()) for r in range(a.nprocs))
dist.barrier()
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "nccl" in l.split()[-1]})
if a.rank == 0:
    print(f"[ddp {a.backend}] NCCL libraries mapped: {libs}; torch.cuda.nccl.version() = {torch.cuda.nccl.version()}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"backend": a.backend, "losses": losses, "seconds": el, "broadcast_allgather_ok": ok_extra, "nccl_libs": libs}, f)
    print(f"[ddp {a.backend}] {a.steps} steps in {el:.2f} s, loss {losses[0]:.5f} -> {losses[-1]:.5f}, broadcast/all_gather ok={ok_extra}", flush=True)
dist.destroy_process_group()
