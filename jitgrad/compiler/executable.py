"""The executable plan of a graph: fused kernel calls, BLAS/eager calls and views.

A plan is built once per traced signature: passes, fusion, code generation, kernel loading.
Running it reads the arguments and captured tensors, runs each step over an environment of
arrays, applies the graph's effects (in-place write-backs, ``.grad`` replacements) and returns
the output arrays (plus the values the backward graph keeps, for forward graphs).
``JITGRAD_DISABLE_JIT=1`` runs every equation through the reference interpreter instead.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

from .. import config
from .._malloc import tune_allocator
from ..kernels.parallel import parallel_ok
from ..kernels.pool import run_parts
from ..trace.interpreter import apply_effects, run_eqn
from ..trace.ir import Graph, Lit, Var
from . import cache, native
from .codegen_cpu import CHUNK, COLBLOCK, SCALAR_HELPERS, generate_group
from .fusion import describe, partition
from .memory import last_uses
from .passes import optimize
from .recycle import RECYCLE_MIN_BYTES, Recycler

__all__ = ["Plan", "build_plan"]

_MODULE_HEADER = """import numpy as np
from numba import njit

from jitgrad.kernels.scalar import KERNEL_FASTMATH as FASTMATH
{math}
f32 = np.float32
f64 = np.float64

"""
_DECOR = '@njit(cache=True, fastmath=FASTMATH, nogil=True, error_model="numpy")'


#: A pool launch costs ~30 us (kernels/pool.py); a kernel runs on all threads when its
#: estimated work, elements x ``GroupCode.cost`` (arrays touched + 0.5 per equation + 4 per
#: transcendental call; a unit is ~0.1 ns on the 2-core project machine), is above this
#: (~150 us sequential): a plain ``a * b`` from ~430k elements (eager mode: 524k), the W2
#: kernel (2 transcendentals, 15 equations) from ~65k.
PARALLEL_MIN_WORK = 1_500_000
_EXPORT_LOCK = threading.Lock()


class _GroupRunner:
    """Calls one fused kernel: prepares operands, allocates outputs, finishes reductions."""

    def __init__(self, group, code, module_source, cache_dir):
        self.group = group
        self.code = code
        self.source = module_source
        shape = group.shape
        self.shape = shape
        self.n = int(math.prod(shape))
        self.native = False
        self.kernel = self._kernel(cache_dir)
        p = code.split
        self.R = int(math.prod(shape[:p]))
        self.C = int(math.prod(shape[p:]))
        # parallel when worth a pool launch and no BLAS worker may be spinning
        self.big = self.n * code.cost >= PARALLEL_MIN_WORK
        self.flat = code.mode == "flat"
        # the parts the kernel's outer loop runs over (split across threads)
        self.parts = {"flat": (self.n + CHUNK - 1) // CHUNK, "rows": self.R,
                      "cols": (self.C + COLBLOCK - 1) // COLBLOCK}[code.mode]
        self.scalars = [np.dtype(dt).type(v) for v, dt in code.scalars]
        self.ops = [(id(v), pat, v.shape) for v, pat in code.operands]
        self.outs = [(id(v), v.shape, v.dtype) for v in code.outputs]
        # outputs too big for the heap: recycled across calls instead of fresh mmaps
        self.recyclers = [Recycler(shape, dt) if math.prod(shape) * np.dtype(dt).itemsize
                          >= RECYCLE_MIN_BYTES else None for _, shape, dt in self.outs]
        if code.mode == "flat":
            nparts = {"all": (self.n + CHUNK - 1) // CHUNK}
        elif code.mode == "rows":
            nparts = {"all": self.R, "rows": self.R}
        else:
            nparts = {"all": (self.C + COLBLOCK - 1) // COLBLOCK, "cols": self.C}
        self.reds = [(id(r.out), r.out.shape, r.out.dtype, kind, scale, nparts[kind])
                     for r, kind, scale in code.reductions]
        self.fast = self._specialised()

    def _kernel(self, cache_dir):
        """The kernel to call: its native object when it is large, one exists and Numba is
        not loaded in this process (``native.py``); else the Numba dispatcher, which, for a
        large kernel, exports the native object after its first compilation."""
        large = self.n * self.code.cost >= native.NATIVE_MIN_WORK and native.native_enabled()
        path = cache.module_path(self.source, cache_dir) if large else None
        layout = native.layout_of(self._arg_kinds()) if large else None
        if large and "numba" not in sys.modules:
            k = native.load(path, layout)
            if k is not None:
                self.native = True

                def guarded(*args):
                    try:
                        return k(*args)
                    except native.LayoutMismatch:  # never expected: Numba specialises
                        self._ns["K"] = d = cache.load_module(self.source, cache_dir).kernel
                        self.native = False
                        return d(*args)
                return guarded
        disp = cache.load_module(self.source, cache_dir).kernel
        if not large:
            return disp
        done = []

        def first_call(*args):
            disp(*args)
            with _EXPORT_LOCK:
                if not done:
                    done.append(native.export(disp, path, layout))
                    self._ns["K"] = disp  # later calls go straight to the dispatcher
        return first_call

    def _arg_kinds(self) -> list:
        """What the generated caller passes the kernel: Python ints (lo, hi, sizes), NumPy
        scalar types (scalar operands, literals), array dtypes (operands, outputs, sums)."""
        code = self.code
        kinds: list = [int, int] + [int] * (1 if code.mode == "flat" else 2)
        for v, pat in code.operands:
            kinds.append(np.dtype(v.dtype).type if pat == "scalar" else np.dtype(v.dtype))
        kinds += [np.dtype(dt).type for _, dt in code.scalars]
        kinds += [np.dtype(v.dtype) for v in code.outputs]
        kinds += [np.dtype(np.float64)] * len(code.reductions)
        return kinds

    def _specialised(self):
        """A straight-line Python caller for this kernel: operand preparation, output
        allocation, the kernel call and the reductions' final combination, unrolled once for
        this kernel's operand patterns (~1 us less per call than generic loops over them,
        which is most of a scalar graph's time). Plain Python: nothing here is compiled."""
        ns = self._ns = {
            "empty": np.empty, "zeros": np.zeros, "asarray": np.asarray,
            "ascontig": np.ascontiguousarray, "parallel_ok": parallel_ok,
            "run_parts": run_parts, "K": self.kernel, "BIG": self.big, "N": self.n,
            "P": self.parts}
        args = ["N"] if self.flat else [str(self.R), str(self.C)]
        body = []
        for j, (k, pat, shape) in enumerate(self.ops):
            if pat == "scalar":
                body.append(f"    a{j} = env[{k}]")
                args.append(f"a{j}[()]" if shape == () else
                            f"(a{j}[()] if a{j}.ndim == 0 else a{j}.reshape(-1)[0])")
            else:
                body.append(f"    a{j} = env[{k}]")
                body.append(f"    if a{j}.ndim != 1 or not a{j}.flags.c_contiguous:")
                body.append(f"        a{j} = ascontig(a{j}).reshape(-1)")
                args.append(f"a{j}")
        for j, sc in enumerate(self.scalars):
            ns[f"S{j}"] = sc
            args.append(f"S{j}")
        for j, (k, shape, dt) in enumerate(self.outs):
            ns[f"SH{j}"], ns[f"DT{j}"], ns[f"RC{j}"] = shape, dt, self.recyclers[j]
            if self.recyclers[j] is not None:
                body.append(f"    o{j} = env[{k}] = RC{j}.get()")
            else:
                body.append(f"    o{j} = env[{k}] = empty(SH{j}, DT{j})")
            args.append(f"o{j}" if len(shape) == 1 else f"o{j}[None]" if shape == () else
                        f"o{j}.reshape(-1)")
        finish = []
        for j, (k, shape, dt, kind, scale, size) in enumerate(self.reds):
            ns[f"RSH{j}"], ns[f"RDT{j}"], ns[f"SC{j}"] = shape, np.dtype(dt), scale
            if kind == "all":  # one partial sum per part, combined in a fixed order
                size = max(size, 1)
                body.append(f"    r{j} = {'zeros' if self.parts == 0 else 'empty'}({size})")
                val = f"r{j}[0]" if size == 1 else f"r{j}.sum()"
            else:  # every row's / column's total is written by the kernel
                body.append(f"    r{j} = empty({size})")
                val = f"r{j}"
            if scale != 1:
                val = f"{val} * SC{j}"
            args.append(f"r{j}")
            finish.append(f"    env[{k}] = asarray({val}, RDT{j}).reshape(RSH{j})")
        if self.big:
            body.append("    if parallel_ok(N):")
            body.append(f"        run_parts(K, P, ({', '.join(args)},))")
            body.append("    else:")
            body.append(f"        K(0, P, {', '.join(args)})")
        else:
            body.append(f"    K(0, P, {', '.join(args)})")
        body += finish
        exec("def run(env):\n" + "\n".join(body), ns)  # noqa: S102 - generated, trusted
        return ns["run"]


class Plan:
    """Runs a graph: reads inputs, executes its steps, applies its effects."""

    def __init__(self, graph: Graph, keep=(), cache_dir=None) -> None:
        self.graph = graph
        self.keep = optimize(graph, keep)
        self.reference = config.jit_disabled()
        ends = list(graph.outputs) + list(self.keep) + [v for _, v in graph.writes] + [
            v for _, v in graph.grad_sets if v is not None]
        self.consts = [(id(v), v.source) for v in graph.all_vars() + ends
                       if isinstance(v, Var) and v.kind == "const"]
        self.steps = partition(graph) if not self.reference else []
        self.calls = any(s.kind not in ("group", "view") for s in self.steps)
        self.out_ids = [id(v) for v in list(graph.outputs) + list(self.keep)]
        self.effects = bool(graph.writes or graph.grad_sets)
        ins = list(graph.inputs) + list(graph.externals)
        self.arg_slots = [(id(v), v.source.index) for v in ins
                          if v.source is not None and v.source.kind == "arg"]
        self.other_inputs = [v for v in ins if v.source is None or v.source.kind != "arg"]
        self.runners: list = []
        self.group_runners: list = []   # the fused kernels' runners (native or Numba)
        self.sources: list = []
        self.n_kernels = 0
        if not self.reference:
            self._build(cache_dir)

    def _build(self, cache_dir) -> None:
        # plans allocate their outputs fresh each call: keep freed blocks for reuse (a
        # process that runs native kernels only never loads the eager kernels, which tune it)
        tune_allocator()
        g = self.graph
        needed: set = set()
        for s in self.steps:
            eqns = [s.eqn] if s.eqn is not None else []
            if s.group is not None:
                for v in s.group.operands():
                    needed.add(id(v))
            for e in eqns:
                needed |= {id(i) for i in e.ins if isinstance(i, Var)}
        needed |= {id(v) for v in g.outputs} | {id(v) for v in self.keep}
        needed |= {id(v) for _, v in g.writes}
        needed |= {id(v) for _, v in g.grad_sets if v is not None}
        ends = {id(v) for v in g.outputs} | {id(v) for v in self.keep}
        ends |= {id(v) for _, v in g.writes} | {id(v) for _, v in g.grad_sets if v is not None}
        ends |= {id(v) for v in g.inputs} | {id(v) for v in g.externals}
        self.drops = last_uses(self.steps, ends)
        shared = _shared_kernels(self.steps)
        for s in self.steps:
            if s.eqn is not None and id(s.eqn) in shared:
                self.runners.append(shared[id(s.eqn)])
            elif s.kind == "group":
                code = generate_group(s.group, needed)
                src = _module_source(code)
                self.sources.append(src)
                gr = _GroupRunner(s.group, code, src, cache_dir)
                self.group_runners.append(gr)
                self.runners.append(gr.fast)
                self.n_kernels += 1
            else:
                self.runners.append(_call_runner(s.eqn))
        self.run = self._straight_line("run")
        self.run_arrays = self._straight_line("run_arrays")

    def _straight_line(self, which: str):
        """``run`` or ``run_arrays`` unrolled for this plan: input reads, each step and the
        frees after it, outputs, effects. Plain Python, generated once; the generic loops
        were most of a small graph's cost (W1 compiled: 7.5 -> 6.0 us)."""
        ns = {"apply_effects": apply_effects, "G": self.graph, "errstate": np.errstate,
              "CONSTS": dict(self.consts), "asarray": np.asarray}
        body = ["    env = CONSTS.copy()" if self.consts else "    env = {}"]
        if which == "run":
            body += [f"    env[{k}] = flat[{i}]._data" for k, i in self.arg_slots]
            for j, v in enumerate(self.other_inputs):
                ns[f"SRC{j}"] = v.source
                body.append(f"    env[{id(v)}] = SRC{j}.read(flat)")
        else:
            body += [f"    env[{id(v)}] = flat[{i}]" for i, v in enumerate(self.graph.inputs)]
        steps = []
        for j, (r, drop) in enumerate(zip(self.runners, self.drops)):
            ns[f"R{j}"] = r
            steps.append(f"R{j}(env)")
            steps += [f"del env[{k}]" for k in drop]  # free after the last reader
        if self.calls:  # NumPy/BLAS give inf/nan silently, as the fused kernels do
            body.append("    with errstate(all='ignore'):")
            body += ["        " + st for st in steps] or ["        pass"]
        else:
            body += ["    " + st for st in steps]
        if which == "run":
            body.append(f"    outs = [{', '.join(f'env[{k}]' for k in self.out_ids)}]")
            if self.effects:
                body.append("    apply_effects(G, env, flat)")
        else:
            body.append("    outs = [" + ", ".join(f"asarray(env[{id(v)}])"
                                                  for v in self.graph.outputs) + "]")
        body.append("    return outs")
        exec(f"def {which}(flat):\n" + "\n".join(body), ns)  # noqa: S102 - generated
        return ns[which]

    # ------------------------------------------------------------------------- running
    def _env(self, in_arrays: list) -> dict:
        env = dict(self.consts)
        for v, a in zip(self.graph.inputs, in_arrays):
            env[id(v)] = a
        return env

    def _execute(self, env: dict) -> None:
        """``JITGRAD_DISABLE_JIT``: every equation through the reference interpreter (a built
        plan runs its straight-line ``run``/``run_arrays`` instead)."""
        for e in self.graph.eqns:
            env[id(e.out)] = run_eqn(e, env, reference=True)

    def run(self, flat: list) -> list:
        """Forward graphs: arguments are the flattened call's tensors. Returns the outputs,
        then the kept values (residuals of the backward). A built plan replaces this with
        its straight-line version; this one serves ``JITGRAD_DISABLE_JIT``."""
        g = self.graph
        env = dict(self.consts)
        for k, i in self.arg_slots:
            env[k] = flat[i]._data
        for v in self.other_inputs:
            env[id(v)] = v.source.read(flat)
        self._execute(env)
        outs = [env[k] for k in self.out_ids]
        if self.effects:
            apply_effects(g, env, flat)
        return outs

    def run_arrays(self, arrays: list) -> list:
        """Backward graphs: inputs are given positionally as arrays. (Replaced by the
        straight-line version in a built plan.)"""
        env = self._env(arrays)
        self._execute(env)
        return [np.asarray(env[id(v)]) for v in self.graph.outputs]

    # ---------------------------------------------------------------------- debugging
    def describe_groups(self) -> list:
        return describe(self.steps)

    def source(self) -> str:
        return "\n\n".join(self.sources)



def _slots(e) -> tuple:
    """An equation's inputs as ``(is_var, id(Var) | literal value)``, resolved once."""
    return tuple((True, id(i)) if isinstance(i, Var) else
                 (False, i.value if isinstance(i, Lit) else i) for i in e.ins)


def _args(slots: tuple, env: dict) -> list:
    return [env[x] if is_var else x for is_var, x in slots]


def _call_runner(e):
    """A runner for one non-fused equation (BLAS, reductions, opaque kernels): the function
    and the argument slots are resolved once, not at every call."""
    if isinstance(e.op, str) or e.op.kind == "elementwise":
        return lambda env: env.__setitem__(id(e.out), run_eqn(e, env, reference=False))
    fn = e.op.ref if e.op.fwd is None else e.op.fwd
    slots = _slots(e)
    params, key, dtype = e.params, id(e.out), np.dtype(e.out.dtype)

    def run(env):
        out = fn(*_args(slots, env), **params)
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        env[key] = out if out.dtype == dtype else out.astype(dtype)
    return run


def _shared_kernels(steps) -> dict:
    """Pairs of calls one kernel computes together (an op declaring ``extra["joint"] =
    (partner op name, fn)``, e.g. max-pooling's indices with its values, over the same inputs
    and parameters): the first of the pair runs ``fn`` and sets both outputs, the second does
    nothing. Returns id(eqn) -> runner."""
    calls = [s.eqn for s in steps if s.kind != "group" and s.eqn is not None
             and not isinstance(s.eqn.op, str)]
    out: dict = {}
    for e in calls:
        joint = e.op.extra.get("joint")
        if joint is None or id(e) in out:
            continue
        partner_name, fn = joint
        for f in calls:
            if (f.op.name == partner_name and id(f) not in out and f.ins == e.ins
                    and all(f.params.get(k, v) == v for k, v in e.params.items())):
                break
        else:
            continue

        first, second = (e, f) if calls.index(e) < calls.index(f) else (f, e)
        out[id(first)] = _joint_runner(e, f, fn)
        out[id(second)] = _nothing
    return out


def _joint_runner(e, partner, fn):
    """Runs ``fn`` once for ``e`` and its partner call, setting both outputs."""
    slots, params, own, other = _slots(e), e.params, id(e.out), id(partner.out)

    def both(env):
        env[other], env[own] = fn(*_args(slots, env), **params)
    return both


def _nothing(env) -> None:
    """The second call of a shared-kernel pair: its output was set by the first."""


def _module_source(code) -> str:
    """The kernel's module: imports, then ``kernel`` (one sequential function, compiled once;
    threads run ranges of its parts)."""
    helpers = sorted(m for m in code.math if m in SCALAR_HELPERS)
    vmath = sorted(m for m in code.math if m not in SCALAR_HELPERS)
    imports = "".join(f"from jitgrad.kernels.{mod} import {', '.join(names)}\n"
                      for mod, names in (("scalar", helpers), ("vmath", vmath)) if names)
    head = _MODULE_HEADER.format(math=imports)
    return head + "\n" + _DECOR + "\n" + code.body.replace("{NAME}", "kernel") + "\n"


def build_plan(graph: Graph, keep=(), cache_dir=None) -> Plan:
    """Compile ``graph`` into a plan (``keep``: extra values to return, e.g. residuals)."""
    return Plan(graph, keep, cache_dir)
