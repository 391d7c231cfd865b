"""Float arguments that change between calls are read afresh at every call (automatic dynamic,
``trace/numbers.py``): a compiled function traces once more, not once per value, and every
call equals eager mode bit for bit. A use that needs the value itself (control flow,
``math``, an op parameter) makes the argument a guarded constant again: still the eager
result at every call."""

import math
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.trace.numbers import TracedFloat

VALUES = [0.3, 0.7, 1.25, 0.3, 2.5, -0.0, 0.9, 1e-3, 3.75]

X = jitgrad.randn(4, 3, generator=jitgrad.Generator().manual_seed(1))
Y = jitgrad.randn(4, 3, generator=jitgrad.Generator().manual_seed(2))
MASK = X > 0

#: uses a plan recomputes from the argument: two traces (a constant, then dynamic)
DYNAMIC = {
    "mul": lambda x, s: x * s,
    "rmul": lambda x, s: s * x,
    "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x,
    "sub_rsub": lambda x, s: (x - s) * (s - x),
    "add_radd": lambda x, s: x + s + (s + x),
    "python_arith": lambda x, s: x * (s * s) - (2.0 - s) / 3 * x + abs(s - 1) * (-s) * x,
    "softmax_temperature": lambda x, s: F.softmax(x / s, dim=1),
    "float64": lambda x, s: x.double() * s + s,
    "zero_d": lambda x, s: (x ** 2).mean() + s * x.abs().sum(),
    "inplace": lambda x, s: x.clone().mul_(s).add_(s),
    "leaky_relu": lambda x, s: F.leaky_relu(x, s),
    "isinstance": lambda x, s: x * s if isinstance(s, float) else x,
    "torch_add": lambda x, s: jitgrad.add(x, s),
    "compare": lambda x, s: (x < s).float() + (s <= x).float() * 2 + (x == s).float(),
    "dropout_mask": lambda x, s: x * (jitgrad.rand(4, 3) > s / 4) / (1 - s / 4),
}

#: uses that need the value: the argument is a constant again (one trace per value)
SPECIALISED = {
    "control_flow": lambda x, s: x * 2 if s > 0.5 else x * s,
    "math": lambda x, s: x * math.cos(s),
    "tensor_of_it": lambda x, s: x * jitgrad.tensor(s),
    "full": lambda x, s: jitgrad.full((3,), s) + x[0],
    "where": lambda x, s: jitgrad.where(MASK, x, s),
    "clamp": lambda x, s: x.clamp(max=s),
    "int_compare": lambda x, s: jitgrad.arange(3) < s,
    "alpha": lambda x, s: x.add(Y, alpha=s),
    "pow": lambda x, s: x.abs() ** s,
    "numpy_scalar": lambda x, s: x * np.float32(s),
    "format": lambda x, s: x * float(f"{s:.3f}"),
    "returned": lambda x, s: (x * s, s * 2),
    "int_tensor": lambda x, s: jitgrad.arange(3) * s,
    "half_tensor": lambda x, s: (x.half() * s).float(),
    "division_by_it": lambda x, s: x * (1.0 / (s + 10)),
}


def _run(fn, values=VALUES, **options):
    def f(x, s):
        return fn(x, s)
    cf = jitgrad.compile(f, **options)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*differ only in Python numbers")
        for s in values:
            jitgrad.manual_seed(0)  # (the same draws for both calls)
            got = cf(X, s)
            jitgrad.manual_seed(0)
            want = f(X, s)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want):
                if isinstance(w, jitgrad.Tensor):
                    assert g.dtype == w.dtype and g.shape == w.shape
                    np.testing.assert_array_equal(g.numpy(), w.numpy())
                else:
                    assert type(g) is type(w) and g == w
    return cf


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_uses_trace_twice_and_equal_eager(name):
    cf = _run(DYNAMIC[name])
    assert cf.stats["traces"] == 2


@pytest.mark.parametrize("name", sorted(SPECIALISED))
def test_uses_that_need_the_value_stay_exact(name):
    cf = _run(SPECIALISED[name])
    # a constant per value (up to the recompile limit, then eager): never a stale number
    assert cf.stats["traces"] > 2


def test_dynamic_false_keeps_constants_and_true_starts_dynamic():
    assert _run(DYNAMIC["mul"], VALUES[:4], dynamic=False).stats["traces"] == 3
    assert _run(DYNAMIC["mul"], dynamic=True).stats["traces"] == 1


def test_gradients_through_a_dynamic_float_equal_eager():
    w = jitgrad.randn(3, 3, requires_grad=True)

    def loss(x, beta):  # a KL weight annealed by the training loop
        h = (x @ w).tanh()
        return (h ** 2).mean() + beta * h.abs().sum() / (1.0 + beta)

    cf = jitgrad.compile(loss)
    for beta in [0.0, 0.1, 0.2, 0.35, 0.5, 1.0]:
        got = cf(X, beta)
        gw, = jitgrad.autograd.grad(got, w)
        want = loss(X, beta)
        ww, = jitgrad.autograd.grad(want, w)
        assert got.item() == want.item()
        np.testing.assert_array_equal(gw.numpy(), ww.numpy())
    assert cf.stats["traces"] == 2


def test_training_step_with_learning_rate_argument_equals_eager():
    def make():
        jitgrad.manual_seed(0)
        return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))

    def step_of(model):
        def step(x, y, lr):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            with jitgrad.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
                    p.grad = None
            return loss
        return step

    m1, m2 = make(), make()
    eager, compiled = step_of(m1), jitgrad.compile(step_of(m2))
    y = Y[:, :1]
    for k in range(12):
        lr = 0.1 * 0.5 * (1 + math.cos(math.pi * k / 12))  # cosine annealing, per step
        assert compiled(X, y, lr).item() == eager(X, y, lr).item()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())
    assert compiled.stats["traces"] == 2


def test_keyword_float_and_module_forward():
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, t: float, *, scale: float = 1.0):
            return self.lin(x) * (1.0 - t) + x * t * scale

    jitgrad.manual_seed(0)
    model = Noisy()
    cm = jitgrad.compile(model)
    for t in [0.1, 0.2, 0.4, 0.8]:
        for scale in [1.0, 2.0, 0.5]:
            np.testing.assert_array_equal(cm(X, t, scale=scale).detach().numpy(),
                                          model(X, t, scale=scale).detach().numpy())
    # t and scale both change: dynamic after the first calls, not a trace per pair (12)
    assert cm.forward.stats["traces"] <= 4


def test_float_that_becomes_dynamic_later_and_another_that_stays_constant():
    def f(x, a, b):
        return x * a if b > 0 else x * -a

    cf = jitgrad.compile(f)
    for a in [0.5, 1.5, 2.5, 3.5]:
        for b in [1.0, -1.0]:
            np.testing.assert_array_equal(cf(X, a, b).numpy(), f(X, a, b).numpy())
    assert cf.stats["traces"] <= 5  # not one per (a, b) pair: 8


def test_a_graph_break_with_dynamic_floats_leaks_none_of_them():
    kept, box = [], {}

    def f(x, s):
        kept.append(s)  # writes to outside state: graph breaks, the call runs eagerly
        box["s"] = s
        return x * s

    cf = jitgrad.compile(f, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in (0.5, 0.75):
            np.testing.assert_array_equal(cf(X, s).numpy(), (X * s).numpy())
    assert all(type(k) is float for k in kept) and type(box["s"]) is float


def test_type_checks_see_float():
    def scale(x, s):
        if type(s) in (int, float):  # eager code sees float: a TracedFloat would not be
            return x * s
        return x - s

    def dispatch(x, s):
        return {float: lambda v: x * v}.get(type(s), lambda v: x)(s)

    for fn in (scale, dispatch):
        _run(fn)
    assert isinstance(DynamicFloatProbe.number(), __import__("numbers").Real)


class DynamicFloatProbe:
    @staticmethod
    def number():
        from jitgrad.trace.numbers import DynamicNumbers

        return DynamicNumbers().number(0.5, jitgrad.tensor(0.5, dtype=jitgrad.float64),
                                       ("arg", 0))


def test_learning_rate_set_in_param_groups_through_a_local_is_never_stale():
    def make():
        jitgrad.manual_seed(0)
        m = nn.Linear(3, 1)
        return m, jitgrad.optim.SGD(m.parameters(), lr=0.1)

    def step_of(m, opt):
        def step(x, lr):
            for g in opt.param_groups:  # a write the observer cannot follow (a local)
                g["lr"] = lr
            m(x).sum().backward()
            with jitgrad.no_grad():
                for p in m.parameters():
                    p -= opt.param_groups[0]["lr"] * p.grad
                    p.grad = None
        return step

    for dynamic in (None, False):
        (m1, o1), (m2, o2) = make(), make()
        eager, compiled = step_of(m1, o1), jitgrad.compile(step_of(m2, o2), dynamic=dynamic)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for lr in (0.1, 0.2, 0.1, 0.3, 0.2):
                eager(X, lr)
                compiled(X, lr)
                assert type(o2.param_groups[0]["lr"]) is float
                assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"] == lr
        for o, m in ((o1, m1), (o2, m2)):  # the optimizer used eagerly afterwards
            o.zero_grad()
            m(X).sum().backward()
            o.step()
        np.testing.assert_array_equal(m1.weight.detach().numpy(), m2.weight.detach().numpy())


BETA = 0.0


def test_global_and_closure_floats_changed_by_the_loop_are_read_at_every_call():
    global BETA

    def loss(x):
        return (x ** 2).mean() + BETA * x.abs().sum()

    cl = jitgrad.compile(loss)
    temp = 1.0

    def soft(x):
        return F.softmax(x / temp, dim=1)

    cs = jitgrad.compile(soft)
    for step in range(12):
        BETA = step / 10
        temp = 1.0 / (step + 1)
        assert cl(X).item() == loss(X).item()
        np.testing.assert_array_equal(cs(X).numpy(), soft(X).numpy())
    assert cl.stats["traces"] == 2 and cs.stats["traces"] == 2
    assert type(BETA) is float and type(temp) is float


GAMMA = 0.5


def test_a_global_float_whose_value_is_needed_stays_a_constant():
    global GAMMA

    def g(x):
        return x * GAMMA if GAMMA > 0.3 else x

    cg = jitgrad.compile(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for v in (0.5, 0.6, 0.2, 0.7, 0.1):
            GAMMA = v
            np.testing.assert_array_equal(cg(X).numpy(), g(X).numpy())
            assert type(GAMMA) is float
    assert cg.stats["traces"] == 5  # one per value (the dynamic one served one call)


def test_numpy_float64_arguments_are_dynamic_and_float32_ones_give_up():
    cf = _run(DYNAMIC["python_arith"], [np.float64(v) for v in VALUES])
    assert cf.stats["traces"] == 2
    f32 = _run(DYNAMIC["mul"], [np.float32(v) for v in range(1, 14)])
    assert f32.stats["traces"] <= jitgrad.config.recompile_limit + 1


def test_lower_and_eager_reason_after_a_float_became_dynamic():
    def f(x, s):
        return x * s + (1 - s)

    cf = jitgrad.compile(f)
    cf(X, 0.5)
    cf(X, 0.6)
    calls = cf.stats["calls"]
    assert cf.eager_reason(X, 0.7) is None and cf.stats["calls"] == calls
    low = cf.lower(X, 0.9)  # the dynamic entry: the number is a 0-d float64 input
    assert "mul" in low.graph and "float64" in low.graph


def test_traced_float_reads_need_its_value():
    from jitgrad.trace.numbers import DynamicNumbers

    numbers = DynamicNumbers()
    t = numbers.number(0.25, jitgrad.tensor(0.25, dtype=jitgrad.float64), ("arg", 1))
    assert isinstance(t, float) and type(t) is TracedFloat
    assert not numbers.specialized
    assert repr(t) == "0.25" and numbers.specialized == {("arg", 1)}


class _Lion(jitgrad.optim.Optimizer):
    """A user's optimizer: its step (user code) makes per-parameter state in its first call."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.99)):
        super().__init__(params, dict(lr=lr, betas=betas))

    @jitgrad.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = jitgrad.zeros_like(p)
                b1, b2 = group["betas"]
                update = state["exp_avg"] * b1 + p.grad * (1 - b1)
                p.add_(update.sign(), alpha=-group["lr"])
                state["exp_avg"].mul_(b2).add_(p.grad, alpha=1 - b2)


def test_a_users_optimizer_making_its_state_compiles_without_a_graph_break():
    """Only param groups are watched for writes from user code (the lr fix above): the
    per-parameter state a user's optimizer makes in its first step is not a graph break."""
    def make():
        jitgrad.manual_seed(0)
        m = nn.Linear(4, 2)
        return m, _Lion(m.parameters())

    def step_of(m, opt):
        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    (m1, o1), (m2, o2) = make(), make()
    eager, compiled = step_of(m1, o1), jitgrad.compile(step_of(m2, o2))
    x, y = jitgrad.cat([X, X], 1)[:, :4], Y[:, :2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a graph break warns)
        for _ in range(5):
            assert compiled(x, y).item() == eager(x, y).item()
    np.testing.assert_array_equal(m1.weight.detach().numpy(), m2.weight.detach().numpy())
    assert compiled.stats["traces"] == 2 and compiled.stats["cache_hits"] == 3
