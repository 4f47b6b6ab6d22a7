"""NCCL's C API through ctypes, one process per rank, all ranks on GPU 0: every collective,
send/recv and all-to-all over sizes, types and ops against a CPU reference; a CUDA graph capture;
latency; the fault checks. Run with the library to test (ours, or the real libnccl.so.2 for
1-rank figures):

    python3 nccl_check.py --lib PATH --nprocs N [--quick] [--latency] [--graph] [--fault] --tag T --out DIR

PyTorch is used only to allocate GPU memory, to fill and read it, and for its streams and graphs.
"""
import argparse, ctypes, json, os, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--nprocs", type=int, default=2)
p.add_argument("--rank", type=int, default=-1)
p.add_argument("--idfile", default="")
p.add_argument("--quick", action="store_true")
p.add_argument("--conformance", action="store_true")
p.add_argument("--latency", action="store_true")
p.add_argument("--graph", action="store_true")
p.add_argument("--fault", action="store_true")
p.add_argument("--skip-unsupported", action="store_true", help="a call the library refuses with ncclInvalidArgument is skipped (for the real NCCL, one rank)")
p.add_argument("--tag", default="run")
p.add_argument("--out", default=".")
a = p.parse_args()

if a.rank < 0:  # the launcher: one process per rank
    idfile = os.path.join("/tmp", f"simccl-id.{a.tag}.{os.getpid()}")
    if os.path.exists(idfile):
        os.remove(idfile)
    procs = [subprocess.Popen([sys.executable] + sys.argv + ["--rank", str(r), "--idfile", idfile]) for r in range(a.nprocs)]
    t0 = time.time()
    rcs = []
    for pr in procs:
        try:
            rcs.append(pr.wait(timeout=max(1, float(os.environ.get("SIMCCL_CHECK_DEADLINE", "400")) - (time.time() - t0))))
        except subprocess.TimeoutExpired:
            pr.kill()
            rcs.append("timeout")
    print(f"[{a.tag}] exit codes {rcs}", flush=True)
    sys.exit(0 if all(r == 0 for r in rcs) or a.fault else 1)

import torch

rank, n = a.rank, a.nprocs
# SIMCCL_CHECK_GPUS=1: rank r on GPU r mod the GPU count (else every rank on GPU 0)
torch.cuda.set_device(rank % torch.cuda.device_count() if os.environ.get("SIMCCL_CHECK_GPUS") == "1" else 0)
torch.zeros(1, device="cuda")
L = ctypes.CDLL(a.lib)


class UID(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


Comm = ctypes.c_void_p
for f in ["ncclAllReduce", "ncclReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter", "ncclAlltoAll", "ncclSend", "ncclRecv"]:
    getattr(L, f).restype = ctypes.c_int
L.ncclGetErrorString.restype = ctypes.c_char_p
L.ncclGetLastError.restype = ctypes.c_char_p
L.ncclCommInitRank.argtypes = [ctypes.POINTER(Comm), ctypes.c_int, UID, ctypes.c_int]
V, SZ, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
L.ncclAllReduce.argtypes = [V, V, SZ, I, I, Comm, V]
L.ncclReduce.argtypes = [V, V, SZ, I, I, I, Comm, V]
L.ncclBroadcast.argtypes = [V, V, SZ, I, I, Comm, V]
L.ncclAllGather.argtypes = [V, V, SZ, I, Comm, V]
L.ncclReduceScatter.argtypes = [V, V, SZ, I, I, Comm, V]
if hasattr(L, "ncclAlltoAll"):
    L.ncclAlltoAll.argtypes = [V, V, SZ, I, Comm, V]
L.ncclSend.argtypes = [V, SZ, I, I, Comm, V]
L.ncclRecv.argtypes = [V, SZ, I, I, Comm, V]
L.ncclRedOpCreatePreMulSum.argtypes = [ctypes.POINTER(I), V, I, I, Comm]
L.ncclCommGetAsyncError.argtypes = [Comm, ctypes.POINTER(I)]
L.ncclCommAbort.argtypes = [Comm]
L.ncclCommDestroy.argtypes = [Comm]


def ck(r, what):
    if r != 0:
        raise RuntimeError(f"rank {rank}: {what}: {r} {L.ncclGetErrorString(r)} {L.ncclGetLastError(None)}")


uid = UID()
if rank == 0:
    ck(L.ncclGetUniqueId(ctypes.byref(uid)), "GetUniqueId")
    with open(a.idfile + ".tmp", "wb") as f:
        f.write(ctypes.string_at(ctypes.addressof(uid), 128))
    os.rename(a.idfile + ".tmp", a.idfile)
else:
    while not os.path.exists(a.idfile):
        time.sleep(0.01)
    raw = open(a.idfile, "rb").read()
    ctypes.memmove(ctypes.addressof(uid), raw, 128)
comm = Comm()
t0 = time.time()
ck(L.ncclCommInitRank(ctypes.byref(comm), n, uid, rank), "CommInitRank")
tinit = time.time() - t0
stream = torch.cuda.Stream()
S = ctypes.c_void_p(stream.cuda_stream)
out = {"rank": rank, "n": n, "lib": a.lib, "init_s": tinit}

# ncclDataType_t → torch dtype (NCCL 2.28 numbering)
# uint32 and uint64 are stored as int32 and int64 (same bytes; the inputs are small and
# non-negative, where signed and unsigned results agree), as PyTorch's unsigned types lack ops.
DT = [(0, torch.int8), (1, torch.uint8), (2, torch.int32), (3, torch.int32), (4, torch.int64), (5, torch.int64),
      (6, torch.float16), (7, torch.float32), (8, torch.float64), (9, torch.bfloat16), (10, torch.float8_e4m3fn), (11, torch.float8_e5m2)]
UNSIGNED = {1, 3, 5}
OPS = ["sum", "prod", "max", "min", "avg", "premulsum"]
INTS = {torch.int8, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.uint64}
SIGNED = {torch.int8, torch.int32, torch.int64}


def inputs(case, r, count, dt, ncdt):
    """Rank r's input of a case: small integers (exact in every type: sums, products and the
    averages of 2 or 4 of them are representable even in fp8), except float32/float64 which get
    real values."""
    g = torch.Generator().manual_seed(case * 1009 + r)
    if dt in (torch.float32, torch.float64):
        return torch.randn(count, generator=g, dtype=torch.float64)
    lo = 0 if ncdt in UNSIGNED else -2
    return torch.randint(lo, 3, (count,), generator=g).to(torch.float64)


def to_dev(x64, dt):
    if dt in INTS:
        return x64.to(torch.int64).to(dt).cuda()
    return x64.to(torch.float32 if dt != torch.float64 else dt).to(dt).cuda()


def to_f64(t):
    t = t.cpu()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float16, torch.bfloat16):
        return t.to(torch.float32).to(torch.float64)
    return t.to(torch.float64)


def reduce_ref(xs, op, dt):
    if op in ("sum", "avg", "premulsum"):
        s = sum(xs[1:], xs[0].clone())
        if op == "premulsum":
            s = sum([x * 0.5 for x in xs[1:]], xs[0] * 0.5)
        if op == "avg":
            if dt in INTS:
                s = torch.trunc(s / len(xs))
            else:
                s = s / len(xs)
        return s
    if op == "prod":
        s = xs[0].clone()
        for x in xs[1:]:
            s = s * x
        return s
    s = xs[0].clone()
    for x in xs[1:]:
        s = torch.maximum(s, x) if op == "max" else torch.minimum(s, x)
    return s


def close(got, ref, dt):
    if dt in (torch.float32,):
        tol = 1e-5 * (1 + ref.abs())
    elif dt == torch.float64:
        tol = 1e-12 * (1 + ref.abs())
    else:
        tol = torch.zeros_like(ref)
    bad = ((got - ref).abs() > tol) | torch.isnan(got)
    return int(bad.sum())


premul = {}


def opcode(op, ncdt):
    if op != "premulsum":
        return OPS.index(op)
    if ncdt not in premul:
        v = I()
        sc = {6: (ctypes.c_uint16, 0x3800), 9: (ctypes.c_uint16, 0x3f00), 7: (ctypes.c_float, 0.5), 8: (ctypes.c_double, 0.5)}.get(ncdt)
        if sc is None:
            return None
        val = sc[0](sc[1])
        ck(L.ncclRedOpCreatePreMulSum(ctypes.byref(v), ctypes.cast(ctypes.pointer(val), V), ncdt, 1, comm), "PreMulSum")
        premul[ncdt] = v.value
    return premul[ncdt]


def conformance():
    counts = [1, 13, 1031, 65539] if a.quick else [1, 13, 1031, 65539, 1 << 20]
    funcs = ["allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall"] + (["sendrecv"] if n > 1 else [])
    cases = wrong = 0
    fails = []
    case = 0
    tstart = time.time()
    for func in funcs:
        if cases:
            print(f"[{a.tag} rank {rank}] ... before {func}: {cases} cases, {wrong} wrong elements, {time.time() - tstart:.1f} s", flush=True)
        for ncdt, dt in DT:
            ops = OPS if func in ("allreduce", "reduce", "reducescatter") else [None]
            for op in ops:
                if op == "premulsum" and (dt in INTS or dt in (torch.float8_e4m3fn, torch.float8_e5m2)):
                    continue  # NCCL 2.28's PreMulSum on integers and fp8 is not checked here
                for count in counts:
                    if count > 65539 and dt not in (torch.float32, torch.bfloat16):
                        continue
                    for inplace in ([False, True] if func in ("allreduce", "allgather", "reducescatter") and count in (13, 65539) else [False]):
                        case += 1
                        code = opcode(op, ncdt) if op else 0
                        if code is None:
                            continue
                        xs = [inputs(case, r, count * (n if func in ("reducescatter", "alltoall") else 1), dt, ncdt) for r in range(n)]
                        mine = to_dev(xs[rank], dt)
                        rcount = count * (n if func in ("allgather", "alltoall") else 1)
                        root = case % n
                        if inplace and func == "allgather":
                            recv = to_dev(torch.full((rcount,), 7, dtype=torch.float64), dt)
                            recv[rank * count:(rank + 1) * count] = mine
                            send_p, recv_p = recv.data_ptr() + rank * count * recv.element_size(), recv.data_ptr()
                        elif inplace and func == "reducescatter":
                            recv = mine.clone()
                            send_p, recv_p = recv.data_ptr(), recv.data_ptr() + rank * count * recv.element_size()
                        elif inplace:
                            recv = mine.clone()
                            send_p = recv_p = recv.data_ptr()
                        else:
                            recv = to_dev(torch.full((rcount,), 7, dtype=torch.float64), dt)
                            send_p, recv_p = mine.data_ptr(), recv.data_ptr()
                        stream.wait_stream(torch.cuda.current_stream())
                        if func == "allreduce":
                            r = L.ncclAllReduce(send_p, recv_p, count, ncdt, code, comm, S)
                        elif func == "reduce":
                            r = L.ncclReduce(send_p, recv_p, count, ncdt, code, root, comm, S)
                        elif func == "reducescatter":
                            r = L.ncclReduceScatter(send_p, recv_p, count, ncdt, code, comm, S)
                        elif func == "broadcast":
                            r = L.ncclBroadcast(send_p, recv_p, count, ncdt, root, comm, S)
                        elif func == "allgather":
                            r = L.ncclAllGather(send_p, recv_p, count, ncdt, comm, S)
                        elif func == "alltoall":
                            r = L.ncclAlltoAll(send_p, recv_p, count, ncdt, comm, S)
                        else:
                            ck(L.ncclGroupStart(), "GroupStart")
                            ck(L.ncclSend(send_p, count, ncdt, (rank + 1) % n, comm, S), "Send")
                            ck(L.ncclRecv(recv_p, count, ncdt, (rank - 1) % n, comm, S), "Recv")
                            r = L.ncclGroupEnd()
                        if r == 4 and a.skip_unsupported:
                            out.setdefault("unsupported", []).append(f"{func} {dt} {op}")
                            continue
                        ck(r, f"{func} {dt} {op} count {count}")
                        stream.synchronize()
                        got = to_f64(recv)
                        if inplace and func == "reducescatter":
                            got = got[rank * count:(rank + 1) * count]
                        if func == "allreduce":
                            ref = reduce_ref(xs, op, dt)
                        elif func == "reduce":
                            ref = reduce_ref(xs, op, dt) if rank == root else None
                        elif func == "reducescatter":
                            ref = reduce_ref(xs, op, dt)[rank * count:(rank + 1) * count]
                        elif func == "broadcast":
                            ref = xs[root]
                        elif func == "allgather":
                            ref = torch.cat(xs)
                        elif func == "alltoall":
                            ref = torch.cat([x[rank * count:(rank + 1) * count] for x in xs])
                        else:
                            ref = xs[(rank - 1) % n]
                        if ref is None:
                            continue
                        ref = to_f64(to_dev(ref, dt))  # the reference rounded to the type
                        w = close(got, ref, dt)
                        cases += 1
                        wrong += w
                        if w and len(fails) < 20:
                            fails.append(f"{func} {dt} {op} count {count} inplace {inplace}: {w} wrong")
    out["conformance"] = {"cases": cases, "wrong_elements": wrong, "fails": fails, "seconds": time.time() - tstart}
    print(f"[{a.tag} rank {rank}] conformance: {cases} cases, {wrong} wrong elements, {time.time() - tstart:.1f} s {fails[:5]}", flush=True)


def latency():
    res = {}
    for count in [1, 1024, 262144]:
        x = torch.ones(count, device="cuda")
        for i in range(20):
            ck(L.ncclAllReduce(x.data_ptr(), x.data_ptr(), count, 7, 0, comm, S), "warm")
        stream.synchronize()
        iters = int(os.environ.get("SIMCCL_LAT_ITERS", "500"))
        t0 = time.perf_counter()
        for i in range(iters):
            L.ncclAllReduce(x.data_ptr(), x.data_ptr(), count, 7, 0, comm, S)
        t1 = time.perf_counter()
        stream.synchronize()
        t2 = time.perf_counter()
        res[count * 4] = {"call_us": (t1 - t0) / iters * 1e6, "per_op_us": (t2 - t0) / iters * 1e6}
    out["latency"] = res
    print(f"[{a.tag} rank {rank}] latency (bytes: host µs per call, µs per op incl. completion): " +
          ", ".join(f"{k}: {v['call_us']:.1f}, {v['per_op_us']:.1f}" for k, v in res.items()), flush=True)


def graph():
    """Captures one graph of several calls (a small all-reduce, a 4 MiB all-reduce, an all-gather and
    a reduce-scatter), replays it 20 times with new inputs checking every element, then times a
    graph of one 4 KiB all-reduce (200 replays)."""
    counts = {"ar_small": 4099, "ar_big": 1 << 20, "ag": 65537, "rs": 65537}
    xs = {k: torch.zeros(c * (n if k == "rs" else 1), device="cuda") for k, c in counts.items()}
    ys = {k: torch.zeros(c * (n if k == "ag" else 1), device="cuda") for k, c in counts.items()}

    def calls(st):
        ck(L.ncclAllReduce(xs["ar_small"].data_ptr(), ys["ar_small"].data_ptr(), counts["ar_small"], 7, 0, comm, st), "AllReduce small")
        ck(L.ncclAllReduce(xs["ar_big"].data_ptr(), ys["ar_big"].data_ptr(), counts["ar_big"], 7, 0, comm, st), "AllReduce 4 MiB")
        ck(L.ncclAllGather(xs["ag"].data_ptr(), ys["ag"].data_ptr(), counts["ag"], 7, comm, st), "AllGather")
        ck(L.ncclReduceScatter(xs["rs"].data_ptr(), ys["rs"].data_ptr(), counts["rs"], 7, 0, comm, st), "ReduceScatter")

    g = torch.cuda.CUDAGraph()
    try:
        calls(S)  # warm up outside the capture (staging buffers, events), as PyTorch does before capturing
        stream.synchronize()
        with torch.cuda.graph(g, stream=stream):
            calls(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        bad, replays = 0, 20
        for it in range(replays):
            for k, x in xs.items():
                x.copy_(torch.arange(x.numel(), device="cuda", dtype=torch.float32).remainder(13) + float(it + rank))
            torch.cuda.synchronize()
            g.replay()
            torch.cuda.synchronize()
            base = lambda m: torch.arange(m, device="cuda", dtype=torch.float32).remainder(13)
            tot = sum(float(it + r) for r in range(n))
            for k in ("ar_small", "ar_big"):
                bad += int((ys[k] != base(counts[k]) * n + tot).sum())
            c = counts["ag"]
            want_ag = torch.cat([base(c) + float(it + r) for r in range(n)])
            bad += int((ys["ag"] != want_ag).sum())
            c = counts["rs"]
            want_rs = base(c * n)[rank * c:(rank + 1) * c] * n + tot
            bad += int((ys["rs"] != want_rs).sum())
        # replay time of a graph of one 4 KiB all-reduce
        x1 = torch.ones(1024, device="cuda")
        g1 = torch.cuda.CUDAGraph()
        ck(L.ncclAllReduce(x1.data_ptr(), x1.data_ptr(), 1024, 7, 0, comm, S), "warm 4 KiB")
        stream.synchronize()
        with torch.cuda.graph(g1, stream=stream):
            ck(L.ncclAllReduce(x1.data_ptr(), x1.data_ptr(), 1024, 7, 0, comm, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), "captured 4 KiB")
        for _ in range(20):
            g1.replay()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            g1.replay()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / 200 * 1e6
        out["graph"] = {"replays": replays, "calls": 4, "wrong_elements": bad, "replay_4KiB_allreduce_us": us}
        print(f"[{a.tag} rank {rank}] graph: {replays} replays of 4 captured calls, {bad} wrong elements; a captured 4 KiB all-reduce replays in {us:.1f} µs", flush=True)
    except Exception as e:
        out["graph"] = {"error": str(e)[:500]}
        print(f"[{a.tag} rank {rank}] graph capture failed: {e}", flush=True)


def fault():
    x = torch.ones(1024, device="cuda")
    ck(L.ncclAllReduce(x.data_ptr(), x.data_ptr(), 1024, 7, 0, comm, S), "AllReduce before the fault")
    stream.synchronize()
    if rank == n - 1:
        print(f"[{a.tag} rank {rank}] exiting without a word", flush=True)
        os._exit(3)
    t0 = time.time()
    e = I()
    while time.time() - t0 < 15:
        ck(L.ncclCommGetAsyncError(comm, ctypes.byref(e)), "GetAsyncError")
        if e.value != 0:
            break
        time.sleep(0.01)
    t_async = time.time() - t0
    t1 = time.time()
    r = L.ncclAllReduce(x.data_ptr(), x.data_ptr(), 1024, 7, 0, comm, S)
    t_call = time.time() - t1
    t2 = time.time()
    ra = L.ncclCommAbort(comm)
    t_abort = time.time() - t2
    out["fault"] = {"async_error": e.value, "async_after_s": t_async, "next_call": r, "next_call_s": t_call, "abort": ra, "abort_s": t_abort}
    print(f"[{a.tag} rank {rank}] fault: GetAsyncError={e.value} after {t_async:.3f} s; next AllReduce={r} in {t_call:.3f} s; Abort={ra} in {t_abort*1e3:.1f} ms", flush=True)


if a.conformance:
    conformance()
if a.latency:
    latency()
if a.graph:
    graph()
if a.fault:
    fault()
else:
    ck(L.ncclCommDestroy(comm), "CommDestroy")
with open(os.path.join(a.out, f"{a.tag}.rank{rank}.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
sys.stdout.flush()
os._exit(0)
