"""jitgrad.compile against eager mode where a probe of training-style use found them apart:
random draws whose values are unused, a learning-rate scheduler stepped inside a compiled
step, gradients of a compiled loss recomputed after its inputs changed, autograd state made
inside the function (``requires_grad_``, ``enable_grad``), ``retain_grad`` on an argument,
modules imported inside the function. Each case runs eagerly and compiled over several
calls and compares everything the caller sees."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg


def _draws(fn, make_input, calls=3):
    """Outputs of ``calls`` calls after ``manual_seed(0)``, and the next draw after them."""
    jg.manual_seed(0)
    outs = [fn(make_input()).detach().numpy().copy() for _ in range(calls)]
    return outs, jg.rand(2).numpy()


class _DropsABranch(jg.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin, self.drop = jg.nn.Linear(4, 4), jg.nn.Dropout(0.5)

    def forward(self, x):
        h = self.lin(x)
        self.drop(h * 2)  # computed and discarded: it still draws
        return self.drop(h).sum()


def test_unused_random_draws_still_advance_the_generator():
    def discarded(x):
        jg.rand(3)
        return x + jg.rand(3)

    def overwritten(x):
        return x + jg.rand(3).uniform_(2, 3)

    jg.manual_seed(1)
    for fn, make in ((discarded, lambda: jg.zeros(3)), (overwritten, lambda: jg.zeros(3)),
                     (_DropsABranch(), lambda: jg.ones(2, 4))):
        (eager, after_e), (comp, after_c) = _draws(fn, make), _draws(jg.compile(fn), make)
        for k, (a, b) in enumerate(zip(eager, comp)):
            np.testing.assert_array_equal(b, a, err_msg=f"call {k}")
        np.testing.assert_array_equal(after_c, after_e)


def _scheduled_steps(compiled: bool, two_steps: bool) -> list:
    w = jg.tensor([1.0], requires_grad=True)
    opt = jg.optim.SGD([w], lr=1.0)
    sched = jg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)

    def train_step():
        opt.zero_grad()
        (w * 1.0).sum().backward()
        opt.step()
        sched.step()  # after the step it feeds: the step used the lr before it
        if two_steps:
            opt.zero_grad()
            (w * 1.0).sum().backward()
            opt.step()

    f = jg.compile(train_step) if compiled else train_step
    seen = []
    for _ in range(4):
        f()
        seen.append((w.item(), opt.param_groups[0]["lr"]))
    return seen


def test_a_scheduler_stepped_inside_the_step_it_follows_matches_eager():
    for two_steps in (False, True):
        eager = _scheduled_steps(False, two_steps)
        with pytest.warns(UserWarning, match="SGD.lr is read and later changed"):
            compiled = _scheduled_steps(True, two_steps)
        assert compiled == eager


def _loss_then_step_then_backward(compiled: bool, backward) -> list:
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    opt = jg.optim.SGD([w], lr=0.1)
    fn = (lambda x: (x * w * w).tanh().sum())  # eager saves w (w * w)
    f = jg.compile(fn) if compiled else fn
    x = jg.tensor([1.0, 2.0, 0.5])
    seen = []
    for _ in range(3):
        loss = f(x)
        w.grad = jg.ones(3)
        opt.step()  # w changes in place: the loss's backward must not read the new w
        w.grad = None
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            backward(loss, w)
        seen.append(w.tolist())
    return seen


def test_recomputing_a_speculated_loss_after_its_input_changed_raises_eagers_error():
    """A cotangent other than 1, or ``create_graph=True``, recomputes the forward: an input
    written in place since the call (by an optimizer step) raises, as in eager mode, where
    the forward's saved tensors are checked; before, the gradients of the new weights came
    back silently."""
    ways = [lambda loss, w: (2 * loss).backward(),
            lambda loss, w: loss.backward(jg.tensor(3.0)),
            lambda loss, w: jg.autograd.grad(loss, w, create_graph=True)]
    for backward in ways:
        assert (_loss_then_step_then_backward(True, backward)
                == _loss_then_step_then_backward(False, backward))
    # Where eager saves less (``x * w`` keeps only x for w's gradient, as PyTorch), eager
    # computes the gradient at the old w; a speculated loss kept no residuals and raises
    # rather than use the new w (documented in docs/architecture.md).
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    f = jg.compile(lambda x: (x * w).tanh().sum())
    loss = f(jg.tensor([1.0, 2.0, 0.5]))
    with jg.no_grad():
        w.sub_(0.1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (2 * loss).backward()


def _new_leaf_returned(x, w):
    return (x * w).detach().requires_grad_()


def _new_leaf_in_history(x):
    h = jg.zeros(3).requires_grad_()
    return x * h, h


def _factory_leaf_in_loss(x):
    h = jg.zeros(3, requires_grad=True)
    return (x * h).sum()


def _flips_an_argument(x):
    x.requires_grad_(True)
    return (x * x).sum()


def _enables_grad(x):
    with jg.enable_grad():
        return x * 2


def _saliency(x, w):
    x = x.detach().requires_grad_()
    (x * w).sum().backward()
    return x.grad


def _autograd_state(fn, make_args, grad: bool) -> list:
    seen = []
    for k in range(3):
        args = make_args(k)
        with jg.set_grad_enabled(grad):
            out = fn(*args)
        outs = out if isinstance(out, tuple) else (out,)
        seen.append([(o.requires_grad, o.is_leaf, o.detach().tolist()) for o in outs]
                    + [a.requires_grad for a in args])
        if grad and outs[0].requires_grad:
            outs[0].sum().backward()
            seen.append([None if t.grad is None else t.grad.tolist() for t in outs + args])
    return seen


def test_autograd_state_made_inside_the_function_is_eagers():
    """Leaves made inside that require grad (returned, or reached by an output's history),
    ``requires_grad_`` on an argument, ``enable_grad`` inside a call under ``no_grad``: the
    outputs' ``requires_grad``/``is_leaf``/``.grad`` and the arguments' flags are eager's.
    A saliency map (a leaf made inside, differentiated inside) stays compiled, one trace."""
    ones = lambda k: jg.full((3,), k + 1.0)  # noqa: E731
    cases = [
        (_new_leaf_returned, lambda k: (ones(k), jg.ones(3, requires_grad=True)), True),
        (_new_leaf_returned, lambda k: (ones(k), jg.ones(3)), True),
        (_new_leaf_in_history, lambda k: (ones(k),), True),
        (_factory_leaf_in_loss, lambda k: (ones(k),), True),
        (_flips_an_argument, lambda k: (ones(k),), True),
        (_enables_grad, lambda k: (jg.full((3,), k + 1.0, requires_grad=True),), False),
        (_saliency, lambda k: (ones(k), jg.tensor([1.0, 2.0, 3.0]) * (k + 1)), True),
    ]
    for fn, make_args, grad in cases:
        compiled = jg.compile(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the graph breaks' warnings
            assert _autograd_state(compiled, make_args, grad) == \
                _autograd_state(fn, make_args, grad), fn.__name__
    assert compiled.stats["traces"] == 1 and compiled.stats["cache_hits"] == 2


def test_retain_grad_on_a_non_leaf_argument_is_set_once():
    """The first (traced) call derives the backward by running it: the argument's retained
    gradient from that run is not the caller's (it doubled ``.grad``)."""
    def fn(x):
        return (x * x).sum()

    for hooked in (False, True):
        seen = {}
        for name, f in (("eager", fn), ("compiled", jg.compile(fn))):
            seen[name] = []
            for _ in range(2):
                x0 = jg.tensor([0.5, 1.0, 2.0], requires_grad=True)
                x = x0 * 3
                x.retain_grad()
                if hooked:
                    x.register_hook(lambda g: g + 1)
                f(x).backward()
                seen[name].append((x.grad.tolist(), x0.grad.tolist()))
        assert seen["compiled"] == seen["eager"]


def test_modules_imported_inside_the_function_are_watched_like_globals():
    """``import random as r`` / ``from random import random`` / ``import numpy as np``
    inside the function: calls drawing in Python are graph breaks (they were frozen at the
    first call), and a value read through a module imported inside is guarded."""
    import random
    import sys
    import types

    def local_random(x):
        import random as r
        return x * r.random()

    def from_random(x):
        from random import random as draw
        return x * draw()

    def local_numpy(x):
        import numpy as np_
        return x * float(np_.random.rand())

    settings = types.ModuleType("jitgrad_test_settings")
    settings.scale = 2.0
    sys.modules[settings.__name__] = settings

    def local_settings(x):
        import jitgrad_test_settings as s
        return x * s.scale

    try:
        for fn in (local_random, from_random, local_numpy, local_settings):
            seen = []
            for f in (fn, jg.compile(fn)):
                random.seed(0)
                np.random.seed(0)
                settings.scale = 2.0
                out = []
                for k in range(3):
                    if k == 2:
                        settings.scale = 3.0
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out.append(f(jg.ones(1)).item())
                seen.append(out)
            assert seen[1] == seen[0], fn.__name__
    finally:
        del sys.modules[settings.__name__]


def _calls(fn, make_args, calls=3) -> tuple[list, object]:
    """Eager and compiled results of ``calls`` calls with fresh arguments (warnings of
    graph breaks silenced), and the compiled function."""
    compiled = jg.compile(fn)
    seen = []
    for f in (fn, compiled):
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(calls):
                args = make_args(k)
                out.append((f(*args), args))
        seen.append(out)
    return seen, compiled


def test_results_holding_objects_are_rebuilt_or_run_eagerly():
    """A frozen dataclass, a plain object, a dataclass, ``OrderedDict``/``defaultdict``: the
    compiled results hold each call's tensors, in the same types (a plain object's call runs
    eagerly; before, the first call's object came back from every later call)."""
    import dataclasses
    from collections import OrderedDict, defaultdict

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        y: jg.Tensor
        n: int = 3

    @dataclasses.dataclass
    class Mutable:
        y: jg.Tensor

    class Plain:
        def __init__(self, y):
            self.y = y

    def objects(x):
        return Frozen(x * 2, 4), Mutable(x - 1), Plain(x + 1)

    def dicts(x):
        d = defaultdict(float)
        d["a"] = x * 2
        return OrderedDict(b=x + 1, a=x * 3), d

    (eager, comp), _ = _calls(objects, lambda k: (jg.full((2,), float(k)),))
    for (e, _), (c, _) in zip(eager, comp):
        assert [type(o) for o in c] == [type(o) for o in e]
        assert [o.y.tolist() for o in c] == [o.y.tolist() for o in e]
        assert c[0].n == 4
    (eager, comp), f = _calls(dicts, lambda k: (jg.full((2,), float(k)),))
    for (e, _), (c, _) in zip(eager, comp):
        assert type(c[0]) is OrderedDict and list(c[0]) == ["b", "a"]
        assert {k: v.tolist() for k, v in c[0].items()} == {
            k: v.tolist() for k, v in e[0].items()}
        assert c[1]["missing"] == 0.0 and c[1]["a"].tolist() == e[1]["a"].tolist()
    assert f.stats["cache_hits"] == 2  # rebuilt by the plan, not run eagerly


def test_out_resized_strides_and_addresses_are_not_frozen():
    """``out=`` resized (its array replaced), ``stride()`` of a non-contiguous argument and
    ``data_ptr()`` make the call run eagerly."""
    def resized_out(a):
        o = jg.zeros(5)
        jg.cumsum(a, 0, out=o)
        return o

    def by_stride(x):
        return x * (2 if x.stride(0) == 3 else 3)

    def by_address(x, y):
        return x * (1 if x.data_ptr() == y.data_ptr() else 2)

    base = jg.arange(30.0)
    cases = [(resized_out, lambda k: (jg.arange(3.0) + k,)),
             (by_stride, lambda k: (base[::3 if k % 2 == 0 else 2][:3],)),
             (by_address, lambda k: (base[:3], base[k % 2:k % 2 + 3]))]
    for fn, make in cases:
        (eager, comp), _ = _calls(fn, make, calls=4)
        assert [r.tolist() for r, _ in comp] == [r.tolist() for r, _ in eager], fn.__name__


def test_default_dtype_and_deterministic_mode_changes_retrace():
    def fn(x):
        scale = 2 if jg.are_deterministic_algorithms_enabled() else 3
        return x * scale + jg.ones(2)

    compiled = jg.compile(fn)
    try:
        for dtype, det in ((jg.float32, False), (jg.float64, False), (jg.float64, True),
                           (jg.float32, False)):
            jg.set_default_dtype(dtype)
            jg.use_deterministic_algorithms(det)
            e, c = fn(jg.ones(2, dtype=jg.float64)), compiled(jg.ones(2, dtype=jg.float64))
            assert (c.dtype, c.tolist()) == (e.dtype, e.tolist())
            assert compiled(jg.ones(2)).dtype == fn(jg.ones(2)).dtype == jg.promote_types(
                jg.float32, dtype)
    finally:
        jg.set_default_dtype(jg.float32)
        jg.use_deterministic_algorithms(False)


def test_a_reentrant_checkpoint_with_backward_outside_runs_eagerly():
    from jitgrad.utils.checkpoint import checkpoint

    jg.manual_seed(0)
    model = jg.nn.Sequential(jg.nn.Linear(4, 4), jg.nn.Tanh(), jg.nn.Linear(4, 1))

    def fn(x):
        return checkpoint(model, x, use_reentrant=True).sum()

    seen = []
    compiled = jg.compile(fn)
    for f in (fn, compiled, compiled):
        model.zero_grad()
        x = jg.ones(3, 4, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f(x).backward()
        seen.append((x.grad.tolist(), model[0].weight.grad.tolist()))
    assert seen[1] == seen[0] and seen[2] == seen[0]


def test_numpy_arguments_read_by_numpy_code_run_eagerly():
    """NumPy code on a NumPy argument (``np.count_nonzero(a > 1)``, ``a[1:].sum()``,
    ``a += 1``, ``np.sin(a)``, ``a.T``) makes the call run eagerly; jitgrad ops on it
    (``x * a``, ``from_numpy(a)``, ``tensor(a)``) stay compiled."""
    cases = {
        "count": (lambda x, a: x * int(np.count_nonzero(a > 1)), False),
        "sum": (lambda x, a: x * float(np.sum(a)), False),
        "numpy_then_tensor": (lambda x, a: x * jg.tensor(a * 2), False),
        "index": (lambda x, a: x * a[1:].sum(), False),
        "in_place": (lambda x, a: (a.__iadd__(1), x * 1)[1], False),
        "transpose": (lambda x, a: x * a.T, False),
        "returns_numpy": (lambda x, a: np.sin(a), False),
        "jitgrad_ops": (lambda x, a: (x * a).sum() + jg.from_numpy(a).mean(), True),
        "tensor_of_it": (lambda x, a: x * jg.tensor(a), True),
        # NumPy's conversions (they do not ask the traced view): a copy is a graph break,
        # the argument's own memory stays the traced argument
        "asarray_then_numpy": (lambda x, a: x * float(np.asarray(a).sum()), False),
        "asarray_then_tensor": (lambda x, a: x * jg.tensor(np.asarray(a) * 2), False),
        "array_copy": (lambda x, a: x * float(np.array(a)[0]), False),
        "asarray_converts": (lambda x, a: x + jg.from_numpy(np.asarray(a, np.float32)), False),
        "contiguous_copy": (lambda x, a: x * jg.tensor(np.ascontiguousarray(a[::-1])), False),
        "asarray_same_memory": (lambda x, a: x + jg.from_numpy(np.asarray(a)), True),
        "ascontiguous_same": (lambda x, a: x * jg.tensor(np.ascontiguousarray(a)), True),
    }
    for name, (fn, stays_compiled) in cases.items():
        compiled = jg.compile(fn)
        for k in range(3):
            ae, ac = np.arange(3.0) + k, np.arange(3.0) + k
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                e, c = fn(jg.ones(3), ae), compiled(jg.ones(3), ac)
            assert type(c) is type(e), name
            np.testing.assert_array_equal(np.asarray(c), np.asarray(e), err_msg=name)
            np.testing.assert_array_equal(ac, ae, err_msg=name)
        assert (compiled.stats["cache_hits"] == 2) == stays_compiled, name
    assert np.asarray is _NP_ASARRAY  # the conversions are NumPy's own again


_NP_ASARRAY = np.asarray


def test_entries_beyond_the_guards_first_64_are_compared():
    coefs = [1.0] * 100
    table = {f"k{i}": 1.0 for i in range(100)}

    def fn(x):
        return x * sum(coefs) + sum(table.values())

    compiled = jg.compile(fn)
    for k in range(3):
        coefs[90] = float(k)
        table["k95"] = -float(k)
        assert compiled(jg.ones(1)).item() == fn(jg.ones(1)).item()
    assert compiled.stats["traces"] == 3


def test_returned_data_of_an_argument_is_its_array():
    """``x.data`` returned after writing ``x`` in place: the caller's array (a later write
    to ``x`` shows through it), with a version counter of its own, as eager's."""
    def fn(x):
        x.add_(1)
        return x.data

    compiled = jg.compile(fn)
    for _ in range(3):
        xe, xc = jg.arange(3.0), jg.arange(3.0)
        ye, yc = fn(xe), compiled(xc)
        assert yc._version == ye._version and yc._vc is not xc._vc
        xe.mul_(-1)
        xc.mul_(-1)
        assert yc.tolist() == ye.tolist() == xc.tolist()


def test_a_view_read_after_a_write_to_its_memory_is_not_stale():
    """A view taken before an in-place write to the tensor it views (an argument that is
    itself a view of a larger array; ``unfold``): eager reads the written values through
    it. The trace counts writes per memory, so the call runs eagerly instead of reading
    the view's old value."""
    def reshaped(x):
        y = x.view(2, 12)
        x.add_(1)
        return y * 1

    def unfolded(x):
        y = x.unfold(0, 2, 1)
        x.add_(1)
        return y * 1

    cases = [(reshaped, lambda k: (jg.from_numpy(np.full((2, 6, 4), float(k))[:, :3]),)),
             (unfolded, lambda k: (jg.full((4,), float(k)),))]
    for fn, make in cases:
        (eager, comp), _ = _calls(fn, make)
        for (e, ae), (c, ac) in zip(eager, comp):
            assert c.tolist() == e.tolist(), fn.__name__
            assert ac[0].tolist() == ae[0].tolist(), fn.__name__


def test_numpy_conversion_of_an_argument_under_fullgraph_raises_and_restores_numpy():
    from jitgrad.trace.tracer import TraceError

    def fn(x, a):
        return x * float(np.asarray(a).sum())

    with pytest.raises(TraceError, match="NumPy argument"):
        jg.compile(fn, fullgraph=True)(jg.ones(3), np.arange(3.0))
    assert np.asarray is _NP_ASARRAY and np.array(np.arange(2.0)).tolist() == [0.0, 1.0]


def test_thread_count_read_inside_is_checked_at_every_call():
    n = jg.get_num_threads()

    def fn(x):
        return x * jg.get_num_threads()

    compiled = jg.compile(fn)
    try:
        for threads in (n, 1, 1, n):
            jg.set_num_threads(threads)
            assert compiled(jg.ones(2)).tolist() == [float(threads)] * 2
    finally:
        jg.set_num_threads(n)
    assert compiled.stats["traces"] == (2 if n != 1 else 1)  # the first entry serves n again


def test_arguments_with_defaults_passed_explicitly_trace_once():
    """``f(x, mask=None)`` called with a mask (a GPT's ``forward(idx, targets=None)``): the
    passed argument is the key's; the default was guarded instead, so every call traced
    again (a probe's compiled transformer ran at 0.11x eager). Calls that use the default
    still guard it: rebinding it retraces."""
    def f(x, mask=None, scale=2.0):
        out = x * scale
        return out if mask is None else out * mask

    compiled = jg.compile(f)
    x, mask = jg.randn(8), jg.ones(8)
    for k in range(4):
        assert compiled(x, mask + k, 3.0).tolist() == f(x, mask + k, 3.0).tolist()
    assert compiled.stats["traces"] == 1
    assert compiled(x).tolist() == f(x).tolist()
    assert compiled(x).tolist() == f(x).tolist()
    assert compiled.stats["traces"] == 2
    f.__defaults__ = (None, 5.0)
    assert compiled(x).tolist() == (x * 5.0).tolist()
    assert compiled.stats["traces"] == 3


def test_compiled_module_fed_its_own_output_compiles_and_equals_eager():
    """An RNN cell stepped in a loop, a block applied twice: the second call's argument is
    the first call's output, whose history reaches the same captured weights. The backward
    trace went on below the argument into the first call's compiled backward (not a
    traceable op): every such call ran eagerly. It stops at the call's arguments now."""
    def run(compiled: bool):
        jg.manual_seed(0)
        cell, block = jg.nn.RNNCell(4, 8), jg.nn.Sequential(jg.nn.Linear(8, 8), jg.nn.Tanh())
        c_cell = jg.compile(cell) if compiled else cell
        c_block = jg.compile(block) if compiled else block
        x = jg.tensor(np.linspace(-1, 1, 8).reshape(2, 4), dtype=jg.float32)
        h = None
        for _ in range(5):
            h = c_cell(x, h)
        out = c_block(c_block(h))
        (out * out).sum().backward()
        grads = [p.grad.numpy().copy() for p in [*cell.parameters(), *block.parameters()]]
        return out.detach().numpy(), grads, (c_cell, c_block)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no graph break
        got, got_grads, (c_cell, c_block) = run(True)
    want, want_grads, _ = run(False)
    np.testing.assert_array_equal(got, want)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_array_equal(g, w)
    assert c_cell.forward.stats["cache_hits"] >= 3 and c_block.forward.stats["cache_hits"] >= 1


def test_scheduler_stepped_inside_the_compiled_step_runs_it_eagerly_once_traced():
    """``sched.step()`` inside the step: library code that changes the scheduler the call
    reads. Its guard failed at every later call (a trace per call, 0.04x eager); now the
    first traced call turns the step eager (a warning), later calls run eagerly."""
    def run(compiled: bool):
        jg.manual_seed(0)
        m = jg.nn.Linear(8, 3)
        opt = jg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        sched = jg.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        x = jg.tensor(np.linspace(-1, 1, 128).reshape(16, 8), dtype=jg.float32)
        y = jg.tensor(np.arange(16) % 3)

        def step():
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            sched.step()
            return loss
        fn = jg.compile(step) if compiled else step
        losses = [fn().item() for _ in range(12)]
        return losses, m.weight.detach().numpy(), opt.param_groups[0]["lr"], fn

    with pytest.warns(UserWarning, match="changes what it reads"):
        got, w, lr, fn = run(True)
    want, w_eager, lr_eager, _ = run(False)
    assert fn.stats["traces"] <= 2 and lr == lr_eager
    np.testing.assert_allclose(got, want, rtol=1e-6)  # traced calls: the NumPy references
    np.testing.assert_allclose(w, w_eager, rtol=1e-6, atol=1e-7)


def test_a_guard_failing_at_every_call_gives_up_after_the_recompile_limit(monkeypatch):
    """A number the function reads that changes at every call (an optimizer's momentum
    cycled by OneCycleLR) traced again at every call, 0.01-0.05x eager; past
    ``config.recompile_limit`` traces of one signature, its calls run eagerly (a warning),
    still eager's results."""
    monkeypatch.setattr(jg.config, "recompile_limit", 3)
    cfg = {"scale": 1.0}

    def f(x):
        return x * cfg["scale"]

    compiled = jg.compile(f)
    x = jg.ones(4)
    with pytest.warns(UserWarning, match="recompile_limit = 3"):
        for k in range(10):
            cfg["scale"] = 1.0 + k
            assert compiled(x).tolist() == f(x).tolist()
    assert compiled.stats["traces"] == 4  # the first, then three again
    assert compiled(jg.ones(2)).tolist() == [10.0, 10.0]  # another signature: traced
    assert compiled.stats["traces"] == 5


# ------------------------------------------------ stop 47: a second compile probe's finds
def test_a_compiled_bound_method_guards_its_object():
    """``compile(opt.step)`` / ``compile(layer.forward)``: the object a bound method of
    jitgrad's own code is bound to was not guarded (its code is not observed): the first
    step's plan (which makes the momentum buffer) ran at every step, a swapped weight or
    ``eval()`` was not seen."""
    def run(compiled):
        w = jg.nn.Parameter(jg.ones(3))
        opt = jg.optim.SGD([w], lr=0.1, momentum=0.9)
        step = jg.compile(opt.step) if compiled else opt.step
        for _ in range(4):
            w.grad = jg.ones(3)
            step()
        return w.tolist(), opt.state[w]["momentum_buffer"].tolist()
    assert run(True) == run(False)

    x = jg.randn(4, 3)
    lin, bn, drop = jg.nn.Linear(3, 2), jg.nn.BatchNorm1d(3), jg.nn.Dropout(0.5)
    f, g, h = jg.compile(lin.forward), jg.compile(bn.forward), jg.compile(drop.forward)
    f(x), g(x), h(x)
    lin.weight = jg.nn.Parameter(jg.zeros(2, 3))
    bn.eval()
    drop.p = 0.0
    assert f(x).tolist() == lin(x).tolist()
    assert g(x).tolist() == bn(x).tolist()
    assert h(x).tolist() == x.tolist()


def test_code_of_installed_packages_is_observed(tmp_path, monkeypatch):
    """A model from an installed package (site-packages, which a venv's or a system
    Python's standard library directory contains) was taken for library code: its global
    reads were frozen, ``random.random()`` in it drawn once."""
    from jitgrad.jit import observe

    lib = tmp_path / "lib"
    site = lib / "site-packages"
    site.mkdir(parents=True)
    (site / "fake_installed_models.py").write_text(
        "import random\nimport jitgrad as jg\nSCALE = 1.0\n"
        "def scaled(x):\n    return x * SCALE\n"
        "def noisy(x):\n    return x * random.random()\n")
    packages, _, _ = observe._library_dirs()
    monkeypatch.setattr(observe, "_LIB_DIRS", (packages, (str(lib) + "/",),
                                               (str(site) + "/", *observe._library_dirs()[2])))
    monkeypatch.setattr(observe, "_user_code", type(observe._user_code)())
    monkeypatch.syspath_prepend(str(site))
    import fake_installed_models as m

    x = jg.ones(2)
    f = jg.compile(lambda x: m.scaled(x) + 1)
    assert f(x).tolist() == [2.0, 2.0]
    m.SCALE = 3.0
    assert f(x).tolist() == [4.0, 4.0]
    with pytest.warns(UserWarning, match="random"):
        n = jg.compile(lambda x: m.noisy(x))
        assert n(x).tolist() != n(x).tolist()
    installed = observe._library_dirs()[2]
    import sysconfig
    assert sysconfig.get_paths()["purelib"] + "/" in installed


def test_numbers_that_change_at_every_call_give_up_after_the_recompile_limit(monkeypatch):
    """A Python number argument that changes at every call (a step counter) is part of the
    signature: a trace per call, with no limit (16-24x slower than eager). Past
    ``config.recompile_limit`` signatures that differ only in numbers, calls with new
    numbers run eagerly (a warning); the numbers seen before keep their plans."""
    monkeypatch.setattr(jg.config, "recompile_limit", 3)
    monkeypatch.setattr(jg.config, "shape_tiering", False)  # (test_shape_tiering.py: on)
    w = jg.randn(4, 4, requires_grad=True)

    def f(x, step, scale=1.0):
        return (x @ w).tanh().sum() * scale + step

    cf = jg.compile(f)
    x = jg.randn(2, 4)
    with pytest.warns(UserWarning, match="differ only in Python numbers"):
        for i in range(10):
            assert cf(x, i).item() == f(x, i).item()
    assert cf.stats["traces"] == 3
    assert cf(x, 1).item() == f(x, 1).item() and cf.stats["traces"] == 3
    assert cf(jg.randn(3, 4), 1).shape == () and cf.stats["traces"] == 4  # another shape
    assert cf(x, 1, 2.0).item() == f(x, 1, 2.0).item()  # another kind: its own count
    assert cf.stats["traces"] == 5


@pytest.mark.parametrize("kind", ["tensor hook", "post-accumulate hook"])
def test_hooks_of_captured_leaves_registered_or_removed_later_are_seen(kind):
    """A compiled step bakes in what the hooks of the leaves it captures (a model's
    weights) computed: one registered after the first call, or removed, was not seen."""
    def run(compiled):
        jg.manual_seed(0)
        m = jg.nn.Linear(4, 2)
        x = jg.randn(3, 4)

        def step(x):
            loss = m(x).sum()
            loss.backward()
            return loss
        f = jg.compile(step) if compiled else step
        norms = []
        for i in range(5):
            if i == 1:
                h = m.weight.register_hook(lambda g: g * 0) if kind == "tensor hook" else \
                    m.weight.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(0))
            if i == 3:
                h.remove()
            f(x)
            norms.append(m.weight.grad.abs().sum().item())
            m.zero_grad()
        return norms
    eager = run(False)
    assert eager[1] == eager[2] == 0.0 and eager[3] > 0
    assert run(True) == eager


def test_a_batch_container_of_fresh_tensors_traces_once():
    """``step(batch)`` reading ``batch["x"]`` (a DataLoader-style dict, list or namedtuple
    of fresh tensors per step) guarded the read by the tensor's identity: a trace per call,
    then eager past the recompile limit. The key already holds the container's structure
    and its tensors' positions."""
    import collections

    Pair = collections.namedtuple("Pair", "x y")

    def run(compiled, make):
        jg.manual_seed(0)
        model = jg.nn.Linear(4, 1)
        opt = jg.optim.SGD(model.parameters(), lr=0.1)

        def step(batch):
            x, y = (batch.x, batch.y) if isinstance(batch, Pair) else (
                (batch["x"], batch["y"]) if isinstance(batch, dict) else (batch[0], batch[1]))
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        f = jg.compile(step) if compiled else step
        rng = np.random.default_rng(1)
        losses = [f(make(jg.tensor(rng.standard_normal((8, 4)), dtype=jg.float32),
                         jg.tensor(rng.standard_normal((8, 1)), dtype=jg.float32))).item()
                  for _ in range(12)]
        return losses, (f.stats["traces"] if compiled else None)
    for make in (lambda x, y: {"x": x, "y": y}, lambda x, y: [x, y], Pair):
        want, _ = run(False, make)
        got, traces = run(True, make)
        assert got == want and traces == 1


class _Cfg:
    pass


class _DeepStateModel(jg.nn.Module):
    scale = 1.0  # a class attribute read through the instance

    def __init__(self) -> None:
        super().__init__()
        self.fc = jg.nn.Linear(4, 4)
        self.cfg = _Cfg()
        self.cfg.act = _Cfg()
        self.cfg.act.gain = 1.0
        self.sched = {"stages": [[1.0]]}
        self.inner = _Inner()

    def forward(self, x):
        y = self.fc(x) * self.scale * self.cfg.act.gain * self.sched["stages"][0][0]
        return self.inner(y)


class _Inner(jg.nn.Module):
    shift = 0.0

    def __init__(self) -> None:
        super().__init__()
        import dataclasses

        @dataclasses.dataclass(slots=True)
        class Slots:
            k: float = 1.0
        self.opts = Slots()

    def forward(self, x):
        return x * self.opts.k + self.shift


def test_state_deeper_than_two_levels_and_class_attributes_are_guarded():
    """Module and config state read three levels down (``self.cfg.act.gain``, a nested
    list in a dict), a ``__slots__`` config object, class attributes read through an
    instance (``self.scale``), and a global three-level dict read through a helper the
    compiled function calls: the trace baked them in, later calls returned stale results.
    Each is now guarded to the end of its chain."""
    m = _DeepStateModel()
    cm = jg.compile(m)
    x = jg.randn(2, 4)
    cm(x)
    changes = [lambda: setattr(_DeepStateModel, "scale", 2.0),
               lambda: setattr(m.cfg.act, "gain", 3.0),
               lambda: m.sched["stages"][0].__setitem__(0, 0.5),
               lambda: setattr(m.inner.opts, "k", 5.0),
               lambda: setattr(_Inner, "shift", 1.5)]
    try:
        for change in changes:
            change()
            assert np.array_equal(cm(x).detach().numpy(), m(x).detach().numpy())
    finally:
        _DeepStateModel.scale, _Inner.shift = 1.0, 0.0

    m2 = _DeepStateModel()  # a model the compiled function closes over
    f2 = jg.compile(lambda x: m2(x))
    f2(x)
    try:
        for change in (lambda: setattr(_DeepStateModel, "scale", 4.0),
                       lambda: setattr(m2.cfg.act, "gain", 0.25)):
            change()
            assert np.array_equal(f2(x).detach().numpy(), m2(x).detach().numpy())
    finally:
        _DeepStateModel.scale = 1.0

    cfg = {"model": {"act": {"scale": 1.0}}}

    def get_scale(c):
        return c["model"]["act"]["scale"]
    w = jg.randn(4, 4)
    f = jg.compile(lambda x: (x @ w) * get_scale(cfg))
    f(x)
    cfg["model"]["act"]["scale"] = 2.0
    assert np.array_equal(f(x).numpy(), ((x @ w) * 2.0).numpy())
    assert f.stats["traces"] == 2


SCALE_READ_BY_A_COMPILED_FUNCTION = 0.5


def test_a_float_read_through_a_chain_keeps_the_fast_path():
    """The generated cache-hit check compared a float chain's value with its state's hex
    bits: it never held, so every call of a function reading a float global took the
    slow path (each of a model's float config reads cost ~5 us a call)."""
    from jitgrad.jit import call_path
    from jitgrad.jit.function import compiled_function_of

    w = jg.randn(3, 3)
    f = jg.compile(lambda x: (x @ w) * SCALE_READ_BY_A_COMPILED_FUNCTION)
    x = jg.randn(2, 3)
    f(x), f(x)
    cf = compiled_function_of(f)
    assert cf._fast is not None and cf._fast((x,)) is not call_path.MISS
    global SCALE_READ_BY_A_COMPILED_FUNCTION
    SCALE_READ_BY_A_COMPILED_FUNCTION = -0.0  # a zero's sign: compared by the slow path
    try:
        assert cf._fast((x,)) is call_path.MISS
        assert np.array_equal(f(x).numpy(), ((x @ w) * -0.0).numpy())
    finally:
        SCALE_READ_BY_A_COMPILED_FUNCTION = 0.5


class _Counting(jg.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = jg.nn.Linear(3, 3)
        self.register_buffer("count", jg.zeros((), dtype=jg.int64))
        self.calls = 0

    def forward(self, x):
        self.count += 1  # a tensor's in-place add: compiled
        return self.lin(x)


class _CountingCalls(_Counting):
    def forward(self, x):
        self.count += 1
        self.calls += 1  # rebinding a Python number: runs eagerly
        return self.lin(x)


def test_augmented_assignment_to_a_tensor_attribute_compiles():
    m = _Counting()
    f = jg.compile(m.forward)
    x = jg.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert jg.equal(f(x), m.lin(x))
    assert int(m.count) == 3 and f.stats["traces"] == 1 and f.stats["cache_hits"] == 2
    m = _CountingCalls()
    f = jg.compile(m.forward)
    with pytest.warns(UserWarning, match="sets attribute 'calls' on self"):
        f(x)
    f(x)
    assert m.calls == 2 and int(m.count) == 2
