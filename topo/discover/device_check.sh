#!/usr/bin/env bash
# Compares `simccl topo dump` with NCCL's own topology dump on a GPU machine.
#
# Run from the repository root on the device machine, with the Linux amd64 binary carried in .devbin:
#   CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -o .devbin/simccl ./cmd/simccl     (here)
#   bash topo/discover/device_check.sh                                                 (there; carry .devbin)
# It writes $OUT/simccl_topo.xml and compares it with $OUT/nccl_topo.xml. If that file is not there
# yet, it makes it first: one process per GPU through PyTorch's NCCL (NCCL_TOPO_DUMP_FILE), NVLink
# multicast off. The comparison is normalised: attributes sorted, sibling elements sorted (NCCL's
# fusion of the ranks' trees leaves them in arrival order), so only real differences show.
# Exit status: 0 identical, 1 different, 2 could not compare.
set -u
: "${OUT:?set OUT to a directory}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SIMCCL=${SIMCCL:-./.devbin/simccl}
mkdir -p "$OUT"

if [ ! -s "$OUT/nccl_topo.xml" ]; then
  echo "== NCCL's own dump (PyTorch, one process per GPU) -> $OUT/nccl_topo.xml"
  # (a file, not stdin: torch.multiprocessing's spawn re-imports the main script)
  cat > "$OUT/nccl_dump.py" <<'PY'
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.destroy_process_group()
if __name__ == "__main__":
    n = torch.cuda.device_count()
    print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", n)
    mp.spawn(run, args=(n, 29500 + os.getpid() % 1000), nprocs=n)
PY
  NCCL_TOPO_DUMP_FILE="$OUT/nccl_topo.xml" timeout 300 python3 "$OUT/nccl_dump.py" || { echo "NCCL dump failed"; exit 2; }
fi

echo "== simccl topo dump -> $OUT/simccl_topo.xml"
"$SIMCCL" topo dump -o "$OUT/simccl_topo.xml" 2>"$OUT/simccl_stderr.txt"
rc=$?
cat "$OUT/simccl_stderr.txt"
if [ $rc -ne 0 ]; then echo "simccl topo dump failed (exit $rc)"; exit 2; fi

python3 - "$OUT/nccl_topo.xml" "$OUT/simccl_topo.xml" <<'PY'
import difflib, re, sys
import xml.etree.ElementTree as ET

def load(path):
    text = open(path).read()
    # NCCL's dumps of a file it loaded can carry an empty attribute name (` =""`): drop it.
    text = re.sub(r'\s=""', "", text)
    return ET.fromstring(text)

def canon(e, depth=0):
    attrs = " ".join('%s="%s"' % kv for kv in sorted(e.attrib.items()))
    kids = sorted(("\n".join(canon(c, depth + 1)) for c in e), key=lambda s: s)
    head = "  " * depth + "<%s%s>" % (e.tag, " " + attrs if attrs else "")
    return [head] + [l for k in kids for l in k.split("\n")]

nccl, ours = (canon(load(p)) for p in sys.argv[1:3])
diff = list(difflib.unified_diff(nccl, ours, "nccl_topo.xml (normalised)", "simccl_topo.xml (normalised)", lineterm=""))
print("== normalised diff (- NCCL, + simccl)")
if not diff:
    print("IDENTICAL (%d elements)" % len(nccl))
    sys.exit(0)
print("\n".join(diff))
sys.exit(1)
PY
