"""PyTorch's own torch.distributed API on backend "nccl", checked against a CPU reference: run under
torchrun with the library to test in LD_PRELOAD (go.sh's torch step):

    LD_PRELOAD=.../libnccl.so.2 torchrun --nproc_per_node N torch_check.py --out DIR --tag T [--seconds S]

Every rank computes every rank's input from (case, rank) alone, so each checks its result against
a reference computed on the CPU in float64 and rounded to the type. Collectives: all_reduce (SUM,
PRODUCT, MIN, MAX, AVG, and PREMUL_SUM on floats), reduce, broadcast, all_gather_into_tensor,
all_gather (list), reduce_scatter_tensor, reduce_scatter (list), all_to_all_single (even and
uneven splits), all_to_all (list), gather, scatter, batch_isend_irecv, barrier; then send/recv
(PyTorch's two-rank communicators) and last a collective captured in a CUDA graph and replayed.
Sizes from 1 element to 1 Mi + 3 (4 MiB of float32), smallest first, so that a deadline still
covers every collective and type. The ranks agree to go on before each case over a gloo group
(CPU), so a deadline stops all of them at the same case. Each phase's results are written before
the next begins.

GPU: local rank modulo the visible device count (CUDA_VISIBLE_DEVICES=0: all ranks share GPU 0).
--backend gloo --cpu runs the same cases on the CPU (a check of this script: gloo lacks some ops).
"""
import argparse, ctypes, json, os, struct, sys, time, traceback

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--tag", default="torch")
p.add_argument("--seconds", type=float, default=120, help="deadline for the cases; the graph check comes after it")
p.add_argument("--backend", default="nccl")
p.add_argument("--cpu", action="store_true")
p.add_argument("--sizes", default="1,7,1003,65537,262147,1048579")
p.add_argument("--replays", type=int, default=5)
p.add_argument("--dtypes", default="float32,float16,bfloat16,float64,int32,int64,int8,uint8")
p.add_argument("--ops", default="sum,prod,min,max,avg,premul")
a = p.parse_args()

import torch
import torch.distributed as dist

T0 = time.time()
rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local = int(os.environ.get("LOCAL_RANK", rank))
if a.cpu:
    dev = torch.device("cpu")
else:
    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", local % ngpu)
    torch.cuda.set_device(dev)
dist.init_process_group(a.backend)
ctl = dist.new_group(backend="gloo")  # agreement and summaries, never through the library under test
SIZES = [int(s) for s in a.sizes.split(",")]
R = dist.ReduceOp
OPS = {"sum": R.SUM, "prod": R.PRODUCT, "min": R.MIN, "max": R.MAX, "avg": R.AVG}
DTYPES = [getattr(torch, d) for d in a.dtypes.split(",")]
INTS = {torch.int32, torch.int64, torch.int8, torch.uint8}
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
out = {"rank": rank, "n": n, "tag": a.tag, "device": str(dev), "backend": a.backend, "torch": torch.__version__}


def which_library():
    """Where the NCCL symbols PyTorch calls resolve (the global lookup, as libtorch_cuda's
    undefined references do), and the NCCL libraries mapped."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
    res = {}
    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        for s in ["ncclAllReduce", "ncclCommInitRankConfig", "ncclSend", "ncclGroupEnd"]:
            try:
                addr = ctypes.cast(getattr(libc, s), ctypes.c_void_p).value
            except AttributeError:
                res[s] = None
                continue
            info = DlInfo()
            res[s] = info.fname.decode() if dladdr(addr, ctypes.byref(info)) and info.fname else "?"
    except OSError as e:
        res["error"] = str(e)
    res["mapped"] = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "nccl" in ln.split()[-1]})
    return res


def agree(go):
    """True if every rank wants to go on (a MIN over the gloo group)."""
    t = torch.tensor([1 if go else 0], dtype=torch.int32)
    dist.all_reduce(t, op=R.MIN, group=ctl)
    return bool(t.item())


def inputs(case, r, count, dt):
    """Rank r's input: real values for float32/float64, small integers for the rest (sums, products
    and averages of up to 4 of them are exact in every type)."""
    g = torch.Generator().manual_seed(case * 7919 + r)
    if dt in (torch.float32, torch.float64):
        return torch.randn(count, generator=g, dtype=torch.float64)
    lo = 0 if dt == torch.uint8 else -2
    return torch.randint(lo, 3, (count,), generator=g).to(torch.float64)


def prod_inputs(case, r, count, dt):
    # products of 4 values stay small: values in {-2,-1,1,2} (uint8: {1,2})
    g = torch.Generator().manual_seed(case * 7919 + r)
    if dt in (torch.float32, torch.float64):
        return torch.randn(count, generator=g, dtype=torch.float64)
    v = torch.randint(1, 3, (count,), generator=g).to(torch.float64)
    if dt != torch.uint8:
        v = v * (torch.randint(0, 2, (count,), generator=g) * 2 - 1)
    return v


def to_dev(x64, dt):
    if dt in INTS:
        return x64.to(torch.int64).to(dt).to(dev, copy=True)
    return x64.to(dt).to(dev, copy=True)  # a copy also on the CPU: collectives write in place


def f64(t):
    return t.detach().cpu().to(torch.float64)


def rounded(ref, dt):
    return f64(to_dev(ref, dt))


def premul_factor(dt):
    """The factor given to PREMUL_SUM and the scale NCCL applies. PyTorch 2.11 hands NCCL's
    ncclRedOpCreatePreMulSum a float32 for a bfloat16 scalar (unpackPreMulSum<float, ncclBfloat16>,
    host-immediate), and NCCL copies ncclTypeSize(bfloat16) = 2 bytes of it: the scale is the
    bfloat16 whose bits are the float32's low 16 (0.5 gives +0). For bfloat16 the factor is the
    float32 0x3F004000 (0.50097…), whose low half is the bfloat16 2.0: NCCL's reading gives ×2,
    a library that read the float32 would give ×0.501."""
    if dt != torch.bfloat16:
        return 0.5, 0.5
    f = struct.unpack("<f", struct.pack("<I", 0x3F004000))[0]
    low = struct.unpack("<I", struct.pack("<f", f))[0] & 0xFFFF
    return f, struct.unpack("<f", struct.pack("<I", low << 16))[0]


def reduce_ref(xs, op, dt, factor=None):
    if op in ("sum", "avg", "premul"):
        s = xs[0].clone()
        for x in xs[1:]:
            s = s + x
        if op == "avg":
            s = torch.trunc(s / len(xs)) if dt in INTS else s / len(xs)
        if op == "premul":
            s = s * factor
        return s
    s = xs[0].clone()
    for x in xs[1:]:
        s = s * x if op == "prod" else (torch.maximum(s, x) if op == "max" else torch.minimum(s, x))
    return s


def nwrong(got, ref, dt):
    got, ref = f64(got), rounded(ref, dt)
    if got.shape != ref.shape:
        return max(got.numel(), ref.numel(), 1)
    if dt == torch.float32:
        tol = 2e-5 * (1 + ref.abs())
    elif dt == torch.float64:
        tol = 1e-12 * (1 + ref.abs())
    elif dt in (torch.float16, torch.bfloat16):
        tol = 1e-2 * ref.abs()  # small integers: exact; only PREMUL_SUM's scaled values round
    else:
        tol = torch.zeros_like(ref)
    return int((((got - ref).abs() > tol) | torch.isnan(got)).sum())


def splits(count):
    """Uneven all_to_all_single: s[r][q] elements from rank r to rank q; some are 0, none to self."""
    return [[(count * ((r + 2 * q) % 3)) // 2 + (1 if r == q else 0) for q in range(n)] for r in range(n)]


def empty(k, dt):
    return torch.full((k,), 99, dtype=dt, device=dev)


def case_fn(kind, dt, op, count, case):
    """Runs one case; returns (wrong elements, what was checked)."""
    if kind == "all_reduce":
        gen = prod_inputs if op == "prod" else inputs
        xs = [gen(case, r, count, dt) for r in range(n)]
        t = to_dev(xs[rank], dt)
        if op == "premul":
            f, scale = premul_factor(dt)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
            return nwrong(t, reduce_ref(xs, "premul", dt, scale), dt)
        dist.all_reduce(t, op=OPS[op])
        return nwrong(t, reduce_ref(xs, op, dt), dt)
    if kind == "reduce":
        gen = prod_inputs if op == "prod" else inputs
        xs = [gen(case, r, count, dt) for r in range(n)]
        root = case % n
        t = to_dev(xs[rank], dt)
        dist.reduce(t, dst=root, op=OPS[op])
        return nwrong(t, reduce_ref(xs, op, dt), dt) if rank == root else 0
    if kind == "broadcast":
        xs = [inputs(case, r, count, dt) for r in range(n)]
        root = case % n
        t = to_dev(xs[rank], dt)
        dist.broadcast(t, src=root)
        return nwrong(t, xs[root], dt)
    if kind == "all_gather_into_tensor":
        xs = [inputs(case, r, count, dt) for r in range(n)]
        o = empty(n * count, dt)
        dist.all_gather_into_tensor(o, to_dev(xs[rank], dt))
        return nwrong(o, torch.cat(xs), dt)
    if kind == "all_gather":
        xs = [inputs(case, r, count, dt) for r in range(n)]
        os_ = [empty(count, dt) for _ in range(n)]
        dist.all_gather(os_, to_dev(xs[rank], dt))
        return nwrong(torch.cat(os_), torch.cat(xs), dt)
    if kind in ("reduce_scatter_tensor", "reduce_scatter"):
        gen = prod_inputs if op == "prod" else inputs
        xs = [gen(case, r, n * count, dt) for r in range(n)]
        o = empty(count, dt)
        mine = to_dev(xs[rank], dt)
        if kind == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(o, mine, op=OPS[op])
        else:
            dist.reduce_scatter(o, list(mine.split(count)), op=OPS[op])
        return nwrong(o, reduce_ref(xs, op, dt)[rank * count:(rank + 1) * count], dt)
    if kind == "all_to_all_single":
        xs = [inputs(case, r, n * count, dt) for r in range(n)]
        o = empty(n * count, dt)
        dist.all_to_all_single(o, to_dev(xs[rank], dt))
        return nwrong(o, torch.cat([x[rank * count:(rank + 1) * count] for x in xs]), dt)
    if kind == "all_to_all_single_uneven":
        s = splits(count)
        xs = [inputs(case, r, sum(s[r]), dt) for r in range(n)]
        o = empty(sum(s[r][rank] for r in range(n)), dt)
        dist.all_to_all_single(o, to_dev(xs[rank], dt), output_split_sizes=[s[r][rank] for r in range(n)], input_split_sizes=s[rank])
        ref = torch.cat([xs[r][sum(s[r][:rank]):sum(s[r][:rank + 1])] for r in range(n)])
        return nwrong(o, ref, dt)
    if kind == "all_to_all":
        xs = [inputs(case, r, n * count, dt) for r in range(n)]
        os_ = [empty(count, dt) for _ in range(n)]
        dist.all_to_all(os_, list(to_dev(xs[rank], dt).split(count)))
        return nwrong(torch.cat(os_), torch.cat([x[rank * count:(rank + 1) * count] for x in xs]), dt)
    if kind == "gather":
        xs = [inputs(case, r, count, dt) for r in range(n)]
        root = case % n
        os_ = [empty(count, dt) for _ in range(n)] if rank == root else None
        dist.gather(to_dev(xs[rank], dt), os_, dst=root)
        return nwrong(torch.cat(os_), torch.cat(xs), dt) if rank == root else 0
    if kind == "scatter":
        root = case % n
        x = inputs(case, root, n * count, dt)
        o = empty(count, dt)
        dist.scatter(o, list(to_dev(x, dt).split(count)) if rank == root else None, src=root)
        return nwrong(o, x[rank * count:(rank + 1) * count], dt)
    if kind == "batch_isend_irecv":
        # a ring both ways: every rank sends to both neighbours and receives from both
        xs = [inputs(case, r, count, dt) for r in range(n)]
        ys = [inputs(case + 100003, r, count, dt) for r in range(n)]
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        fromprev, fromnext = empty(count, dt), empty(count, dt)
        ops = [dist.P2POp(dist.isend, to_dev(xs[rank], dt), nxt), dist.P2POp(dist.irecv, fromprev, prv),
               dist.P2POp(dist.isend, to_dev(ys[rank], dt), prv), dist.P2POp(dist.irecv, fromnext, nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return nwrong(fromprev, xs[prv], dt) + nwrong(fromnext, ys[nxt], dt)
    if kind == "send_recv":
        # pairs (0,1), (2,3), …: the lower sends first, then the higher answers with its own
        xs = [inputs(case, r, count, dt) for r in range(n)]
        peer = rank ^ 1
        if peer >= n:
            return 0
        got = empty(count, dt)
        if rank < peer:
            dist.send(to_dev(xs[rank], dt), dst=peer)
            dist.recv(got, src=peer)
        else:
            dist.recv(got, src=peer)
            dist.send(to_dev(xs[rank], dt), dst=peer)
        return nwrong(got, xs[peer], dt)
    raise ValueError(kind)


REDUCING = [o for o in a.ops.split(",") if o in OPS]


def plan(kinds):
    """The cases of a phase, smallest size first."""
    cases = []
    for count in SIZES:
        for kind in kinds:
            for dt in DTYPES:
                if kind in ("all_reduce", "reduce", "reduce_scatter_tensor"):
                    ops = REDUCING + (["premul"] if kind == "all_reduce" and dt in FLOATS and "premul" in a.ops.split(",") else [])
                elif kind == "reduce_scatter":
                    ops = ["sum"]
                else:
                    ops = [None]
                for op in ops:
                    cases.append((kind, dt, op, count))
    return cases


summary = {}


def phase(name, kinds, until):
    cases = plan(kinds)
    done = wrong = errors = 0
    per = {}
    fails = []
    t0 = time.time()
    for i, (kind, dt, op, count) in enumerate(cases):
        if not agree(time.time() < until):
            break
        label = f"{kind} {str(dt)[6:]}{' ' + op if op else ''} x{count}"
        try:
            w = case_fn(kind, dt, op, count, len(summary) * 100000 + i)
            err = None
        except Exception as e:  # noqa: BLE001 — counted and reported, the ranks go on together
            w, err = -1, f"{type(e).__name__}: {str(e)[:300]}"
        if not a.cpu:
            torch.cuda.synchronize()
        done += 1
        k = per.setdefault(kind, {"cases": 0, "wrong": 0})
        k["cases"] += 1
        if w != 0:
            wrong += 1
            k["wrong"] += 1
            if err:
                errors += 1
            if len(fails) < 40:
                fails.append(label + (f": {err}" if err else f": {w} wrong elements"))
    sec = time.time() - t0
    res = {"planned": len(cases), "cases": done, "wrong": wrong, "errors": errors, "seconds": sec, "per_kind": per, "fails": fails,
           "last": f"{cases[done - 1][0]} x{cases[done - 1][3]}" if done else None}
    summary[name] = res
    print(f"[{a.tag} rank {rank}] {name}: {done} of {len(cases)} cases, {wrong} wrong ({errors} errors), {sec:.1f} s {fails[:3]}", flush=True)
    return res


def graph_check():
    """all_reduce captured in a CUDA graph on a side stream after a warm-up, replayed with new
    inputs each time."""
    count = 4099
    x = torch.zeros(count, device=dev)
    res = {"replays": a.replays}
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dist.all_reduce(x)
        bad = 0
        for it in range(a.replays):
            x.fill_(float(it + 1 + rank))
            torch.cuda.synchronize()
            g.replay()
            torch.cuda.synchronize()
            want = float(sum(it + 1 + r for r in range(n)))
            bad += int((x != want).sum())
        res["wrong_elements"] = bad
        print(f"[{a.tag} rank {rank}] graph: all_reduce of {count} floats captured, {a.replays} replays, {bad} wrong elements", flush=True)
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {str(e)[:600]}"
        print(f"[{a.tag} rank {rank}] graph capture failed: {res['error']}", flush=True)
        # a refused capture must leave the communicator usable: one all_reduce, not captured
        try:
            torch.cuda.synchronize()
            y = torch.full((count,), float(rank + 1), device=dev)
            dist.all_reduce(y)
            ok = bool((y == float(n * (n + 1) // 2)).all())
            res["after_failed_capture"] = "all_reduce right" if ok else "all_reduce wrong"
        except Exception as e2:  # noqa: BLE001
            res["after_failed_capture"] = f"{type(e2).__name__}: {str(e2)[:300]}"
        print(f"[{a.tag} rank {rank}] after the failed capture: {res['after_failed_capture']}", flush=True)
    return res


def write():
    gathered = [None] * n
    dist.all_gather_object(gathered, out, group=ctl)
    if rank == 0:
        with open(os.path.join(a.out, f"{a.tag}.json"), "w") as f:
            json.dump(gathered, f, indent=1, default=str)


def total():
    c = sum(v["cases"] for v in summary.values())
    w = sum(v["wrong"] for v in summary.values())
    return c, w


until = T0 + a.seconds
try:
    if not a.cpu:
        x = torch.ones(1, device=dev)
        dist.all_reduce(x)  # the communicator, so that the library is loaded and used
        out["library"] = which_library()
        if rank == 0:
            print(f"[{a.tag}] NCCL symbols resolve to: {out['library']}; torch.cuda.nccl.version() = {torch.cuda.nccl.version()}", flush=True)
    collectives = ["all_reduce", "reduce", "broadcast", "all_gather_into_tensor", "all_gather", "reduce_scatter_tensor", "reduce_scatter",
                   "all_to_all_single", "all_to_all_single_uneven", "all_to_all", "gather", "scatter"] + (["batch_isend_irecv"] if n > 1 else [])
    phase("collectives", collectives, T0 + 0.8 * a.seconds)
    dist.barrier(group=ctl)
    if agree(True):
        dist.barrier(**({} if a.cpu else {"device_ids": [dev.index]}))
    out["summary"] = summary
    write()
    if n > 1:
        phase("send_recv", ["send_recv"], until)
        out["summary"] = summary
        write()
    c, w = total()
    print(f"[{a.tag} rank {rank}] {c} cases, {w} wrong", flush=True)
    if rank == 0:
        print(f"[{a.tag}] {n} processes: {c} cases, {w} wrong; " + "; ".join(f"{k} {v['cases']}/{v['planned']} (last {v['last']})" for k, v in summary.items()), flush=True)
    if not a.cpu:
        out["graph"] = graph_check()
        write()
except Exception:  # noqa: BLE001
    traceback.print_exc()
    sys.stdout.flush()
    os._exit(2)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # no teardown: after a failed capture the communicator's state is not worth a hang
