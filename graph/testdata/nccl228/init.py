# Creates one NCCL communicator over the local GPUs (torchrun) and runs one all-reduce, so that
# NCCL prints its topology (NCCL_DEBUG_SUBSYS=GRAPH) and dumps it (NCCL_TOPO_DUMP_FILE).
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(rank % torch.cuda.device_count())
dist.init_process_group("nccl", device_id=torch.device("cuda", rank % torch.cuda.device_count()))
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
if rank == 0: print("done", dist.get_world_size())
dist.destroy_process_group()
