"""The executable plan of a graph: fused kernel calls, BLAS/eager calls and views.

A plan is built once per traced signature: passes, fusion, code generation, kernel loading.
Running it reads the arguments and captured tensors, runs each step over an environment of
arrays, applies the graph's effects (in-place write-backs, ``.grad`` replacements) and returns
the output arrays (plus the values the backward graph keeps, for forward graphs).
``JITGRAD_DISABLE_JIT=1`` runs the graph on the reference interpreter (``trace/interpreter.py``)
instead.
"""

from __future__ import annotations

import numpy as np

from .. import config
from .._malloc import tune_allocator
from ..devices import CUDA0, as_array, is_cpu_array, to_device
from ..kernels.blas_threads import route_blas_threads
from ..kernels.parallel import BLAS_THREADED_WORK, note_blas
from ..trace.interpreter import (
    apply_effects,
    check_writes,
    graph_ends,
    interpret,
    last_uses,
    run_eqn,
)
from ..trace.ir import Graph, Lit, Var, is_effect
from .chains import fused_chains, is_2d_transpose, nothing
from .classifier_head import fused_heads
from .describe import describe_group
from .effect_lines import bump_lines, effect_lines, fresh_grad_values
from .fusion import describe, partition
from .group_runner import GroupRunner
from .host_values import host_values
from .inplace_writes import plan_inplace_writes
from .passes import optimize
from .placement import plan_placements
from .pysource import build_function
from .schedule import hoist_sinks
from .shared_patches import shared_patch_runners

__all__ = ["Plan", "build_plan"]

class Plan:
    """Runs a graph: reads inputs, executes its steps, applies its effects."""

    def __init__(self, graph: Graph, keep=(), cache_dir=None, fresh_from: int | None = None
                 ) -> None:
        self.graph = graph
        self.keep = optimize(graph, keep)
        self.reference = config.jit_disabled()
        ends = list(graph.outputs) + list(self.keep) + [v for _, v in graph.writes] + [
            v for _, v in graph.grad_sets if v is not None]
        self.cuda = graph.device == "cuda"
        self.consts = [(id(v), _on_device(v.source) if self.cuda else v.source)
                       for v in graph.all_vars() + ends
                       if isinstance(v, Var) and v.kind == "const"]
        #: values a CUDA plan holds on the host (a CPU step counter): CPU kernels for them
        self.host = host_values(graph)
        self.steps = hoist_sinks(graph, partition(graph, self.host)) \
            if not self.reference else []
        self.calls = any(s.kind not in ("group", "view") for s in self.steps)
        self.out_ids = [id(v) for v in list(graph.outputs) + list(self.keep)]
        # outputs the caller owns that the plan holds too are copies: a constant (returned
        # at every call); for run_arrays (backward plans: gradients, which .grad may keep
        # and accumulate into in place) an input too (a cotangent passed through)
        self.copied = {k for k, v in enumerate(graph.outputs) if v.kind == "const"}
        self.copied_arrays = {k for k, v in enumerate(graph.outputs) if v.kind in ("const", "in")}
        if fresh_from is not None:  # outputs the caller will own (gradients): fresh arrays
            self.copied |= {k for k, v in enumerate(graph.outputs) if k >= fresh_from and (
                v.kind != "op" or any(u is v for u in graph.outputs[:k]))}
        self.effects = bool(graph.writes or graph.grad_sets)
        #: ``committed[0]``: whether the running (or last) call of ``run`` has started to
        #: change state outside the plan -- a kernel writing a caller's array in place, a
        #: value placed in an effect's array, an effect (a collective), the write-backs. A
        #: call that raises before that changed nothing (``CompiledFunction`` then runs it
        #: eagerly, for eager mode's error and effects)
        self.committed = [0]
        #: whether an equation other than a check acts outside (the reference ``run``)
        self._effect_eqns = int(any(is_effect(e) and e.op != "check" for e in graph.eqns))
        ins = list(graph.inputs) + list(graph.externals)
        self.arg_slots = [(id(v), v.source.index) for v in ins
                          if v.source is not None and v.source.kind == "arg"]
        self.other_inputs = [v for v in ins if v.source is None or v.source.kind != "arg"]
        self.runners: list = []
        self.inplace: dict = {}  # step index -> {id(value): destination Var}
        self.placed: dict = {}   # step index -> {id(value): array an effect asked for}
        self.group_runners: list = []   # the fused kernels' runners (native or Numba)
        self.sources: list = []
        self.n_kernels = 0
        if not self.reference:
            self._build(cache_dir)

    def _build(self, cache_dir) -> None:
        # plans allocate their outputs fresh each call: keep freed blocks for reuse (a
        # process that runs native kernels only never loads the eager kernels, which tune it)
        tune_allocator()
        route_blas_threads()  # OpenBLAS's threaded work on the kernels' pool
        g = self.graph
        needed: set = set()
        for s in self.steps:
            eqns = [s.eqn] if s.eqn is not None else []
            if s.group is not None:
                for v in s.group.operands():
                    needed.add(id(v))
            for e in eqns:
                needed |= {id(i) for i in e.ins if isinstance(i, Var)}
        ends = graph_ends(g, self.keep)
        needed |= ends
        self.inplace = plan_inplace_writes(g, self.steps, self.keep)
        self.placed = plan_placements(g, self.steps, self.keep)
        chains, chain_reads, found = fused_chains(self.steps, ends)
        if not self.cuda:  # a classifier head around a chain: one step
            claimed = set(self.inplace) | set(self.placed)  # steps writing given arrays
            heads, head_reads = fused_heads(self.steps, found, ends, claimed)
            chains.update(heads)
            chain_reads.update(head_reads)
        reads = [s.group.operands() if s.kind == "group" else
                 chain_reads.get(id(s.eqn), s.eqn.ins) for s in self.steps]
        self.drops = last_uses(reads, ends)
        shared = _shared_kernels(self.steps)
        shared.update(chains)
        #: convolutions whose weight gradient takes its forward's patch matrices
        self.shared_patches = 0
        if not self.cuda:
            pairs = shared_patch_runners(self.steps, self.placed, _args, _slots)
            self.shared_patches = len(pairs) // 2
            for k, runner in pairs.items():
                shared.setdefault(k, runner)
        described = {k: describe_group(s.group, needed) for k, s in enumerate(self.steps)
                     if s.kind == "group" and not (s.eqn is not None and id(s.eqn) in shared)}
        moved = _host_scalars(self.steps, described, ends) if self.cuda else frozenset()
        host_scalars = moved | self.host  # taken by value by CUDA kernels
        for k, s in enumerate(self.steps):
            if s.eqn is not None and id(s.eqn) in shared:
                self.runners.append(shared[id(s.eqn)])
            elif s.kind != "group" and id(s.eqn.out) in moved:
                # a captured host number moved to the device only for kernels that take
                # it by value: the host value itself (no copy to the device per call)
                self.runners.append(InlineStep(
                    f"env[{id(s.eqn.out)}] = env[{id(s.eqn.ins[0])}]", None))
            elif s.kind == "group":
                desc, binding = described[k]
                if self.cuda and not s.group.host:
                    gr = _cuda_runner()(s.group, desc, binding, cache_dir, host_scalars,
                                           self.inplace.get(k))
                else:
                    gr = GroupRunner(s.group, desc, binding, cache_dir,
                                     inplace=self.inplace.get(k), placed=self.placed.get(k))
                self.sources.append(gr.source)
                self.group_runners.append(gr)
                self.runners.append(gr.run)
                self.n_kernels += 1
            else:
                place = self.placed.get(k)
                self.runners.append(_inline_view(s.eqn)
                                    or (None if place or self.cuda else _inline_matmul(s.eqn))
                                    or _call_runner(s.eqn, place))
        self._fold_transposes(ends, reads)
        self._drop_baked_consts(ends)
        self.run = self._straight_line("run")
        self.run_arrays = self._straight_line("run_arrays")

    def _fold_transposes(self, ends: set, reads: list) -> None:
        """A transpose only a matrix-product line reads is written into that line as its
        operand (``env[s].T``), not as a step of its own: the view, its environment entry and
        its ``del`` go (an MLP step: 8 of its 17 views). The source's ``del`` moves to the
        product if it came before it: the transpose was the source's last reader, or another
        step between the two was (``reads``: what each step reads)."""
        readers: dict = {}
        for k, ins in enumerate(reads):
            for i in ins:
                if isinstance(i, Var):
                    readers.setdefault(id(i), []).append(k)
        for j, (s, r) in enumerate(zip(self.steps, self.runners)):
            e = s.eqn
            if not isinstance(r, InlineStep) or s.kind != "view" or not is_2d_transpose(e):
                continue
            use = readers.get(id(e.out), [])
            if len(use) != 1 or id(e.out) in ends:
                continue
            m = use[0]
            prod = self.runners[m]
            if not isinstance(prod, InlineStep) or not prod.product:
                continue
            src = id(e.ins[0])
            prod.line = prod.line.replace(f"env[{id(e.out)}]", f"env[{src}].T")
            self.runners[j] = InlineStep("", None)
            self.drops[m] = [v for v in self.drops[m] if v != id(e.out)]
            dropped_at = next((d for d in range(j, m) if src in self.drops[d]), None)
            if dropped_at is not None:
                self.drops[dropped_at] = [v for v in self.drops[dropped_at] if v != src]
                self.drops[m].append(src)

    def _drop_baked_consts(self, ends: set) -> None:
        """Constants every reader of which has baked them into its kernel call are not put
        in the environment (nor freed from it): one dict copy less per call."""
        baked = set().union(*(gr.baked for gr in self.group_runners))
        if not baked:
            return
        read = set(ends)
        runners = iter(self.group_runners)  # one per group step, in step order
        for s in self.steps:
            if s.kind == "group":
                gr = next(runners)
                read |= {id(v) for v in s.group.operands() if id(v) not in gr.baked}
            else:
                read |= {id(i) for i in s.eqn.ins if isinstance(i, Var)}
        gone = {k for k, _ in self.consts if k in baked and k not in read}
        self.consts = [(k, src) for k, src in self.consts if k not in gone]
        self.drops = [[k for k in d if k not in gone] for d in self.drops]

    def run_profiled(self, flat: list) -> list:
        """:meth:`run` recording one profiler event per step (``jitgrad.profiler``: a window
        records). Its straight-line code is generated at the first such call."""
        fn = self.__dict__.get("_run_profiled")
        if fn is None:
            fn = self._run_profiled = self._straight_line("run", profiled=True)
        return fn(flat)

    def run_arrays_profiled(self, arrays: list) -> list:
        """:meth:`run_arrays` recording one profiler event per step."""
        fn = self.__dict__.get("_run_arrays_profiled")
        if fn is None:
            fn = self._run_arrays_profiled = self._straight_line("run_arrays", profiled=True)
        return fn(arrays)

    def step_names(self) -> list[str]:
        """What each step is called in a profile: ``jitgrad::kernel(tanh, mul, sum)`` for a
        fused group's kernel (its ops, in order, each once), ``jitgrad::<op>`` for a step of
        one equation (a BLAS product, a convolution, a view)."""
        names = []
        for s in self.steps:
            if s.kind == "group":
                ops = list(dict.fromkeys(
                    e.op if isinstance(e.op, str) else e.op.name
                    for e in (*s.group.eqns, *s.group.reductions)))
                shown = ", ".join(ops[:8]) + (", ..." if len(ops) > 8 else "")
                names.append(f"jitgrad::kernel({shown})")
            else:
                op = s.eqn.op
                names.append(f"jitgrad::{op if isinstance(op, str) else op.name}")
        return names

    def _straight_line(self, which: str, profiled: bool = False):
        """``run`` or ``run_arrays`` unrolled for this plan: input reads, each step and the
        frees after it, outputs, effects. Plain Python, generated once; the generic loops
        were most of a small graph's cost (W1 compiled: 7.5 -> 6.0 us). ``profiled``: each
        step timed and recorded in the profiler's window (see :meth:`run_profiled`)."""
        ns = {"apply_effects": apply_effects, "G": self.graph, "errstate": np.errstate,
              "CONSTS": dict(self.consts),
              "asarray": as_array if self.cuda else np.asarray}
        body = ["    env = CONSTS.copy()" if self.consts else "    env = {}"]
        names = self.step_names() if profiled else None
        if profiled:
            from .._profiling import ACTIVE, now_ns

            ns.update({"PROFILING": ACTIVE, "NOW": now_ns})
            body.append("    REC = PROFILING[0]")
        if which == "run":
            body += [f"    env[{k}] = flat[{i}]._data" for k, i in self.arg_slots]
            for j, v in enumerate(self.other_inputs):
                if v.source is None:  # (a graph only ``run_arrays`` runs: never read)
                    expr, ns[f"SRC{j}"] = f"SRC{j}.read(flat)", None
                else:
                    expr, ns[f"SRC{j}"] = v.source.read_expr(f"SRC{j}")
                body.append(f"    env[{id(v)}] = {expr}")
            dsts = list(dict.fromkeys(id(d) for m in self.inplace.values() for d in m.values()))
            if dsts:  # kernels write these in place: read-only raises before any step
                ns["CHECK_WRITES"] = check_writes
                body.append("    if not (" + " and ".join(
                    f"getattr(env[{k}].flags, 'writeable', True)" for k in dsts) + "):")
                body.append("        CHECK_WRITES(G, flat)")
        else:
            body += [f"    env[{id(v)}] = flat[{i}]" for i, v in enumerate(self.graph.inputs)]
        steps = []
        commit_at = self._first_commit() if which == "run" else None
        if commit_at is not None:
            ns["COMMITTED"] = self.committed
            body.append("    COMMITTED[0] = 0")
        for j, (r, drop) in enumerate(zip(self.runners, self.drops)):
            if j == commit_at:
                steps.append("COMMITTED[0] = 1")
            # (timed: every step that runs something -- not a transpose folded into its
            # product, nor a call a chain's first call computed)
            timed = profiled and r is not nothing and not (isinstance(r, InlineStep)
                                                           and not r.line)
            if timed:
                ns[f"N{j}"] = names[j]
                steps.append("T0 = NOW()")
            if isinstance(r, InlineStep):  # a view or a product: one line, no call
                if r.line:  # (empty: a transpose folded into its product's line)
                    ns[f"P{j}"] = r.param
                    steps.append(r.line.replace("PARAM", f"P{j}"))
            else:
                ns[f"R{j}"] = r
                steps.append(f"R{j}(env)")
            if timed:
                steps.append(f"if REC is not None: REC.add(N{j}, T0, NOW(), 'kernel')")
            steps += [f"del env[{k}]" for k in drop]  # free after the last reader
        if self.calls:  # NumPy/BLAS give inf/nan silently, as the fused kernels do
            body.append("    with errstate(all='ignore'):")
            body += ["        " + st for st in steps] or ["        pass"]
        else:
            body += ["    " + st for st in steps]
        if which == "run":
            body.append("    outs = [" + ", ".join(
                f"env[{k}].copy()" if j in self.copied else f"env[{k}]"
                for j, k in enumerate(self.out_ids)) + "]")
            if self.effects and commit_at == len(self.runners):
                body.append("    COMMITTED[0] = 1")
            if self.effects and self.cuda:
                ns["BUMP"] = self._bump_function()
                body.append("    apply_effects(G, env, flat, BUMP)")
            elif self.effects:  # written out: no loops over the effects at each call
                fresh = fresh_grad_values(self.graph, self.steps, self.keep, self.placed,
                                          self.inplace)
                body += ["    " + ln for ln in effect_lines(self.graph, ns, fresh)]
        else:
            body.append("    outs = [" + ", ".join(
                f"asarray(env[{id(v)}]).copy()" if j in self.copied_arrays
                else f"asarray(env[{id(v)}])"
                for j, v in enumerate(self.graph.outputs)) + "]")
        body.append("    return outs")
        return build_function(f"plan_{which}", ["flat"], [ln[4:] for ln in body], ns)

    def _first_commit(self) -> int | None:
        """The index of the first step that changes state outside the plan (see
        ``committed``), ``len(steps)`` when only the write-backs at the end do, None when
        nothing does."""
        for j, s in enumerate(self.steps):
            if j in self.inplace or j in self.placed or (
                    s.kind != "group" and s.eqn is not None and is_effect(s.eqn)
                    and s.eqn.op != "check"):
                return j
        return len(self.steps) if self.effects else None

    def _bump_function(self):
        """The graph's version bumps as a function of ``flat`` (``effect_lines.bump_lines``)."""
        if not self.graph.bumps:
            return None
        ns: dict = {}
        return build_function("plan_bump", ["flat"], bump_lines(self.graph, ns), ns)

    # ------------------------------------------------------------------------- running
    def run(self, flat: list) -> list:
        """Forward graphs: arguments are the flattened call's tensors. Returns the outputs,
        then the kept values (residuals of the backward). A built plan replaces this with
        its straight-line version; this one, the reference interpreter, serves
        ``JITGRAD_DISABLE_JIT``."""
        env = dict(self.consts)
        for k, i in self.arg_slots:
            env[k] = flat[i]._data
        for v in self.other_inputs:
            env[id(v)] = v.source.read(flat)
        # (the interpreter writes nothing in place: only its effect equations act outside)
        self.committed[0] = self._effect_eqns
        interpret(self.graph, env, self.keep)
        outs = [env[k].copy() if j in self.copied else env[k]
                for j, k in enumerate(self.out_ids)]
        if self.effects:
            self.committed[0] = 1
            apply_effects(self.graph, env, flat)
        return outs

    def run_arrays(self, arrays: list) -> list:
        """Backward graphs: inputs are given positionally as arrays. (Replaced by the
        straight-line version in a built plan.)"""
        env = dict(self.consts)
        for v, a in zip(self.graph.inputs, arrays):
            env[id(v)] = a
        interpret(self.graph, env)
        return [np.array(env[id(v)]) if j in self.copied_arrays else np.asarray(env[id(v)])
                for j, v in enumerate(self.graph.outputs)]

    # ---------------------------------------------------------------------- debugging
    def describe_groups(self) -> list:
        return describe(self.steps)

    def source(self) -> str:
        return "\n\n".join(self.sources)



def _on_device(a):
    """A CUDA plan's constant: on the device (kernels and CuPy take no host arrays)."""
    return to_device(as_array(a), CUDA0)


def _host_scalars(steps, described: dict, ends: set) -> frozenset:
    """Ids of the values a CUDA plan keeps on the host: ``to_device`` of a one-value host
    array (a hyperparameter captured as a CPU tensor, such as an optimizer's learning rate)
    that only fused kernels read, each by value (pattern ``scalar``), and that the plan
    does not return. Moving them to the device per call would copy 8 bytes and then, for
    the kernel's by-value argument, copy them back (a wait for the device each time)."""
    moved = {id(s.eqn.out): s.eqn for s in steps if s.kind != "group" and s.eqn is not None
             and getattr(s.eqn.op, "name", None) == "to_device"
             and isinstance(s.eqn.ins[0], Var) and s.eqn.ins[0].shape == ()
             and str(s.eqn.params.get("in_device")) == "cpu"}
    if not moved:
        return frozenset()
    by_value, other = set(), set(ends)
    for k, s in enumerate(steps):
        if k in described:
            desc, binding = described[k]
            for v, op in zip(binding.operands, desc.operands):
                (by_value if op.pattern == "scalar" else other).add(id(v))
        elif s.kind == "group":  # a shared runner: reads its operands as arrays
            other.update(id(v) for v in s.group.operands())
        else:
            other.update(id(i) for i in s.eqn.ins if isinstance(i, Var))
    return frozenset(k for k in moved if k in by_value and k not in other)


def _cuda_runner():
    from ..cuda.plan_runner import CudaGroupRunner

    return CudaGroupRunner


def _slots(e) -> tuple:
    """An equation's inputs as ``(is_var, id(Var) | literal value)``, resolved once."""
    return tuple((True, id(i)) if isinstance(i, Var) else
                 (False, i.value if isinstance(i, Lit) else i) for i in e.ins)


def _args(slots: tuple, env: dict) -> list:
    return [env[x] if is_var else x for is_var, x in slots]


class InlineStep:
    """A plan step written into the plan's straight-line code as one line (``PARAM``: the
    name its parameter gets there), not called: the views BLAS operands and reshaped sums
    go through (~1.5 us a call, 17 of them in an MLP training step)."""

    __slots__ = ("line", "param", "product")

    def __init__(self, line: str, param, product: bool = False) -> None:
        self.line, self.param = line, param
        self.product = product  # a matrix product (its transposed operands fold in)


def _inline_view(e) -> InlineStep | None:
    """``e`` as one line if it is a permute or a reshape (a ``view()``, which must not
    copy, calls the op's function: its error); None otherwise."""
    if isinstance(e.op, str) or not e.op.view or not isinstance(e.ins[0], Var):
        return None
    src, dst = id(e.ins[0]), id(e.out)
    if e.op.permutes:
        return InlineStep(f"env[{dst}] = env[{src}].transpose(PARAM)", tuple(e.params["dims"]))
    if e.op.keeps_order and "node" in e.params and not e.params.get("copy"):  # reshape
        shape = tuple(e.params["shape"])
        if not e.params.get("strict"):
            return InlineStep(f"env[{dst}] = env[{src}].reshape(PARAM)", shape)
        # view(): the op's own function (it raises where the strides do not allow it)
        return InlineStep(f"env[{dst}] = PARAM[0](env[{src}], *PARAM[1:])",
                          (e.op.ref, shape, e.params["in_shape"], e.params["node"], True))
    return None


def _inline_matmul(e) -> InlineStep | None:
    """``e`` as one line if it is a float matrix product (``np.matmul`` of two 2-D values of
    the result's dtype: what ``linalg._blas_matmul`` calls, minus its checks for the cases
    this excludes), noting a BLAS call big enough to be threaded (``note_blas``)."""
    from ..ops.linalg import MATMUL

    if e.op is not MATMUL or e.params.get("bmm") or len(e.ins) != 2 or not all(
            isinstance(i, Var) and len(i.shape) == 2 and np.dtype(i.dtype) == np.dtype(
                e.out.dtype) for i in e.ins) or np.dtype(e.out.dtype).kind != "f":
        return None
    a, b = e.ins
    line = f"env[{id(e.out)}] = PARAM[0](env[{id(a)}], env[{id(b)}])"
    work = int(a.shape[0]) * int(a.shape[1]) * int(b.shape[1])
    if work >= BLAS_THREADED_WORK:
        line += f"; PARAM[1]({work})"
    return InlineStep(line, (np.matmul, note_blas), product=True)


def _call_runner(e, placed: dict | None = None):
    """A runner for one non-fused equation (BLAS, reductions, opaque kernels): the function
    and the argument slots are resolved once, not at every call. ``placed``: the array its
    value goes into (``placement.py``; its op's ``extra["into"]`` writes it there)."""
    if isinstance(e.op, str) or e.op.kind == "elementwise":
        return lambda env: env.__setitem__(id(e.out), run_eqn(e, env, reference=False))
    fn = e.op.ref if e.op.fwd is None else e.op.fwd
    slots = _slots(e)
    params, key, dtype = e.params, id(e.out), np.dtype(e.out.dtype)
    place = (placed or {}).get(key)
    if place is not None:
        into = e.op.extra["into"]

        def run_into(env):
            env[key] = into(*_args(slots, env), out=place, **params)
        return run_into

    def run(env):
        out = fn(*_args(slots, env), **params)
        if type(out) is not np.ndarray and is_cpu_array(out):  # a NumPy scalar
            out = np.asarray(out)
        env[key] = out if out.dtype == dtype else out.astype(dtype)
    return run


def _shared_kernels(steps) -> dict:
    """Pairs of calls one kernel computes together (an op declaring ``extra["joint"] =
    (partner op name, fn)``, e.g. max-pooling's indices with its values, over the same inputs
    and parameters): the first of the pair runs ``fn`` and sets both outputs, the second does
    nothing. Returns id(eqn) -> runner."""
    from ..ops.registry import REGISTRY

    calls = [s.eqn for s in steps if s.kind != "group" and s.eqn is not None
             and not isinstance(s.eqn.op, str)]
    out: dict = {}
    for e in calls:
        joint = e.op.extra.get("joint")
        if joint is None or id(e) in out:
            continue
        partner_name, fn = joint
        partner = REGISTRY[partner_name]
        for f in calls:
            if (f.op is partner and id(f) not in out and f.ins == e.ins
                    and all(f.params.get(k, v) == v for k, v in e.params.items())):
                break
        else:
            continue

        first, second = (e, f) if calls.index(e) < calls.index(f) else (f, e)
        out[id(first)] = _joint_runner(e, f, fn)
        out[id(second)] = nothing
    return out


def _joint_runner(e, partner, fn):
    """Runs ``fn`` once for ``e`` and its partner call, setting both outputs."""
    slots, params, own, other = _slots(e), e.params, id(e.out), id(partner.out)

    def both(env):
        env[other], env[own] = fn(*_args(slots, env), **params)
    return both


def build_plan(graph: Graph, keep=(), cache_dir=None, fresh_from: int | None = None) -> Plan:
    """Compile ``graph`` into a plan (``keep``: extra values to return, e.g. residuals;
    outputs from ``fresh_from`` on are arrays of their own: never an input, a constant or
    another output)."""
    return Plan(graph, keep, cache_dir, fresh_from)
