# Initialises an NCCL communicator over every process (torchrun) and runs one all-reduce, so that NCCL
# logs and dumps its graph search. FAKE_HOSTS=1 gives each process its own NCCL_HOSTID (two "hosts").
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
if os.environ.get("FAKE_HOSTS"): os.environ["NCCL_HOSTID"] = f"fakehost{rank}"
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl")
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
if rank == 0: print("done", dist.get_world_size())
dist.destroy_process_group()
