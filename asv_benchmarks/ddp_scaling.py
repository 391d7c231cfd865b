"""Data-parallel training on MPI: where a step's time goes on 2 ranks, what an allreduce
costs here, and a *model* of the scaling efficiency on 8 and 64 ranks over 10 and 100 Gbit/s
networks.

    python asv_benchmarks/ddp_scaling.py            # relaunches itself under mpiexec -n 2
    mpiexec -n 2 -bind-to core python -m mpi4py asv_benchmarks/ddp_scaling.py

Each rank is pinned to a core (``-bind-to core``), so jitgrad's thread pool (sized from the
process's CPU affinity, ``kernels/pool.py``) and OpenBLAS (``OPENBLAS_NUM_THREADS=1``, set
here) run one thread per rank: oversubscribed ranks made steps 10-40x slower in a probe.

1. Per-step split of the MLP 784-256-256-10 (float32, SGD with momentum,
   DistributedDataParallel with its default 25 MB buckets: one bucket here) at a few batch
   sizes per rank, eager mode: forward+backward (the backward's compute, without the wait),
   allreduce (the same gradient buffer reduced alone, blocking: the communication's cost),
   wait (what the backward actually waited for at its end: the allreduce left exposed) and
   the optimizer step; medians over the timed steps.
2. Compiled training steps (``jitgrad.compile`` of zero_grad, forward, backward, step) of
   the same MLP, DistributedDataParallel with ``gradient_as_bucket_view=True`` (the plan
   computes each gradient in its bucket view: no copy in or out) and ``False`` (gradients of
   their own, copied into the bucket before the allreduce and out after it), the two models'
   steps interleaved, medians and mins; plus what the copies cost alone (NumPy copies of the
   gradients' bytes in and out).
3. ``MPI_Allreduce`` of float32 buffers of 4 B - 16 MB (medians), least-squares fit of
   ``t(n) = a + b n``. With the ring algorithm's cost ``2 (p-1) alpha + 2 (p-1)/p n / B``,
   p = 2 gives ``alpha = a / 2`` and ``B = 1 / b``.
4. The model: a step on p ranks costs ``C + A_p(n)``, with C the measured compute
   (forward+backward+optimizer) of one rank's batch and A_p the ring allreduce of the
   gradients (n bytes) over a network of bandwidth B (10 or 100 Gbit/s) and latency alpha
   (the fitted local one, and an assumed 20 us for MPI over TCP); with one bucket the
   allreduce starts when the backward ends, so nothing overlaps: efficiency (weak scaling,
   batch per rank fixed) = ``C / (C + A_p)``. It is a model, not a measurement.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

BATCHES = (32, 128, 512)       # per rank
STEPS, WARMUP = int(os.environ.get("DDP_BENCH_STEPS", 60)), 10
SIZES = [4 * 4**k for k in range(12)]  # bytes: 4 B .. 16 MB
ASSUMED_TCP_LATENCY_S = 20e-6
NETWORKS = {"10 Gbit/s": 10e9 / 8, "100 Gbit/s": 100e9 / 8}
RANKS = (8, 64)


def relaunch() -> int:
    """Run this file under ``mpiexec -n 2 -bind-to core python -m mpi4py``."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = local if os.path.exists(local) else shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("mpiexec not found (pip install 'jitgrad[distributed]')")
    cmd = [mpiexec, "-n", "2", "-bind-to", "core", sys.executable, "-m", "mpi4py",
           os.path.abspath(__file__), *sys.argv[1:]]
    print("$", " ".join(["mpiexec", *cmd[1:5], "python", *cmd[6:]]), flush=True)
    return subprocess.call(cmd)


def median_ms(xs) -> float:
    return float(np.median(xs)) * 1e3


def step_split(batch: int) -> dict:
    import jitgrad
    import jitgrad.distributed as dist
    from jitgrad.distributed import c10d
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    nn = jitgrad.nn
    rank = dist.get_rank()
    jitgrad.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10)))
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(rank)
    x = jitgrad.tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = jitgrad.tensor(rng.integers(0, 10, batch))
    waited = [0.0]
    wait = c10d.Work.wait

    def timed_wait(self, timeout=None):
        t = time.perf_counter()
        try:
            return wait(self, timeout)
        finally:
            waited[0] += time.perf_counter() - t

    c10d.Work.wait = timed_wait
    fb, waits, opts, reduces = [], [], [], []
    flat = model._buckets[0].flat
    try:
        for k in range(WARMUP + STEPS):
            dist.barrier()
            opt.zero_grad()
            waited[0] = 0.0
            t0 = time.perf_counter()
            jitgrad.nn.functional.cross_entropy(model(x), y).backward()
            t1 = time.perf_counter()
            opt.step()
            t2 = time.perf_counter()
            dist.barrier()
            buf = flat.copy()  # the gradients' bytes, reduced alone (blocking)
            t3 = time.perf_counter()
            model._group.comm.Allreduce(model._group.mpi.IN_PLACE, buf)
            t4 = time.perf_counter()
            if k >= WARMUP:
                fb.append(t1 - t0 - waited[0])
                waits.append(waited[0])
                opts.append(t2 - t1)
                reduces.append(t4 - t3)
    finally:
        c10d.Work.wait = wait
    return {"batch": batch, "fwd_bwd": median_ms(fb), "allreduce": median_ms(reduces),
            "wait": median_ms(waits), "optimizer": median_ms(opts), "bytes": flat.nbytes,
            "buckets": len(model._buckets)}


def compiled_copy_vs_views(batch: int) -> dict:
    """Compiled DDP steps with gradients as bucket views and copied, interleaved (ms)."""
    import jitgrad
    import jitgrad.distributed as dist
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    nn = jitgrad.nn
    rank = dist.get_rank()
    rng = np.random.default_rng(rank)
    x = jitgrad.tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = jitgrad.tensor(rng.integers(0, 10, batch))
    steps = {}
    for as_view in (True, False):
        jitgrad.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                                  nn.ReLU(), nn.Linear(256, 10)),
                    gradient_as_bucket_view=as_view)
        steps[as_view] = (model, _compiled_step(model, jitgrad.optim.SGD(
            model.parameters(), lr=0.01, momentum=0.9)))
    times: dict = {True: [], False: []}
    for k in range(WARMUP + STEPS):
        for as_view, (_, step) in steps.items():
            dist.barrier()
            t = time.perf_counter()
            step(x, y)
            if k >= WARMUP:
                times[as_view].append(time.perf_counter() - t)
    flat = steps[True][0]._buckets[0].flat
    grads = [p.grad.numpy() for p in steps[False][0].module.parameters()]
    copies = []
    for _ in range(STEPS):  # the copying path's copies alone: each gradient in, then out
        t = time.perf_counter()
        start = 0
        for g in grads:
            np.copyto(flat[start:start + g.size], g.reshape(-1))
            start += g.size
        start = 0
        for g in grads:
            _ = flat[start:start + g.size].reshape(g.shape).copy()
            start += g.size
        copies.append(time.perf_counter() - t)
    return {"batch": batch, "views": times[True], "copied": times[False],
            "copies": median_ms(copies)}


def _compiled_step(model, opt):
    import jitgrad

    @jitgrad.compile(fullgraph=True)
    def step(x, y):
        opt.zero_grad()
        loss = jitgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def allreduce_fit() -> tuple[list, float, float]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES:
        buf = np.ones(nbytes // 4, np.float32)
        reps = max(5, min(200, int(2e7 // max(nbytes, 1))))
        times = []
        for _ in range(reps + 3):
            comm.Barrier()
            t = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, buf)
            times.append(time.perf_counter() - t)
        rows.append((nbytes, float(np.median(times[3:]))))
    n = np.array([r[0] for r in rows], float)
    t = np.array([r[1] for r in rows])
    # least squares, each point weighted by 1/t (relative errors: small messages count)
    w = 1 / t
    a, b = np.linalg.lstsq(np.stack([np.ones_like(n), n], 1) * w[:, None], t * w,
                           rcond=None)[0]
    return rows, float(a), float(b)


def ring_s(p: int, nbytes: float, alpha: float, bandwidth: float) -> float:
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bandwidth


def main() -> None:
    import jitgrad
    import jitgrad.distributed as dist

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"{world} ranks, {jitgrad.get_num_threads()} jitgrad thread(s) per rank, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, CPU affinity of "
        f"rank 0: {sorted(os.sched_getaffinity(0))}")
    splits = [step_split(b) for b in BATCHES]
    say("\n1. MLP 784-256-256-10 float32, eager DDP step on 2 ranks (median ms; "
        f"gradients {splits[0]['bytes'] / 1e6:.2f} MB in {splits[0]['buckets']} bucket)")
    say(f"{'batch/rank':>10} {'fwd+bwd':>9} {'allreduce':>10} {'wait':>8} {'optimizer':>10}"
        f" {'step':>8}")
    for s in splits:
        total = s["fwd_bwd"] + s["wait"] + s["optimizer"]
        say(f"{s['batch']:>10} {s['fwd_bwd']:>9.3f} {s['allreduce']:>10.3f} {s['wait']:>8.3f}"
            f" {s['optimizer']:>10.3f} {total:>8.3f}")

    say("\n2. compiled DDP steps on 2 ranks: gradients computed in the bucket views vs "
        "copied in and out (ms; the two interleaved)")
    say(f"{'batch/rank':>10} {'views med':>10} {'copied med':>11} {'saved med':>10} "
        f"{'views min':>10} {'copied min':>11} {'copies alone':>13}")
    for batch in BATCHES:
        c = compiled_copy_vs_views(batch)
        v, cp = median_ms(c["views"]), median_ms(c["copied"])
        vmin, cmin = min(c["views"]) * 1e3, min(c["copied"]) * 1e3
        say(f"{batch:>10} {v:>10.3f} {cp:>11.3f} {cp - v:>10.3f} {vmin:>10.3f} {cmin:>11.3f}"
            f" {c['copies']:>13.3f}")

    rows, a, b = allreduce_fit()
    alpha, bandwidth = a / 2, 1 / b
    say("\n3. MPI_Allreduce on 2 ranks here (shared memory), median of repeats")
    say(f"{'bytes':>10} {'us':>10} {'fit us':>10}")
    for nbytes, t in rows:
        say(f"{nbytes:>10} {t * 1e6:>10.2f} {(a + b * nbytes) * 1e6:>10.2f}")
    say(f"fit t(n) = {a * 1e6:.2f} us + n / {bandwidth / 1e9:.2f} GB/s  ->  ring model: "
        f"latency alpha = {alpha * 1e6:.2f} us, bandwidth B = {bandwidth / 1e9:.2f} GB/s")
    say(f"check: the fitted model gives {ring_s(2, splits[0]['bytes'], alpha, bandwidth) * 1e3:.3f}"
        f" ms for the MLP's gradients; measured {splits[0]['allreduce']:.3f} ms")

    say("\n4. MODEL (not measured): weak-scaling efficiency C / (C + A_p), C = measured "
        "compute per rank (fwd+bwd+optimizer), A_p = ring allreduce of the gradients; "
        "no overlap (one bucket)")
    say(f"{'batch/rank':>10} {'C ms':>7} {'network':>11} {'alpha':>14} "
        + " ".join(f"{f'p={p}: A ms  eff':>17}" for p in RANKS))
    for s in splits:
        c = s["fwd_bwd"] + s["optimizer"]
        for net, bw in NETWORKS.items():
            for lat_name, lat in ((f"fit {alpha * 1e6:.1f} us", alpha),
                                  ("TCP 20 us", ASSUMED_TCP_LATENCY_S)):
                cells = []
                for p in RANKS:
                    ar = ring_s(p, s["bytes"], lat, bw) * 1e3
                    cells.append(f"{ar:>9.3f} {c / (c + ar):>6.1%}")
                say(f"{s['batch']:>10} {c:>7.3f} {net:>11} {lat_name:>14} " + " ".join(cells))
    dist.destroy_process_group()


if __name__ == "__main__":
    if not any(k in os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        sys.exit(relaunch())
    main()
