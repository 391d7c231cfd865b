"""Op traits: the compiler's fusion and passes read what an op may be (fused, folded into a
broadcast, run as a view, rewritten) from fields of its OpDef, never from its name. These
tests pin which ops hold each trait and that the plans come out as they did when the
compiler kept lists of op names (sin and cos aside: they became calls on purpose)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from helpers import assert_same_bits

import jitgrad as jg
from jitgrad.compiler import executable, fusion, inplace_writes, passes
from jitgrad.ops import REGISTRY

TRAITS = {
    "view": {"reshape", "expand", "permute", "getitem"},
    "broadcast": {"expand"},
    "keeps_order": {"reshape"},
    "permutes": {"permute"},
    "fusable_reduction": {"sum", "mean"},
    "matmul": {"matmul"},
}


@pytest.mark.parametrize("trait", sorted(TRAITS))
def test_trait_holders(trait):
    assert {n for n, op in REGISTRY.items() if getattr(op, trait)} == TRAITS[trait]


def test_view_traits_only_on_movement_ops():
    for trait in ("view", "broadcast", "keeps_order", "permutes"):
        for name in TRAITS[trait]:
            assert REGISTRY[name].kind == "movement", (trait, name)
        assert TRAITS[trait] <= TRAITS["view"]


def test_only_sin_and_cos_are_not_fusable():
    """Not fusable: an element-wise op with a kernel expression that a plan still runs as a
    call to its eager forward (``fwd``), so the eager path's data-dependent choice holds."""
    held = {n for n, op in REGISTRY.items() if not op.fusable}
    assert held == {"sin", "cos"}
    for name in held:
        op = REGISTRY[name]
        assert op.kind == "elementwise" and op.expr is not None and op.fwd is not None


def test_compiler_never_compares_op_names():
    """The compiler decides by traits: no ``op.name ==`` / ``op.name in``."""
    for mod in (fusion, passes, executable, inplace_writes):
        src = inspect.getsource(mod)
        assert not re.search(r"op\.name\s*(==|!=|in\b|not in\b)", src), mod.__name__


# --------------------------------------------------------------------- fusion groups
def _steps(lowered) -> list:
    """``fusion_groups`` lines without the value numbers (``%3=tanh`` -> ``tanh``)."""
    return [re.sub(r"%\d+=", "", s) for s in lowered.fusion_groups]


@pytest.fixture(scope="module")
def xs():
    rng = np.random.default_rng(0)

    def t(*shape):
        return jg.tensor(rng.standard_normal(shape), dtype=jg.float32, requires_grad=True)
    return t(4, 6), t(6), t(6, 3)


def test_groups_fused_chain_with_sums(xs):
    x, b, _ = xs
    low = jg.compile(lambda x, b: (jg.tanh(x * 2.0 + b) * x).sum(1).mean()).lower(x, b)
    assert _steps(low) == [
        "step 0: fused loop over [4, 6]: mul, add, tanh, mul, sum",
        "step 1: fused loop over [4]: mean",
        # backward
        "step 0: fused loop over [4]: div",
        "step 1: view reshape",
        "step 2: fused loop over [4, 6]: mul, mul, tanh_backward, mul, add, sum",
        "step 3: view reshape",
    ]


def test_groups_views_fold_and_run_as_views(xs):
    """The reshape adding a leading 1 and the expand fold into the add (broadcasting);
    permute and getitem run as views."""
    x, b, _ = xs
    low = jg.compile(lambda x, b: (x.reshape(1, 4, 6) + b.expand(4, 6)).permute(0, 2, 1)[0, 1:]
                     ).lower(x, b)
    assert _steps(low) == [
        "step 0: fused loop over [1, 4, 6]: add",
        "step 1: view permute",
        "step 2: view getitem",
        # backward
        "step 0: call getitem_backward",
        "step 1: view permute",
        "step 2: call sum",
        "step 3: view reshape",
        "step 4: fused loop over [4, 6]: sum",
        "step 5: view reshape",
        "step 6: view reshape",
    ]


def test_groups_transposed_matmul_rewritten(xs):
    """``(x @ w).t()`` becomes ``w.t() @ x.t()`` (two views and one matmul, no transpose of
    the product)."""
    x, _, w = xs
    low = jg.compile(lambda x, w: (x @ w).t() * 2.0).lower(x, w)
    assert _steps(low) == [
        "step 0: view permute",
        "step 1: view permute",
        "step 2: call matmul",
        "step 3: fused loop over [3, 4]: mul",
        # backward
        "step 0: fused loop over [3, 4]: mul",
        "step 1: view permute",
        "step 2: view permute",
        "step 3: call matmul",
        "step 4: view permute",
        "step 5: call matmul",
    ]


def test_groups_gradient_of_matmul_chain(xs):
    x, _, w = xs
    low = jg.compile(jg.grad(lambda x, w: jg.tanh(x @ w).sum())).lower(x, w)
    assert _steps(low) == [
        "step 0: call matmul",
        "step 1: fused loop over [4, 3]: tanh, tanh_backward",
        "step 2: view permute",
        "step 3: call matmul",
    ]


def test_sin_cos_run_as_calls(xs):
    x, _, _ = xs
    low = jg.compile(lambda x: jg.sin(x) * 2.0 + jg.cos(x)).lower(x)
    assert _steps(low) == [
        "step 0: call sin",
        "step 1: fused loop over [4, 6]: mul",
        "step 2: call cos",
        "step 3: fused loop over [4, 6]: add",
        # backward: d sin = cos, d cos = -sin, each a call again
        "step 0: call sin",
        "step 1: fused loop over [4, 6]: neg, mul, mul",
        "step 2: call cos",
        "step 3: fused loop over [4, 6]: mul, add",
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64],
                         ids=["float32", "float64", "int64"])
def test_sin_cos_compiled_equal_eager_beyond_the_vector_domain(dtype):
    """Huge arguments take libm eagerly; the plan calls the same function, so it does too."""
    vals = [1e7, -2.5e7, 0.3, -9e6, 3e8, 2.0, 1e15, 7.0]
    if dtype == np.float64:
        vals = [v * 1e10 for v in vals]
    a = np.array(vals * 2, dtype=dtype)
    grad = np.dtype(dtype).kind == "f"
    x = jg.tensor(a, requires_grad=grad)

    def fn(x):
        return jg.sin(x) * 2.0 + jg.cos(x)

    eager = fn(x)
    g_eager = jg.autograd.grad(eager.sum(), [x])[0] if grad else None
    f = jg.compile(fn)
    for call in ("first call", "second call"):
        out = f(x)
        assert_same_bits(out, eager, call)
        if grad:
            assert_same_bits(jg.autograd.grad(out.sum(), [x])[0], g_eager, call + " gradient")
