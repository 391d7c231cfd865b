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
    fn = (lambda x: (x * w).tanh().sum())
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
