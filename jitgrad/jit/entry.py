"""One traced signature of a compiled function: its graphs, plans and generated call path."""

from __future__ import annotations

import weakref

from . import call_path

__all__ = ["Entry", "EagerEntry", "Lowered"]


class Entry:
    """Forward (and backward) graphs of one signature, compiled into plans.

    ``escaped``: arrays the traced call created that outside state still holds (see
    ``Tracer.escaped_values``), with the index of their value among the plan's kept values;
    the first run of the plan fills them with the compiled values, then forgets them.
    """

    joint = False
    joint_outputs: list = []
    fast = None  # the generated cache-hit path (call_path.py), made at the first hit
    aliases = None  # per output: its relation to the caller's tensors (aliasing.py)
    residual_anchors: tuple = ()  # caller's tensors whose memory the backward reads
    spec_plan = None  # the joint forward+backward plan of a speculated loss (speculation.py)
    speculating = False  # whether calls run spec_plan now
    spec_idle = 0  # speculated calls since the last backward through one
    spec_reason: str | None = "not requested"  # why it does not speculate (None: it does)

    def __init__(self, fn_name, graph, out_tree, guards, grad_info, closure_ids, cache_dir,
                 escaped=(), spec_reason: str | None = "not requested") -> None:
        from ..compiler import build_plan
        from ..compiler.joint import joint_graph

        self.graph = graph
        self.graph_text = graph.snapshot()  # as traced (a plan optimises it in place)
        self.out_tree = out_tree
        self.guards = guards            # externals / grad states to re-check each call
        self.closure_ids = closure_ids
        self.grad_info = grad_info      # None, or the backward description (GradInfo)
        if grad_info is not None:
            grad_info.graph.device = graph.device  # the backward runs where the forward did
        self.backward_text = grad_info.graph.snapshot() if grad_info is not None else None
        self.fn_name = fn_name
        self._cache_dir = cache_dir
        self._plans = None
        n_out = len(graph.outputs)
        n_res = len(grad_info.saved) if grad_info else 0
        self.escaped = [(weakref.ref(a), n_out + n_res + k)
                        for k, (a, _) in enumerate(escaped)]
        self._keep = [v for _, v in escaped]
        self.spec_reason = spec_reason
        if spec_reason is None:  # speculated: forward and backward plans built when needed
            self.spec_plan = build_plan(joint_graph(graph, grad_info), (), cache_dir,
                                        fresh_from=n_out)
            self.speculating = True
        else:
            self._build_plans()

    def _build_plans(self) -> tuple:
        """(forward plan, backward plan), built at the first call."""
        plans = self._plans
        if plans is None:
            from ..compiler import build_plan

            gi = self.grad_info
            residuals = list(gi.saved) if gi else []
            plans = self._plans = (
                build_plan(self.graph, residuals + self._keep, self._cache_dir),
                build_plan(gi.graph, (), self._cache_dir) if gi else None)
        return plans

    @property
    def plan(self):
        """The forward plan (it also returns the residuals the backward plan reads)."""
        return self._build_plans()[0]

    @property
    def bplan(self):
        """The backward plan (None without a differentiable output)."""
        return self._build_plans()[1]

    #: the access chains the trace read (``guards.AccessGuard``); set by the tracer's caller
    access = None
    #: a signature that runs eagerly (a graph break): ``eager_reason`` says why
    eager_reason: str | None = None

    @property
    def has_guards(self) -> bool:
        """Whether :meth:`guards_hold` checks anything."""
        return bool(self.guards) or bool(self.access)

    def guards_hold(self, args: tuple = (), kwargs: dict | None = None,
                    flat: list | None = None) -> str | None:
        """None when every guard holds, else the first failing guard, in words (``flat``:
        the call's flattened tensors; ``args`` when omitted)."""
        flat = list(args) if flat is None else flat
        for check in self.guards:
            why = check(flat)
            if why:
                return why
        if self.access:
            return self.access.check(args, kwargs)
        return None

    def finish(self, grad_enabled: bool, flat: list) -> None:
        """Make ``run(flat)`` (the plan, output tensors, autograd glue, output structure:
        ``call_path.entry_run``) once the entry is complete (``joint`` is known); ``flat``:
        the traced call's tensors."""
        self.run = call_path.entry_run(self, grad_enabled, flat)

    #: the generators' states before the running call (``keep_rng``), for a plan that draws
    rng_states: list = []

    def keep_rng(self) -> None:
        """Note every generator's state before a plan that draws random numbers runs: if it
        raises, the call runs again eagerly from these states (eager mode draws once)."""
        from ..random import LIVE

        self.rng_states = [(g, g._state()) for g in LIVE]

    def restore_rng(self) -> None:
        """Put back the states :meth:`keep_rng` noted (nothing when the plan draws none)."""
        for g, state in self.rng_states:
            g._restore(state)
        self.rng_states = []

    def committed(self) -> bool:
        """Whether the call that just raised had started to change state outside its plan
        (``Plan.committed``: then it cannot run again eagerly). A speculated call runs the
        joint plan, which has no effects."""
        if self.speculating:
            return False
        plans = self._plans
        return plans is not None and bool(plans[0].committed[0])

    def fill_escaped(self, outs: list) -> None:
        """The first run: copy the compiled values into the arrays outside state kept."""
        for ref, k in self.escaped:
            a = ref()
            if a is not None:
                a[...] = outs[k]  # host or CUDA memory
        self.escaped = []


class EagerEntry(Entry):
    """A signature whose trace hit a graph break (a hook, a Python side effect, a call that
    cannot be traced, data-dependent Python): calls that match it, with its guards holding,
    run the function eagerly. A guard failing (the hook removed, the state changed) traces
    again."""

    def __init__(self, reason: str, guards: list, closure_ids, access) -> None:  # noqa: D107
        self.eager_reason = reason
        self.guards = guards
        self.closure_ids = closure_ids
        self.access = access
        self.escaped = []


class Lowered:
    """What :meth:`CompiledFunction.lower` returns: the traced graph, backward graph, fusion
    groups and generated source of one entry (and, for a speculated loss, the joint plan's:
    ``joint_groups``, ``joint_source``)."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.graph = str(entry.graph_text)
        self.backward_graph = str(entry.backward_text) if entry.backward_text else None
        self.fusion_groups = entry.plan.describe_groups() + (
            entry.bplan.describe_groups() if entry.bplan else [])
        self.source = entry.plan.source() + (entry.bplan.source() if entry.bplan else "")
        spec = entry.spec_plan  # a speculated loss: the joint plan its calls run
        self.joint_groups = spec.describe_groups() if spec is not None else []
        self.joint_source = spec.source() if spec is not None else ""

    def __str__(self) -> str:
        parts = ["== graph ==", self.graph]
        if self.backward_graph:
            parts += ["== backward graph ==", self.backward_graph]
        parts += ["== fusion groups =="] + self.fusion_groups
        parts += ["== generated source ==", self.source or "(no generated kernels)"]
        if self.joint_groups:
            parts += ["== speculated joint forward+backward plan (what calls run) =="]
            parts += self.joint_groups + [self.joint_source]
        return "\n".join(parts)
