"""Calling one fused kernel of a CUDA plan: the CUDA counterpart of
:class:`jitgrad.compiler.group_runner.GroupRunner`.

The plan's fusion, description and binding are the CPU plan's (one pipeline); only the
renderer (``render_cuda``), the memory (device arrays) and the launch differ. Constant
operands are baked once: numbers as kernel arguments, arrays copied to the device.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..compiler.describe import GroupBinding
from ..compiler.group_runner import alias_inplace_stores
from ..compiler.kernel_desc import KernelDesc
from ..compiler.pysource import log_source
from ..compiler.render_cuda import module_source_cuda
from . import launch, runtime

__all__ = ["CudaGroupRunner"]


class CudaGroupRunner:
    """Runs one fused CUDA kernel over a plan's environment (``run(env)``)."""

    native = False  # never a native (CPU) export

    def __init__(self, group, desc: KernelDesc, binding: GroupBinding, cache_dir,
                 host_scalars: frozenset = frozenset(), inplace: dict | None = None) -> None:
        self.group = group
        # a one-value operand the plan computes on the device is read by the kernel from
        # its one-element array ("item"): passing it by value would copy it to the host (a
        # wait for the device) at every call; constants and ``host_scalars`` (ids of values
        # the plan holds on the host: captured hyperparameters) go by value
        desc = replace(desc, operands=tuple(
            replace(op, pattern="item") if op.pattern == "scalar" and v.kind != "const"
            and id(v) not in host_scalars else op
            for v, op in zip(binding.operands, desc.operands)))
        # written values stored straight into their destinations (``inplace_writes.py``:
        # an optimizer's ``p - lr * g`` into ``p``), the copy-back then finds nothing to do
        self.inplace = inplace or {}
        desc = alias_inplace_stores(desc, binding, self.inplace, {})
        self._dst_operand = {j: next(k for k, o in enumerate(binding.operands) if o is dst)
                             for j, v in enumerate(binding.outputs)
                             if (dst := self.inplace.get(id(v))) is not None}
        self._externals = [k for k, (v, op) in enumerate(zip(binding.operands, desc.operands))
                           if op.pattern not in ("scalar", "item") and v.kind in ("in", "ext")]
        self.desc = desc
        self.binding = binding
        self.source = module_source_cuda(desc)
        log_source(f"plan kernel {desc.title} (cuda)", self.source)
        shape = group.shape
        self.n = int(math.prod(shape))
        p = binding.split
        self.R = int(math.prod(shape[:p]))
        self.C = int(math.prod(shape[p:]))
        self.baked: set = set()
        self._fixed: dict = {}
        for j, (v, op) in enumerate(zip(binding.operands, desc.operands)):
            if v.kind == "const":
                a = np.asarray(runtime.to_host(v.source))  # (a folded constant may be
                # a device array: read once here, on the host)
                self._fixed[j] = (np.dtype(v.dtype).type(a.reshape(-1)[0])
                                  if op.pattern == "scalar" else
                                  runtime.to_device(np.ascontiguousarray(a).reshape(-1)))
                self.baked.add(id(v))
        self._scalars = [np.dtype(dt).type(value) for value, dt in binding.scalars]
        # the launch, resolved once: compiled now (or loaded from the cache), not at the
        # first call; grid and sizes from the group's shape
        self._kernel = launch.kernel(desc)
        self._grid = launch.grid(desc, self.n, self.R, self.C)
        self._sizes = (self.n,) if desc.mode == "flat" else (self.R, self.C)
        n_args = (len(desc.operands) + len(self._scalars) + len(binding.outputs)
                  + len(binding.reductions))
        self._read_only = launch.read_only(desc, n_args)
        self._empty = (self.n if desc.mode == "flat" else self.R * self.C) == 0 \
            and not desc.reductions
        self._parts_written = desc.mode != "flat" or self.n > 0

    def run(self, env: dict) -> None:
        b, d = self.binding, self.desc
        xp = runtime.xp()
        args = []
        for j, (v, op) in enumerate(zip(b.operands, d.operands)):
            fixed = self._fixed.get(j)
            if fixed is not None:
                args.append(fixed)
                continue
            a = env[id(v)]
            if op.pattern == "scalar":  # a host value
                args.append(np.dtype(v.dtype).type(a.reshape(-1)[0].item()))
            elif a.flags.c_contiguous:
                args.append(a if a.ndim == 1 else a.reshape(-1))
            else:
                args.append(xp.ascontiguousarray(a).reshape(-1))
        args += self._scalars
        for j, v in enumerate(b.outputs):
            k = self._dst_operand.get(j)
            if k is not None:  # into the destination, unless it cannot take it here
                o = env[id(self.inplace[id(v)])]
                fits = o.flags.c_contiguous and not any(
                    xp.may_share_memory(o, args[m]) for m in self._externals if m != k)
                if (j, k) in d.aliases:  # the kernel updates operand k: no output argument
                    if not fits:
                        args[k] = args[k].copy()  # (the copy-back then writes o)
                    env[id(v)] = o if fits else args[k].reshape(v.shape)
                    continue
                if fits:
                    env[id(v)] = o
                    args.append(o.reshape(-1))
                    continue
            o = env[id(v)] = runtime.empty(v.shape, v.dtype)
            args.append(o.reshape(-1))
        partials = []
        for _, kind, _ in b.reductions:
            size = launch.partials_size(d, kind, self.n, self.R, self.C)
            # every part writes its partial; an empty flat space has one partial, 0
            r = runtime.empty(size, np.float64) if self._parts_written else \
                runtime.zeros(size, np.float64)
            partials.append(r)
            args.append(r)
        if not self._empty:
            launch.run(self._kernel, *self._grid, self._sizes, self._read_only, args)
        for r, (e, kind, scale) in zip(partials, b.reductions):
            env[id(e.out)] = launch.finish_sum(r, kind, scale, e.out.dtype, e.out.shape)
