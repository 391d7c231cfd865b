"""CUDA benchmark (issue 14's workloads), side by side in one process; writes JSON and text.

    python asv_benchmarks/cuda_bench.py --out DIR          # on a GPU (tools/gpu_check.sh)
    NUMBA_ENABLE_CUDASIM=1 python asv_benchmarks/cuda_bench.py --smoke   # code path check

Workloads:

* W2 ``sum(tanh(x*w+b)**2*sigmoid(x))`` forward+backward, float32, 1e6/1e7/1e8: jitgrad
  compiled (the speculated loss: one fused kernel), PyTorch CUDA eager and torch.compile;
  effective bandwidth at 24 bytes/element (read x, w, b; write dx, dw... as issue 14 counts)
  against the device-to-device copy bandwidth measured here with CuPy;
* the MLP training step (784-256-256-10, SGD, float32) at batch 128 and 4096: jitgrad eager
  and compiled, PyTorch eager and torch.compile, on the same weights;
* the digits CNN training step (conv 3x3 -> ReLU -> max pool, twice, -> linear; SGD,
  float32, 1x8x8 images) at batch 128 and 4096: the same four;
* W2 at 1e7 and 1e8 under other launch configurations (threads per block, elements a
  thread loads at once), and whether they all give the same bits (``tuning``);
* eager per-op latency ``c = a * b + a`` on 16 elements, and ``(a * b + a).sum().backward()``:
  jitgrad vs PyTorch.

Every timing synchronises the device before reading the clock; each figure is the median
of repeats after warm-up. ``--smoke`` runs tiny sizes once (the simulator) to check the code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import jitgrad  # noqa: E402


def _sync_all(torch_mod=None) -> None:
    jitgrad.cuda.synchronize()
    if torch_mod is not None:
        torch_mod.cuda.synchronize()


def timeit(fn, repeat: int, number: int, torch_mod=None) -> float:
    """Median seconds per call of ``fn`` (``number`` calls per sample, synchronised)."""
    fn()
    _sync_all(torch_mod)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        _sync_all(torch_mod)
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def copy_bandwidth(n: int, repeat: int) -> float:
    """Bytes/s of a device-to-device copy of ``n`` float32 (read + write)."""
    xp = jitgrad.cuda.runtime.xp()
    a = xp.ones(n, np.float32)
    b = xp.empty_like(a)

    def copy():
        b[...] = a
    t = timeit(copy, repeat, 10)
    return 2 * 4 * n / t


def w2(x, w, b, lib):
    return (lib.tanh(x * w + b) ** 2 * lib.sigmoid(x)).sum()


def bench_w2(sizes, repeat, torch_mod) -> list:
    f = jitgrad.compile(lambda x, w, b: w2(x, w, b, jitgrad))
    return [_w2_row(n, f, repeat, torch_mod) for n in sizes]


def _w2_data(n: int) -> tuple:
    """W2's inputs x, w, b: ``n`` standard normal float32 each (host arrays)."""
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(n).astype(np.float32) for _ in range(3))


def _w2_timed(f, X, W, B, repeat) -> tuple:
    """(seconds per ``f(x, w, b).backward()``, bytes of the loss and both gradients) of
    jitgrad's compiled W2 ``f`` on CUDA copies of ``X, W, B``."""
    x = jitgrad.tensor(X, device="cuda", requires_grad=True)
    w = jitgrad.tensor(W, device="cuda", requires_grad=True)
    b = jitgrad.tensor(B, device="cuda")

    def jg():
        x.grad = w.grad = None
        f(x, w, b).backward()
    t = timeit(jg, repeat, 3)
    x.grad = w.grad = None
    loss = f(x, w, b)
    loss.backward()
    return t, [loss.detach().cpu().numpy().tobytes(), x.grad.cpu().numpy().tobytes(),
               w.grad.cpu().numpy().tobytes()]


def _w2_row(n, f, repeat, torch_mod) -> dict:
    X, W, B = _w2_data(n)
    row = {"n": n, "jitgrad_compiled_s": _w2_timed(f, X, W, B, repeat)[0]}
    row["jitgrad_GBps"] = 24 * n / row["jitgrad_compiled_s"] / 1e9
    if torch_mod is not None:
        T = torch_mod
        tx = T.tensor(X, device="cuda", requires_grad=True)
        tw = T.tensor(W, device="cuda", requires_grad=True)
        tb = T.tensor(B, device="cuda")

        def te():
            tx.grad = tw.grad = None
            w2(tx, tw, tb, T).backward()
        tc_fn = T.compile(lambda x, w, b: w2(x, w, b, T), dynamic=False)

        def tc():
            tx.grad = tw.grad = None
            tc_fn(tx, tw, tb).backward()
        row["torch_eager_s"] = timeit(te, repeat, 3, T)
        row["torch_compile_s"] = timeit(tc, repeat, 3, T)
        row["vs_torch_compile"] = row["jitgrad_compiled_s"] / row["torch_compile_s"]
    return row


#: launch configurations the ``tuning`` section compares: (threads per block, elements a
#: thread loads before computing, ``render_cuda.UNROLL``); the first is the default
TUNING = ((256, 4), (128, 4), (256, 1), (128, 1))


def _kernel_config(threads: int, unroll: int) -> None:
    """Generated CUDA kernels from now on launch ``threads`` per block and load ``unroll``
    elements a turn: every rendered CUDA kernel and eager launch forgotten."""
    from jitgrad.compiler import kernels, render_cuda
    from jitgrad.cuda import launch, runtime

    render_cuda.UNROLL = unroll
    runtime.THREADS[runtime.backend()] = threads
    launch._kernels.clear()
    launch._plans.clear()
    for key in [k for k in kernels._table if k[2] == "cuda"]:
        del kernels._table[key]


def bench_tuning(sizes, repeat) -> list:
    """W2 forward+backward under each launch configuration of :data:`TUNING` (a freshly
    compiled function each, so its kernels are rendered for it), and whether every
    configuration gives the same bits (loss and both gradients): results must not depend
    on the launch configuration."""
    from jitgrad.compiler import render_cuda
    from jitgrad.cuda import runtime

    default = (runtime.THREADS[runtime.backend()], render_cuda.UNROLL)
    rows = []
    try:
        for n in sizes:
            X, W, B = _w2_data(n)
            row, bits = {"n": n}, []
            for threads, unroll in TUNING:
                _kernel_config(threads, unroll)
                f = jitgrad.compile(lambda x, w, b: w2(x, w, b, jitgrad))
                t, got = _w2_timed(f, X, W, B, repeat)
                bits.append(got)
                row[f"t{threads}_u{unroll}_s"] = t
                row[f"t{threads}_u{unroll}_GBps"] = 24 * n / t / 1e9
            row["same_bits"] = all(b == bits[0] for b in bits)
            rows.append(row)
    finally:
        _kernel_config(*default)
    return rows


def _mlp_lib(lib, device):
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10)).to(device)


def _cnn_lib(lib, device):
    """The digits CNN of the CPU benchmarks (asv_benchmarks/benchmarks/training_workloads.py,
    examples/train_digits.py) on 8x8 images: conv 3x3 (32) -> ReLU -> max pool 2 -> conv
    3x3 (64) -> ReLU -> max pool 2 -> linear."""
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(256, 10)).to(device)


def bench_mlp(batches, repeat, torch_mod, smoke: bool) -> list:
    return [_step_row(_mlp_lib, (784,), batch, repeat, torch_mod, smoke) for batch in batches]


def bench_cnn(batches, repeat, torch_mod, smoke: bool) -> list:
    """The CNN training step (convolutions and pooling on the GPU)."""
    return [_step_row(_cnn_lib, (1, 8, 8), batch, repeat, torch_mod, smoke) for batch in batches]


def _training_step(lib, m, opt):
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _step_row(make_model, sample_shape, batch, repeat, torch_mod, smoke: bool) -> dict:
    """One training step (SGD, float32) of ``make_model(lib, "cuda")`` at ``batch``: jitgrad
    eager and compiled, PyTorch eager and torch.compile, on the same weights and data."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((batch, *sample_shape)).astype(np.float32)
    Y = rng.integers(0, 10, batch)
    row = {"batch": batch}
    m = make_model(jitgrad, "cuda")
    opt = jitgrad.optim.SGD(m.parameters(), lr=0.01)
    x = jitgrad.tensor(X, device="cuda")
    y = jitgrad.tensor(Y, device="cuda")
    step = _training_step(jitgrad, m, opt)
    cstep = jitgrad.compile(step)
    row["jitgrad_eager_s"] = timeit(lambda: step(x, y), repeat, 1 if smoke else 5)
    row["jitgrad_compiled_s"] = timeit(lambda: cstep(x, y), repeat, 1 if smoke else 5)
    if torch_mod is not None:
        T = torch_mod
        tm = make_model(T, "cuda")
        with T.no_grad():  # the same weights
            for p, q in zip(tm.parameters(), m.parameters()):
                p.copy_(T.from_numpy(q.detach().cpu().numpy()))
        topt = T.optim.SGD(tm.parameters(), lr=0.01)
        tx, ty = T.tensor(X, device="cuda"), T.tensor(Y, device="cuda")
        tstep = _training_step(T, tm, topt)
        ctstep = T.compile(tstep, dynamic=False)
        row["torch_eager_s"] = timeit(lambda: tstep(tx, ty), repeat, 5, T)
        row["torch_compile_s"] = timeit(lambda: ctstep(tx, ty), repeat, 5, T)
        row["vs_torch_compile"] = row["jitgrad_compiled_s"] / row["torch_compile_s"]
    return row


def bench_per_op(repeat, torch_mod) -> dict:
    """Eager latency of one small op with autograd: ``c = a * b + a`` on 16 float32 (per
    op), and of its forward and backward as a user writes it,
    ``(a * b + a).sum().backward()`` (per call)."""
    def chain(lib):
        a = lib.ones(16, device="cuda", requires_grad=True)
        b = lib.ones(16, device="cuda")

        def backward():
            a.grad = None
            (a * b + a).sum().backward()
        return (lambda: a * b + a), backward

    ops, backward = chain(jitgrad)
    row = {"jitgrad_us": 1e6 * timeit(ops, repeat, 20) / 2,
           "jitgrad_backward_us": 1e6 * timeit(backward, repeat, 20)}
    if torch_mod is not None:
        ops, backward = chain(torch_mod)
        row["torch_us"] = 1e6 * timeit(ops, repeat, 20, torch_mod) / 2
        row["torch_backward_us"] = 1e6 * timeit(backward, repeat, 20, torch_mod)
        row["ratio"] = row["jitgrad_us"] / row["torch_us"]
        row["backward_ratio"] = row["jitgrad_backward_us"] / row["torch_backward_us"]
    return row


def bench_launch(repeat) -> dict:
    """Launch overhead of a generated kernel: one eager ``x + y`` on 16 float32 without
    autograd (describe, look up, launch through Numba's dispatcher) and CuPy's own ``+``."""
    import cProfile
    import io
    import pstats

    from jitgrad.cuda import fast_launch

    x = jitgrad.ones(16, device="cuda")
    y = jitgrad.ones(16, device="cuda")
    xp = jitgrad.cuda.runtime.xp()
    cx, cy = xp.ones(16, np.float32), xp.ones(16, np.float32)
    row = {"jitgrad_add_us": 1e6 * timeit(lambda: x + y, repeat, 50),
           "cupy_add_us": 1e6 * timeit(lambda: cx + cy, repeat, 50)}
    default = fast_launch.ENABLED
    for name, on in (("jitgrad_add_dispatcher_us", False), ("jitgrad_add_fast_us", True)):
        fast_launch.ENABLED = on  # the same op through Numba's dispatcher / packed directly
        try:
            row[name] = 1e6 * timeit(lambda: x + y, repeat, 50)
        finally:
            fast_launch.ENABLED = default
    prof = cProfile.Profile()  # where an eager op's time goes (for the next optimisation)
    prof.enable()
    for _ in range(200):
        x + y
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
    row["profile_top"] = buf.getvalue()[-3000:]
    return row


def _section_text(name: str, r, copy_gbps) -> list[str]:
    """Report lines of one section (or its error)."""
    if isinstance(r, dict) and "error" in r:
        return [f"{name}: FAILED: {r['error'].strip().splitlines()[-1]}"]
    if name == "copy_GBps":
        return [f"copy bandwidth: {r:.0f} GB/s"]
    if name == "launch":
        return [f"launch: jitgrad x+y {r['jitgrad_add_us']:.1f} us (through Numba's "
                f"dispatcher {r['jitgrad_add_dispatcher_us']:.1f} us, packed fast path "
                f"{r['jitgrad_add_fast_us']:.1f} us), CuPy x+y {r['cupy_add_us']:.1f} us"]
    if name == "per_op":
        return [f"per-op eager: jitgrad {r['jitgrad_us']:.1f} us"
                + (f", torch {r['torch_us']:.1f} us, ratio {r['ratio']:.2f}"
                   if "torch_us" in r else "") + "   (c = a * b + a, autograd, per op)",
                f"(a * b + a).sum().backward(): jitgrad {r['jitgrad_backward_us']:.1f} us"
                + (f", torch {r['torch_backward_us']:.1f} us, ratio "
                   f"{r['backward_ratio']:.2f}" if "torch_us" in r else "")]
    if name == "tuning":
        return [f"W2 n={r['n']:.0e} by launch configuration (threads, unroll): "
                + ", ".join(f"({t}, {u}) {r[f't{t}_u{u}_s'] * 1e6:.1f} us "
                            f"{r[f't{t}_u{u}_GBps']:.0f} GB/s" for t, u in TUNING)
                + f"; same bits: {r['same_bits']}" for r in r]
    if name == "w2":
        copy = copy_gbps if isinstance(copy_gbps, float) else float("nan")
        return [f"W2 n={r['n']:.0e}: jitgrad {r['jitgrad_compiled_s'] * 1e6:.1f} us "
                f"({r['jitgrad_GBps']:.0f} GB/s, {r['jitgrad_GBps'] / copy:.0%} of copy)"
                + _vs_torch(r, 1e6, "us") for r in r]
    return [f"{name.upper()} step b={r['batch']}: jitgrad eager "
            f"{r['jitgrad_eager_s'] * 1e3:.3f} ms, compiled {r['jitgrad_compiled_s'] * 1e3:.3f} ms"
            + _vs_torch(r, 1e3, "ms") for r in r]


def _vs_torch(r: dict, scale: float, unit: str) -> str:
    """The PyTorch columns of a row (empty without PyTorch)."""
    if "torch_eager_s" not in r:
        return ""
    return (f"; torch eager {r['torch_eager_s'] * scale:.3f} {unit}, torch.compile "
            f"{r['torch_compile_s'] * scale:.3f} {unit}, jitgrad/torch.compile "
            f"{r['vs_torch_compile']:.2f}")


SECTIONS = ("copy_GBps", "launch", "per_op", "w2", "tuning", "mlp", "cnn")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".", help="folder for cuda_bench.json / .txt")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections to run (default: all): " + ", ".join(SECTIONS))
    args = ap.parse_args()
    if not jitgrad.cuda.is_available():
        sys.exit("no CUDA device: " + jitgrad.cuda.runtime.unavailable_reason())
    smoke = args.smoke or jitgrad.cuda.is_simulated()
    torch_mod = None if smoke else _torch()
    repeat = 1 if smoke else 7
    runs = {
        "copy_GBps": lambda: (copy_bandwidth(64, 1) if smoke else
                              copy_bandwidth(100_000_000, repeat)) / 1e9,
        "launch": lambda: bench_launch(repeat),
        "per_op": lambda: bench_per_op(repeat, torch_mod),
        "w2": lambda: bench_w2([64] if smoke else [10**6, 10**7, 10**8], repeat, torch_mod),
        "tuning": lambda: bench_tuning([64] if smoke else [10**7, 10**8], repeat),
        "mlp": lambda: bench_mlp([4] if smoke else [128, 4096], repeat, torch_mod, smoke),
        "cnn": lambda: bench_cnn([2] if smoke else [128, 4096], repeat, torch_mod, smoke),
    }
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        sys.exit(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    res = {"device": jitgrad.cuda.get_device_name(), "simulated": jitgrad.cuda.is_simulated(),
           "torch": getattr(torch_mod, "__version__", None)}
    os.makedirs(args.out, exist_ok=True)
    lines = [f"device: {res['device']}  torch: {res['torch']}"]
    print(lines[0], flush=True)
    failed = False
    for name in SECTIONS:
        if name not in only:
            continue
        t0 = time.perf_counter()
        try:
            res[name] = runs[name]()
        except Exception:  # one failing workload must not lose the others' figures
            failed = True
            res[name] = {"error": traceback.format_exc()}
            print(res[name]["error"], file=sys.stderr, flush=True)
        res.setdefault("section_s", {})[name] = time.perf_counter() - t0
        new = _section_text(name, res[name], res.get("copy_GBps"))
        lines += new
        print("\n".join(new), flush=True)
        # written after every section: a run cut short keeps what it measured
        with open(os.path.join(args.out, "cuda_bench.json"), "w") as fh:
            json.dump(res, fh, indent=1)
        with open(os.path.join(args.out, "cuda_bench.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
