"""Calling one fused kernel of a plan: operand preparation, outputs, the call, the sums.

A :class:`GroupRunner` is built once per fused group: the kernel (its native object when
large and Numba is not loaded, else the Numba dispatcher: ``native.py``), and a straight-line
Python caller generated for this kernel's operand patterns, outputs and sums (~1 us less per
call than generic loops over them, which is most of a scalar graph's time).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading

import numpy as np

from ..kernels.parallel import parallel_ok
from ..kernels.pool import run_parts
from . import cache, kernels, native
from .describe import GroupBinding
from .kernel_desc import KernelDesc
from .pysource import build_function, log_source
from .recycle import RECYCLE_MIN_BYTES, Recycler
from .render_cpu import module_source

__all__ = ["GroupRunner", "PARALLEL_MIN_WORK", "HOT_MIN_WORK", "alias_inplace_stores"]

#: A pool launch costs ~30 us (kernels/pool.py); a kernel runs on all threads when its
#: estimated work, elements x ``GroupBinding.cost`` (arrays touched + 0.5 per line + 4 per
#: transcendental call; a unit is ~0.1 ns on the 2-core project machine), is above this
#: (~150 us sequential): a plain ``a * b`` from ~430k elements (eager mode: 524k), the W2
#: kernel (2 transcendentals, 15 lines) from ~65k.
PARALLEL_MIN_WORK = 1_500_000

#: ...and from this much work (~20 us sequential) when the pool's workers are awake, spinning
#: after a launch or a GEMM run on the pool (``kernels/blas_threads.py``): a launch then costs
#: ~1 us, not a wake-up; otherwise the kernel runs on the calling thread (``run_parts``'s
#: ``hot_only``). The eager kernels' HOT_MIN_SIZE (64k elements of a multiply) in work units.
HOT_MIN_WORK = 200_000
_EXPORT_LOCK = threading.Lock()


class GroupRunner:
    """Runs one fused kernel over a plan's environment (``run(env)``)."""

    def __init__(self, group, desc: KernelDesc, binding: GroupBinding, cache_dir,
                 inplace: dict | None = None, placed: dict | None = None) -> None:
        self.group = group
        self.inplace = inplace or {}  # id(output Var) -> destination Var (inplace_writes)
        self.placed = placed or {}    # id(output or sum Var) -> array (placement.py)
        self.desc = desc = alias_inplace_stores(desc, binding, self.inplace, self.placed)
        self.binding = binding
        self.baked: set = set()  # ids of constant operands passed as values (not from env)
        self.source = module_source(desc)
        log_source(f"plan kernel {desc.title}", self.source)  # every plan, not once per process
        shape = group.shape
        self.n = int(math.prod(shape))
        p = binding.split
        self.R = int(math.prod(shape[:p]))
        self.C = int(math.prod(shape[p:]))
        self.parts = desc.parts(self.n, self.R, self.C)
        self.native = False
        self._ns: dict = {}
        self.kernel = self._kernel(cache_dir)
        # parallel when worth a pool launch and no BLAS worker may be spinning
        self.big = self.n * binding.cost >= PARALLEL_MIN_WORK
        self.warm = not self.big and self.n * binding.cost >= HOT_MIN_WORK and self.parts > 1
        self.run = self._caller()

    def _kernel(self, cache_dir):
        """The kernel to call: its native object when it is large, one exists and Numba is
        not loaded in this process (``native.py``); else the Numba dispatcher, which, for a
        large kernel, exports the native object after its first compilation."""
        large = self.n * self.binding.cost >= native.NATIVE_MIN_WORK and \
            native.native_enabled()
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
                        self._ns["K"] = d = kernels.load(self.desc, cache_dir, log=False).fn
                        self.native = False
                        return d(*args)
                return guarded
        disp = kernels.load(self.desc, cache_dir, log=False).fn
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
        b, d = self.binding, self.desc
        kinds: list = [int, int] + [int] * (1 if d.mode == "flat" else 2)
        for v, op in zip(b.operands, d.operands):
            kinds.append(np.dtype(v.dtype).type if op.pattern == "scalar" else
                         np.dtype(v.dtype))
        kinds += [np.dtype(dt).type for _, dt in b.scalars]
        aliased = {k for k, _ in d.aliases}
        kinds += [np.dtype(v.dtype) for k, v in enumerate(b.outputs) if k not in aliased]
        kinds += [np.dtype(np.float64)] * len(b.reductions)
        return kinds

    def _caller(self):
        """The straight-line caller: operands read from the environment (made contiguous
        and flat), outputs allocated (recycled when large), the kernel called sequentially or
        on the pool, sums finished (``kernels.finish_sum``). Plain Python, generated once."""
        b, d = self.binding, self.desc
        ns = self._ns
        ns.update({"empty": np.empty, "zeros": np.zeros, "ascontig": np.ascontiguousarray,
                   "parallel_ok": parallel_ok, "run_parts": run_parts, "K": self.kernel,
                   "N": self.n, "P": self.parts, "FINISH": kernels.finish_sum})
        args = ["N"] if d.mode == "flat" else [str(self.R), str(self.C)]
        body = []
        for j, (v, op) in enumerate(zip(b.operands, d.operands)):
            if op.pattern == "scalar" and v.kind == "const":  # fixed: the value, baked
                ns[f"C{j}"] = np.dtype(v.dtype).type(np.asarray(v.source).reshape(-1)[0])
                args.append(f"C{j}")
                self.baked.add(id(v))
                continue
            body.append(f"a{j} = env[{id(v)}]")
            if op.pattern == "scalar":
                args.append(f"a{j}[()]" if v.shape == () else
                            f"(a{j}[()] if a{j}.ndim == 0 else a{j}.reshape(-1)[0])")
            else:
                body += [f"if a{j}.ndim != 1 or not a{j}.flags.c_contiguous:",
                         f"    a{j} = ascontig(a{j}).reshape(-1)"]
                args.append(f"a{j}")
        for j, (value, dt) in enumerate(b.scalars):
            ns[f"S{j}"] = np.dtype(dt).type(value)
            args.append(f"S{j}")
        externals = [f"a{k}" for k, (v, op) in enumerate(zip(b.operands, d.operands))
                     if op.pattern != "scalar" and v.kind in ("in", "ext")]
        arguments = [f"a{k}" for k, (v, op) in enumerate(zip(b.operands, d.operands))
                     if op.pattern != "scalar" and v.kind == "in"]
        ns["SHARE"] = np.may_share_memory
        for j, v in enumerate(b.outputs):
            shape, dt = v.shape, v.dtype
            big = math.prod(shape) * np.dtype(dt).itemsize >= RECYCLE_MIN_BYTES
            ns[f"SH{j}"], ns[f"DT{j}"] = shape, dt
            dst = self.inplace.get(id(v))
            place = self.placed.get(id(v))
            if place is not None:  # where an effect asked for it, unless an argument shares it
                ns[f"PL{j}"] = place
                body.append(f"o{j} = PL{j}")
                if arguments:
                    body.append("if " + " or ".join(f"SHARE(o{j}, {a})" for a in arguments)
                                + ":")
                    body.append(f"    o{j} = empty(SH{j}, DT{j})")
                body.append(f"env[{id(v)}] = o{j}")
            elif dst is not None:  # stored into the destination itself when it can take it
                k = next(k for k, o in enumerate(b.operands) if o is dst)
                others = [a for a in externals if a != f"a{k}"]
                body.append(f"o{j} = env[{id(dst)}]")
                body.append(f"if not o{j}.flags.c_contiguous" + "".join(
                    f" or SHARE(o{j}, {a})" for a in others) + ":")
                aliased = (j, k) in d.aliases  # the kernel updates a{k}: no o{j} argument
                body += [f"    a{k} = a{k}.copy()", f"    o{j} = a{k}.reshape(SH{j})"] \
                    if aliased else [f"    o{j} = empty(SH{j}, DT{j})"]
                body.append(f"env[{id(v)}] = o{j}")
                if aliased:
                    continue
            elif big:  # too big for the heap: recycled across calls instead of fresh mmaps
                ns[f"RC{j}"] = Recycler(shape, dt)
                body.append(f"o{j} = env[{id(v)}] = RC{j}.get()")
            else:
                body.append(f"o{j} = env[{id(v)}] = empty(SH{j}, DT{j})")
            args.append(f"o{j}" if len(shape) == 1 else f"o{j}[None]" if shape == () else
                        f"o{j}.reshape(-1)")
        finish = []
        for j, (e, kind, scale) in enumerate(b.reductions):
            size = d.partials(kind, self.n, self.R, self.C)
            ns[f"RSH{j}"], ns[f"RDT{j}"] = e.out.shape, np.dtype(e.out.dtype)
            ns[f"KIND{j}"], ns[f"SC{j}"] = kind, scale
            value = f"FINISH(r{j}, KIND{j}, SC{j}, RDT{j}, RSH{j})"
            place = self.placed.get(id(e.out))
            if place is not None and kind != "all" and scale == 1.0 and self.parts and \
                    place.dtype == np.float64 and place.size == size:
                # the float64 totals are the value: the kernel writes them there
                ns[f"PR{j}"] = place.reshape(-1)
                body.append(f"r{j} = PR{j}")
            else:
                # no parts (an empty input): one zero partial
                body.append(f"r{j} = {'zeros' if self.parts == 0 else 'empty'}({size})")
                if place is not None:  # rounded (or scaled) into the place
                    ns[f"PR{j}"], ns["INTO"] = place, _into
                    value = f"INTO(PR{j}, {value})"
            args.append(f"r{j}")
            finish.append(f"env[{id(e.out)}] = {value}")
        call = ", ".join(args)
        if self.big or self.warm:  # warm: on the pool's workers only while they are awake
            hot_only = "" if self.big else ", True"
            body += ["if parallel_ok(N):", f"    run_parts(K, P, ({call},){hot_only})", "else:",
                     f"    K(0, P, {call})"]
        else:
            body.append(f"K(0, P, {call})")
        return build_function("group", ["env"], body + finish, ns)


def alias_inplace_stores(desc: KernelDesc, binding: GroupBinding, inplace: dict,
                         placed: dict) -> KernelDesc:
    """``desc`` with its stores into their destinations aliased to the operands that read
    them (``KernelDesc.aliases``): the kernel loads and stores one array, which the compiler
    vectorises; given two arrays over the same memory it keeps the scalar loop its overlap
    check falls back to (``p - lr * g`` over 200k float32: 61 -> 27 us)."""
    pairs = []
    for j, v in enumerate(binding.outputs):
        dst = inplace.get(id(v))
        if dst is None or id(v) in placed:
            continue
        k = next((k for k, o in enumerate(binding.operands) if o is dst), None)
        if k is not None and desc.operands[k].pattern == "full" and \
                desc.operands[k].dtype == desc.stores[j][1]:
            pairs.append((j, k))
    return dataclasses.replace(desc, aliases=tuple(pairs)) if pairs else desc


def _into(place: np.ndarray, value: np.ndarray) -> np.ndarray:
    """A finished sum stored into the array a plan placed it in (``placement.py``)."""
    np.copyto(place, value)
    return place
