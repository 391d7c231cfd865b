"""Registry-driven reference tests: the eager forward of every op equals its NumPy reference
``op.ref`` (float32 and float64); element-wise kernels on every size class (empty, one element,
odd, the parallel path from ``PARALLEL_MIN_SIZE``), non-contiguous inputs and the broadcast
patterns that take the strided 2-D kernel and the >2-D fallback; PyTorch's dtype promotion
(explicit cases and a hypothesis property against NumPy, and PyTorch when installed).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import ops_helpers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitgrad
from jitgrad.ops import REGISTRY
from jitgrad.ops.eager_kernels import PARALLEL_MIN_SIZE
from jitgrad.ops.registry import ELEMENTWISE, MOVEMENT

H = ops_helpers()
F32, F64 = H.F32, H.F64
ALL = sorted(REGISTRY)
EW = sorted(n for n, op in REGISTRY.items() if op.kind == ELEMENTWISE)

#: rtol/atol of eager element-wise kernels (custom vectorised math) against NumPy
TOL = {F32: (1e-6, 1e-7), F64: (1e-14, 1e-15)}


def assert_matches(out: np.ndarray, expected: np.ndarray, dtype, exact=False, normwise=False):
    """Equal (``exact``), or within :data:`TOL`; ``normwise``: the absolute tolerance scales
    with the largest magnitude (reductions cancel: their error is relative to the inputs)."""
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    if exact or out.dtype.kind != "f":
        np.testing.assert_array_equal(out, expected)
        return
    rtol, atol = TOL[np.dtype(dtype)]
    if normwise and expected.size:
        atol = 4 * np.finfo(dtype).eps * max(1.0, float(np.nanmax(np.abs(expected))))
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=atol, equal_nan=True)


# ------------------------------------------------------------- forward == op.ref
def _ref_params(op, out, args, p):
    """The op's own params: from its recorded node, or (no node) from the sample."""
    node = getattr(out, "grad_fn", None)
    if getattr(node, "op", None) is op:
        return {k: node.params[k] for k in op.params}
    if op.name == "to_dtype":
        return {"dtype": np.dtype(p["dtype"]), "in_dtype": np.asarray(args[0]).dtype}
    if op.kind == ELEMENTWISE:
        return {k: p[k] for k in op.params}
    return _traced_params(op, args, p)


def _traced_params(op, args, p):
    """The op's params as the compiler's tracer records them (for ops that record no node)."""
    from jitgrad.trace.state import STATE
    from jitgrad.trace.tracer import Tracer

    ts = H.make_inputs(jitgrad, args)
    tracer = Tracer()
    STATE.tracer = tracer
    try:
        H.call(jitgrad, op.name, ts, p)
    finally:
        STATE.tracer = None
    eqns = [e for e in tracer.graph.eqns if getattr(e.op, "name", None) == op.name]
    assert eqns, f"{op.name}: the adapter did not run the op"
    return {k: eqns[-1].params[k] for k in op.params}


def _ref_cases():
    return [pytest.param(*c.values, dt, id=f"{c.id}-{np.dtype(dt).name}", marks=c.marks)
            for dt in (F32, F64) for c in H.case_params(ALL, dt, xfail=H.FORWARD_BUGS)]


@pytest.mark.parametrize("name,i,dtype", _ref_cases())
def test_forward_matches_reference(name, i, dtype):
    op = REGISTRY[name]
    args, p = H.sample(name, i, dtype)
    ts = H.make_inputs(jitgrad, args)  # requires grad: the node carries the op's params
    out = H.call(jitgrad, name, ts, p)
    params = _ref_params(op, out, args, p)
    np_in = H.pre_numpy(args, p)
    with np.errstate(all="ignore"):
        expected = np.asarray(op.ref(*np_in, **params))
    # movement ops are exact; reductions may sum in another order than NumPy
    assert_matches(H.to_numpy(out), expected, dtype, exact=op.kind == MOVEMENT,
                   normwise=op.kind != ELEMENTWISE)


# ------------------------------------------------- element-wise: sizes and layouts
def _base(name, dtype):
    """The op's sample whose arguments are all arrays, the largest one: values in its domain."""
    best = None
    for args, p in H.samples_for(name, dtype):
        arrs = [np.asarray(a) if isinstance(a, np.generic) else a for a in args]
        if all(isinstance(a, np.ndarray) for a in arrs):
            size = sum(a.size for a in arrs)
            if best is None or size > best[0]:
                best = (size, arrs, p)
    assert best is not None, f"{name}: no sample with only array arguments"
    return best[1], best[2]


def _fill(a: np.ndarray, shape) -> np.ndarray:
    """``a``'s values repeated to ``shape`` (stays inside the op's domain)."""
    flat = a.reshape(-1)
    return np.resize(flat, shape).astype(a.dtype) if flat.size else np.zeros(shape, a.dtype)


def _run_ew(name, dtype, shapes, make=None):
    """Run op ``name`` on inputs of ``shapes`` (cycled over its inputs); ``make(arr, k)``
    builds input ``k`` as ``(tensor, array it holds)``."""
    op = REGISTRY[name]
    base, p = _base(name, dtype)
    ts, arrs = [], []
    for k, b in enumerate(base):
        a = _fill(b, shapes[k % len(shapes)])
        if make is None:
            t, a = jitgrad.tensor(a), a
        else:
            t, a = make(a, k)
        ts.append(t)
        arrs.append(a)
    out = H.call(jitgrad, name, ts, p)
    with np.errstate(all="ignore"):
        expected = np.asarray(op.ref(*arrs, **{k: p[k] for k in op.params}))
    assert_matches(out.numpy(), expected, dtype)
    return out


SIZES = [0, 1, 17, 1000, PARALLEL_MIN_SIZE - 1]
PARALLEL_SIZES = [PARALLEL_MIN_SIZE, PARALLEL_MIN_SIZE + 4_321]


def test_sizes_straddle_the_parallel_threshold():
    assert max(SIZES) < PARALLEL_MIN_SIZE <= min(PARALLEL_SIZES)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", EW)
def test_elementwise_sizes(name, dtype):
    for n in SIZES:
        _run_ew(name, dtype, [(n,)])


@pytest.mark.slow  # compiles every op's prange kernel on a cold Numba cache (~1 min)
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", EW)
def test_elementwise_parallel_path(name, dtype):
    from jitgrad.kernels import parallel

    parallel._blas_at[0] = float("-inf")  # no BLAS worker spinning: the parallel kernels run
    for n in PARALLEL_SIZES:
        _run_ew(name, dtype, [(n,)])
    _run_ew(name, dtype, [(800, 700)])  # contiguous 2-D: still the flat parallel loop
    if REGISTRY[name].nin > 1:  # a one-element operand is passed by value
        _run_ew(name, dtype, [(800, 700), (1, 1)])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", [n for n in EW if REGISTRY[n].nin > 1])
def test_elementwise_one_element_operand(name, dtype):
    _run_ew(name, dtype, [(17, 5), (1, 1)])
    _run_ew(name, dtype, [(1,), (17, 5)])


def _transposed(a, k):
    t = jitgrad.tensor(np.ascontiguousarray(a.T)).t()
    return t, a


def _stepped(a, k):
    big = np.repeat(np.repeat(a, 2, axis=0), 3, axis=1)
    return jitgrad.tensor(big)[::2, 1::3], big[::2, 1::3]


def _mixed(a, k):
    return _transposed(a, k) if k % 2 else (jitgrad.tensor(a), a)


def _expanded(a, k):
    row = np.ascontiguousarray(a[:1])
    return jitgrad.tensor(row).expand(*a.shape), np.broadcast_to(row, a.shape)


LAYOUTS = {
    "transposed": ([(29, 37)], _transposed),
    "stepped": ([(29, 37)], _stepped),
    "mixed": ([(29, 37)], _mixed),
    "expanded": ([(29, 37)], _expanded),
    "transposed-big": ([(400, 401)], _transposed),
}
BROADCASTS = {
    "row": [(29, 37), (37,)],
    "col": [(29, 1), (29, 37)],
    "outer": [(29, 1), (1, 37)],
    "nd": [(2, 1, 3, 1), (1, 4, 1, 5)],
    "nd-wide": [(3, 1, 17, 1), (1, 5, 1, 19), (3, 5, 17, 19)],
    "nd-lead": [(4, 3, 1), (2, 1, 1, 5)],
    "one-element": [(1, 1), (4, 5)],
    "0d": [(), (5, 7)],
    "empty": [(0, 3), (1, 3)],
    "big-outer": [(500, 1), (1, 300)],
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", EW)
def test_elementwise_non_contiguous(name, layout, dtype):
    shapes, make = LAYOUTS[layout]
    _run_ew(name, dtype, shapes, make)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("pattern", sorted(BROADCASTS))
@pytest.mark.parametrize("name", [n for n in EW if REGISTRY[n].nin > 1])
def test_elementwise_broadcasting(name, pattern, dtype):
    out = _run_ew(name, dtype, BROADCASTS[pattern])
    shapes = BROADCASTS[pattern]
    nin = REGISTRY[name].nin
    assert out.shape == np.broadcast_shapes(*[shapes[k % len(shapes)] for k in range(nin)])


SPECIAL = [1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 20.0, -20.0, 88.0, -88.0, 89.0, -104.0, 710.0,
           -745.0, 1e-8, -1e-8, 1e-30, 1e30, -1e30, 1e-40, np.inf, -np.inf, np.nan]
AT_ZERO = [0.0, -0.0, 1.0, -2.0, 0.5, np.inf, -np.inf, np.nan]
#: values left out of the NumPy comparison: there jitgrad follows PyTorch's pow fast paths
#: (x ** -0.5 is rsqrt: nan at -inf, where NumPy's pow gives 0), see test_torch_oracle.py's
#: test_pow_special_bases_like_torch and test_pow_backward_at_special_bases_like_torch
SPECIAL_EXCLUDE = {
    ("pow_scalar", None): [-np.inf],
    ("pow_backward", None): [-np.inf],         # a ** (e - 1)
}


#: PyTorch's pow fast paths (x ** -0.5 is rsqrt: -inf at -0.0) differ from C pow (NumPy: +inf);
#: jitgrad follows PyTorch there (test_pow_special_bases_like_torch)
AT_ZERO_EXCLUDE = {**SPECIAL_EXCLUDE, ("pow_backward", None): [-np.inf, -0.0],
                   ("pow_scalar", None): [-np.inf, -0.0]}


def _kernel_ops():
    return [n for n in EW if REGISTRY[n].expr is not None]


def _grid_values(name, dtype, values, exclude=None):
    drop = (exclude or {}).get((name, None), []) + (exclude or {}).get((name, dtype), [])
    with np.errstate(all="ignore"):
        vals = np.array(values, dtype=dtype)  # 1e-40 is subnormal in float32
    keep = np.ones(vals.shape, bool)
    for d in drop:  # signed: dropping -0.0 keeps +0.0
        keep &= ~(np.isnan(vals) if d != d else (vals == d) & (np.signbit(vals) == np.signbit(d)))
    return vals[keep]


def _check_grid(name, dtype, vals):
    """Every combination of ``vals`` over the op's inputs (masks alternate), against NumPy."""
    op = REGISTRY[name]
    grid = [vals.reshape((-1,) + (1,) * k) for k in range(op.nin)]  # outer product
    seen = set()
    for args, p in H.samples_for(name, dtype):
        params = {k: p[k] for k in op.params}
        if repr(params) in seen:
            continue
        seen.add(repr(params))
        arrs = [g if isinstance(a, (np.ndarray, np.generic)) and np.asarray(a).dtype.kind == "f"
                else (np.arange(g.size).reshape(g.shape) % 2 == 0)
                for a, g in zip(args, grid)]
        ts = [jitgrad.tensor(a) for a in arrs]
        with np.errstate(all="ignore"):
            out = H.call(jitgrad, name, ts, p)
            expected = np.asarray(op.ref(*arrs, **params)).astype(out.numpy().dtype)
        got = out.numpy()
        bad = ~np.isclose(got, expected, *TOL[np.dtype(dtype)], equal_nan=True)
        ins = np.broadcast_arrays(*arrs)
        assert not bad.any(), f"{name}{params}: " + "; ".join(
            f"{tuple(x[i].item() for x in ins)} -> {got[i]} (numpy {expected[i]})"
            for i in list(zip(*np.nonzero(bad)))[:8])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", _kernel_ops())
def test_elementwise_special_values(name, dtype):
    """Infinities, NaN, huge, tiny and subnormal inputs (every pair of them for binary ops)
    against NumPy, NaN where NumPy gives NaN."""
    _check_grid(name, dtype, _grid_values(name, dtype, SPECIAL, SPECIAL_EXCLUDE))


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", _kernel_ops())
def test_elementwise_at_zero(name, dtype):
    """+-0 combined with ordinary values, infinities and NaN."""
    _check_grid(name, dtype, _grid_values(name, dtype, AT_ZERO, AT_ZERO_EXCLUDE))


def test_broadcast_result_is_a_fresh_contiguous_array():
    a = jitgrad.tensor(np.arange(6.0).reshape(2, 1, 3, 1))
    b = jitgrad.tensor(np.arange(20.0).reshape(1, 4, 1, 5))
    out = a * b
    assert out.shape == (2, 4, 3, 5)
    assert out.numpy().flags.c_contiguous
    np.testing.assert_array_equal(out.numpy(), a.numpy() * b.numpy())


# -------------------------------------------------------------------- dtype promotion
def _f(dt):
    return getattr(jitgrad, dt)


PROMOTION = [
    # (id, thunk, expected dtype name)
    ("f32*pyfloat", lambda: jitgrad.ones(3) * 2.5, "float32"),
    ("f64*pyfloat", lambda: jitgrad.ones(3, dtype=_f("float64")) * 2.5, "float64"),
    ("i64*pyfloat", lambda: jitgrad.arange(3) * 2.5, "float32"),
    ("i32*pyfloat", lambda: jitgrad.arange(3, dtype=_f("int32")) * 2.5, "float32"),
    ("i32+pyint", lambda: jitgrad.arange(3, dtype=_f("int32")) + 7, "int32"),
    ("bool+pyint", lambda: jitgrad.tensor([True, False]) + 1, "int64"),
    ("bool*pyfloat", lambda: jitgrad.tensor([True, False]) * 1.5, "float32"),
    ("bool+bool", lambda: jitgrad.tensor([True, False]) + jitgrad.tensor([True, True]), "bool"),
    ("pyfloat-i64", lambda: 1.5 - jitgrad.arange(3), "float32"),
    ("i64+f32-0d", lambda: jitgrad.arange(3) + jitgrad.tensor(1.5), "float32"),
    ("f32+f64-0d", lambda: jitgrad.ones(3) + jitgrad.tensor(1.5, dtype=_f("float64")),
     "float32"),
    ("f32+f64-1d", lambda: jitgrad.ones(3) + jitgrad.ones(1, dtype=_f("float64")), "float64"),
    ("f64-0d+f32-0d", lambda: jitgrad.tensor(1.0, dtype=_f("float64")) + jitgrad.tensor(2.0),
     "float64"),
    ("i32+i64-0d", lambda: jitgrad.arange(3, dtype=_f("int32")) + jitgrad.tensor(5),
     "int32"),
    ("i32+i64", lambda: jitgrad.arange(3, dtype=_f("int32")) + jitgrad.arange(3), "int64"),
    ("f32+i64", lambda: jitgrad.ones(3) + jitgrad.arange(3), "float32"),
    ("i32-0d+f64-0d", lambda: jitgrad.tensor(1, dtype=_f("int32")) * jitgrad.tensor(
        2.0, dtype=_f("float64")), "float64"),
    ("i64/i64", lambda: jitgrad.arange(3) / jitgrad.arange(1, 4), "float32"),
    ("i64/pyint", lambda: jitgrad.arange(3) / 2, "float32"),
    ("pyint/i64", lambda: 2 / jitgrad.arange(1, 4), "float32"),
    ("i64**pyint", lambda: jitgrad.arange(3) ** 2, "int64"),
    ("i64**pyfloat", lambda: jitgrad.arange(3) ** 2.0, "float32"),
    ("f32**f64-0d", lambda: jitgrad.ones(3) ** jitgrad.tensor(2.0, dtype=_f("float64")),
     "float32"),
    ("exp(i64)", lambda: jitgrad.arange(3).exp(), "float32"),
    ("sqrt(bool)", lambda: jitgrad.tensor([True, False]).sqrt(), "float32"),
    ("neg(i32)", lambda: -jitgrad.arange(3, dtype=_f("int32")), "int32"),
    ("abs(i64)", lambda: jitgrad.arange(-2, 2).abs(), "int64"),
    ("maximum(i32,f32)", lambda: jitgrad.maximum(jitgrad.arange(3, dtype=_f("int32")),
                                                 jitgrad.ones(3)), "float32"),
    ("where(f32,i64)", lambda: jitgrad.where(jitgrad.tensor([True, False]), jitgrad.ones(2),
                                             jitgrad.arange(2)), "float32"),
    ("where(f32,pyfloat)", lambda: jitgrad.where(jitgrad.tensor([True, False]),
                                                 jitgrad.ones(2), 0.0), "float32"),
    ("f32<pyfloat", lambda: jitgrad.ones(3) < 1.5, "bool"),
    ("i64==f64", lambda: jitgrad.arange(3) == jitgrad.ones(3, dtype=_f("float64")), "bool"),
    ("bool!=bool", lambda: jitgrad.tensor([True]) != jitgrad.tensor([False]), "bool"),
    ("clamp(i64,pyfloat)", lambda: jitgrad.arange(3).clamp(0.5, 1.5), "float32"),
    ("clamp(i64,pyint)", lambda: jitgrad.arange(3).clamp(0, 1), "int64"),
    ("sum(i32)", lambda: jitgrad.arange(3, dtype=_f("int32")).sum(), "int64"),
    ("sum(bool)", lambda: jitgrad.tensor([True, True]).sum(), "int64"),
    ("mean(f64)", lambda: jitgrad.ones(3, dtype=_f("float64")).mean(), "float64"),
    # (an int64 softmax raises, as PyTorch's: tests/test_probe_fixes_55.py)
    ("softmax(i64,dtype)", lambda: jitgrad.arange(3).softmax(0, dtype=_f("float32")),
     "float32"),
    ("cat(f32,f64)", lambda: jitgrad.cat([jitgrad.ones(2), jitgrad.ones(2, dtype=_f(
        "float64"))]), "float64"),
    ("cat(i64,f32)", lambda: jitgrad.cat([jitgrad.arange(2), jitgrad.ones(2)]), "float32"),
    ("stack(i32,i64)", lambda: jitgrad.stack([jitgrad.arange(2, dtype=_f("int32")),
                                              jitgrad.arange(2)]), "int64"),
]


@pytest.mark.parametrize("thunk,expected", [pytest.param(t, e, id=i) for i, t, e in PROMOTION])
def test_dtype_promotion(thunk, expected):
    assert H.dtype_name(thunk()) == expected


def test_default_dtype_float64_changes_scalar_promotion():
    old = jitgrad.get_default_dtype()
    jitgrad.set_default_dtype(jitgrad.float64)
    try:
        assert H.dtype_name(jitgrad.arange(3) * 2.5) == "float64"
        assert H.dtype_name(jitgrad.arange(3) / 2) == "float64"
        assert H.dtype_name(jitgrad.ones(3, dtype=jitgrad.float32) * 2.5) == "float32"
    finally:
        jitgrad.set_default_dtype(old)


def test_clamp_one_sided_on_integer_tensor():
    x = jitgrad.arange(-2, 3)
    assert x.clamp(min=0).tolist() == [0, 0, 0, 1, 2]
    assert x.clamp(max=1).tolist() == [-2, -1, 0, 1, 1]


def test_clamp_on_integer_tensor_with_both_bounds():
    x = jitgrad.arange(-2, 3)
    out = x.clamp(-1, 1)
    assert H.dtype_name(out) == "int64"
    assert out.tolist() == [-1, -1, 0, 1, 1]


@pytest.mark.parametrize("expr", [
    "x / 0.0", "x / z", "1.0 / z", "z.reciprocal()", "z / z", "xd / 0.0", "m / z",
])
def test_float_division_by_zero_gives_ieee_results(expr):
    env = {"x": jitgrad.tensor([1.0, -2.0, 0.0]), "z": jitgrad.zeros(3),
           "xd": jitgrad.tensor([1.0, -2.0, 0.0], dtype=jitgrad.float64),
           "m": jitgrad.ones(2, 3)}
    out = eval(expr, {}, env)
    with np.errstate(all="ignore"):
        ref = eval(expr.replace("z.reciprocal()", "1.0 / z"), {},
                   {k: v.numpy() for k, v in env.items()})
    np.testing.assert_array_equal(out.numpy(), np.asarray(ref, dtype=out.numpy().dtype))


def test_rsqrt_of_zero():
    for dt in (jitgrad.float32, jitgrad.float64):
        x = jitgrad.tensor([0.0, -0.0], dtype=dt)
        assert x.rsqrt().tolist() == [np.inf, -np.inf]


@pytest.mark.parametrize("fn", ["sin", "cos"])
@pytest.mark.parametrize("dtype,x", [pytest.param(dt, v, id=f"{dt.name}-{v:g}") for dt, v in
                                     [(F32, v) for v in (1e7, -3e7, 1e8, 1e10, 1e20, 1e30, 3e38)]
                                     + [(F64, v) for v in (1e20, -1e25, 1e30, 1e300)]])
def test_sin_cos_large_arguments(fn, dtype, x):
    a = np.array([x], dtype=dtype)
    out = getattr(jitgrad.tensor(a), fn)().numpy()
    exact = getattr(np, fn)(a.astype(np.float64)).astype(dtype)
    np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-7)


def test_sin_cos_moderate_arguments():
    for dt, vals in ((F32, [1e3, -1e4, 1e5, 1e6, 4e6]), (F64, [1e3, -1e6, 1e9, 1e12, 1e15])):
        a = np.array(vals, dtype=dt)
        for fn in ("sin", "cos"):
            out = getattr(jitgrad.tensor(a), fn)().numpy()
            exact = getattr(np, fn)(a.astype(np.float64)).astype(dt)
            np.testing.assert_allclose(out, exact, rtol=1e-6, atol=2e-7 if dt == F32 else 1e-15)


def test_relu_reference_keeps_nan():
    a = np.array([np.nan, -1.0, 2.0], dtype=np.float32)
    assert np.isnan(jitgrad.tensor(a).relu().numpy()[0])  # the kernel is right
    assert np.isnan(jitgrad.ops.REGISTRY["relu"].ref(a)[0])


@pytest.mark.parametrize("expr", ["f - True", "True - f", "b - 1", "1 - b", "b - 1.5", "b - i",
                                  "i - b", "f - b", "b - f", "jitgrad.sub(f, True)",
                                  "jitgrad.rsub(b, 1)"])
def test_subtraction_with_one_bool_operand_raises(expr):
    env = {"jitgrad": jitgrad, "b": jitgrad.tensor([True, False]), "f": jitgrad.ones(2),
           "i": jitgrad.arange(2)}
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        eval(expr, env)


@pytest.mark.parametrize("expr", ["x.sqrt()", "x.log()", "x.reciprocal()", "1.0 / x", "x ** 0.5",
                                  "x.rsqrt()", "x ** -1.5"])
def test_backward_at_zero_gives_inf_not_an_exception(expr):
    x = jitgrad.tensor([0.0, 4.0], requires_grad=True)
    eval(expr, {"x": x}).sum().backward()
    assert np.isinf(x.grad.numpy()[0]) or np.isnan(x.grad.numpy()[0])


def test_logsumexp_over_an_empty_dim_is_minus_inf():
    out = jitgrad.zeros(0, 3).logsumexp(0)
    assert out.tolist() == [-np.inf] * 3


def test_empty_reductions():
    x = jitgrad.zeros(0, 3, requires_grad=True)
    assert x.sum(0).tolist() == [0.0] * 3
    assert np.isnan(x.mean(0).detach().numpy()).all()
    x.sum(0).sum().backward()
    assert x.grad.shape == (0, 3)
    assert (jitgrad.zeros(2, 0) @ jitgrad.zeros(0, 3)).tolist() == [[0.0] * 3] * 2


def test_bool_subtraction_raises_like_pytorch():
    b = jitgrad.tensor([True, False])
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        _ = b - b
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        _ = -b


# ------------------------------------------------ hypothesis: broadcasting × dtypes
try:
    import torch as _torch
except ImportError:  # the property still runs against NumPy and PyTorch's written rules
    _torch = None

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
_CAT = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2}


def _wider(a: str, b: str) -> str:
    if _CAT[a] != _CAT[b]:
        return a if _CAT[a] > _CAT[b] else b
    return np.promote_types(a, b).name


def torch_result_type(operands) -> str:
    """PyTorch's promotion written out independently of jitgrad: dimensioned tensors, then
    0-dim tensors (only a higher category wins), then Python scalars (likewise; a float gives
    the default dtype, an int int64)."""
    dims = [d for d, nd in operands if isinstance(d, str) and nd > 0]
    zeros = [d for d, nd in operands if isinstance(d, str) and nd == 0]
    scalars = [d for d, nd in operands if not isinstance(d, str)]
    res = functools.reduce(_wider, dims) if dims else None
    if zeros:
        z = functools.reduce(_wider, zeros)
        if res is None or _CAT[z] > _CAT[res]:
            res = z
    for s in scalars:
        sd = "bool" if s is bool else "int64" if s is int else "float32"
        if res is None or _CAT[sd] > _CAT[res]:
            res = sd
    return res


BINARY = {
    # name: (call, numpy function on arrays of the compute dtype, kind)
    "+": (lambda a, b: a + b, np.add, "arith"),
    "-": (lambda a, b: a - b, np.subtract, "arith"),
    "*": (lambda a, b: a * b, np.multiply, "arith"),
    "/": (lambda a, b: a / b, np.true_divide, "div"),
    "maximum": (lambda a, b: a.maximum(b), np.maximum, "tensors"),
    "minimum": (lambda a, b: a.minimum(b), np.minimum, "tensors"),
    "==": (lambda a, b: a == b, np.equal, "cmp"),
    "!=": (lambda a, b: a != b, np.not_equal, "cmp"),
    "<": (lambda a, b: a < b, np.less, "cmp"),
    "<=": (lambda a, b: a <= b, np.less_equal, "cmp"),
    ">": (lambda a, b: a > b, np.greater, "cmp"),
    ">=": (lambda a, b: a >= b, np.greater_equal, "cmp"),
}


@st.composite
def broadcast_shapes(draw, n=2):
    nd = draw(st.integers(0, 4))
    full = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=nd, max_size=nd))
    shapes = []
    for _ in range(n):
        k = draw(st.integers(0, nd))
        shapes.append(tuple(s if draw(st.booleans()) else 1 for s in full[nd - k:]))
    return shapes


def _array(rng, shape, dtype):
    if dtype == "bool":
        a = rng.random(shape) < 0.5
    elif dtype.startswith("int"):
        a = rng.integers(-5, 6, size=shape)
    else:
        a = rng.uniform(-3.0, 3.0, size=shape).round(1)
    return np.asarray(a, dtype=dtype)


def _scalar(rng, kind):
    if kind is bool:
        return bool(rng.random() < 0.5)
    if kind is int:
        return int(rng.integers(-5, 6))
    return float(np.round(rng.uniform(-3.0, 3.0), 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(BINARY)), shapes=broadcast_shapes(),
       dts=st.lists(st.sampled_from(DTYPES), min_size=2, max_size=2),
       scalar=st.sampled_from([None, None, None, bool, int, float]),
       swap=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_binary_broadcast_and_promotion(op, shapes, dts, scalar, swap, seed):
    call, np_fn, kind = BINARY[op]
    rng = np.random.default_rng(seed)
    arrays = [_array(rng, s, d) for s, d in zip(shapes, dts)]
    if scalar is not None and kind != "tensors":
        operands = [arrays[0], _scalar(rng, scalar)]   # tensor (op) Python scalar
    else:
        operands = arrays
    if swap and not isinstance(operands[1], (bool, int, float)):
        operands = operands[::-1]
    meta = [(a.dtype.name, a.ndim) if isinstance(a, np.ndarray) else (type(a), 0)
            for a in operands]
    promoted = torch_result_type(meta)
    bools = all(m[0] in ("bool", bool) for m in meta)
    jg = [jitgrad.tensor(a) if isinstance(a, np.ndarray) else a for a in operands]
    if op == "-" and any(m[0] in ("bool", bool) for m in meta):
        match = "with two bool tensors" if bools else "with a bool tensor"
        with pytest.raises(RuntimeError, match=match):
            call(*jg)
        if _torch is not None:
            with pytest.raises(RuntimeError, match=match):
                call(*[_torch.tensor(a) if isinstance(a, np.ndarray) else a for a in operands])
        return
    compute = promoted
    if kind == "div" and _CAT[promoted] < 2:
        compute = "float32"
    expected_dtype = "bool" if kind == "cmp" else compute

    out = call(*jg)
    assert H.dtype_name(out) == expected_dtype
    np_ops = [a.astype(compute) if isinstance(a, np.ndarray) else np.asarray(a, compute)
              for a in operands]
    with np.errstate(all="ignore"):
        expected = np.asarray(np_fn(*np_ops)).astype(expected_dtype)
    assert out.shape == expected.shape == np.broadcast_shapes(*[np.shape(a) for a in operands])
    assert_matches(out.numpy(), expected, compute)

    if _torch is not None:
        tt = [_torch.tensor(a) if isinstance(a, np.ndarray) else a for a in operands]
        t_out = call(*tt)
        assert H.dtype_name(t_out) == expected_dtype
        np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-6, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(shapes=broadcast_shapes(3), dts=st.lists(st.sampled_from(DTYPES), min_size=2,
                                                max_size=2), seed=st.integers(0, 2 ** 16))
def test_where_broadcast_and_promotion(shapes, dts, seed):
    rng = np.random.default_rng(seed)
    cond = rng.random(shapes[0]) < 0.5
    a, b = (_array(rng, s, d) for s, d in zip(shapes[1:], dts))
    out = jitgrad.where(jitgrad.tensor(cond), jitgrad.tensor(a), jitgrad.tensor(b))
    dt = torch_result_type([(a.dtype.name, a.ndim), (b.dtype.name, b.ndim)])
    assert H.dtype_name(out) == dt
    np.testing.assert_array_equal(out.numpy(), np.where(cond, a.astype(dt), b.astype(dt)))
