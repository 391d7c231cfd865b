"""PyTorch as the oracle: for every registered op and sample, jitgrad and PyTorch on identical
float32 and float64 data give the same forward values and dtypes, the same gradient for every
input (backward of ``(out * w).sum()`` with a fixed random ``w``) and the same ``grad_fn``
class name. Then the node names of public-API expressions (the list below runs without
PyTorch; the rest compare live).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from helpers import ops_helpers

import jitgrad
from jitgrad.ops import REGISTRY

H = ops_helpers()
F32, F64 = H.F32, H.F64
ALL = sorted(REGISTRY)
DIFFERENTIABLE = sorted(n for n, op in REGISTRY.items() if op.differentiable)

#: forward rtol/atol against PyTorch (different math libraries and summation orders)
FWD_TOL = {F32: (1e-5, 1e-6), F64: (1e-12, 1e-13)}
GRAD_TOL = {F32: (1e-5, 1e-5), F64: (1e-11, 1e-12)}


def _tol(table: dict, name: str, dtype) -> tuple[float, float]:
    """``table``'s (rtol, atol), looser in float64 where PyTorch's own values are less
    accurate (``H.TORCH_F64_RTOL``, with the reason)."""
    rtol, atol = table[dtype]
    if dtype == F64 and name in H.TORCH_F64_RTOL:
        rtol = max(rtol, H.TORCH_F64_RTOL[name][0])
    return rtol, atol


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _params(names, dtype, keep=None, xfail=None):
    return [pytest.param(*c.values, dtype, id=f"{c.id}-{dtype.name}", marks=c.marks)
            for c in H.case_params(names, dtype, keep=keep, xfail=xfail)]


def _both(torch, name, i, dtype, grad=True):
    """(jitgrad inputs, jitgrad output, torch inputs, torch output) of one sample."""
    args, p = H.sample(name, i, dtype)
    nograd = p.get("_torch_nograd", ())
    jts = H.make_inputs(jitgrad, args, grad, nograd)
    tts = H.make_inputs(torch, args, grad, nograd)
    return jts, H.call(jitgrad, name, jts, p), tts, H.call(torch, name, tts, p)


# ------------------------------------------------------------------------ forward
FWD_CASES = [c for dt in (F32, F64) for c in _params(ALL, dt, xfail=H.FORWARD_BUGS)]


@pytest.mark.parametrize("name,i,dtype", FWD_CASES)
def test_forward_matches_torch(torch, name, i, dtype):
    _, out, _, t_out = _both(torch, name, i, dtype, grad=False)
    assert tuple(out.shape) == tuple(t_out.shape)
    assert H.dtype_name(out) == H.dtype_name(t_out)
    rtol, atol = _tol(FWD_TOL, name, dtype)
    ref = H.to_numpy(t_out)
    # sums in another order (conv, matmul) differ by rounding relative to the terms, which
    # an element that cancels to near 0 does not show: scale atol by the output's magnitude
    scale = float(np.nanmax(np.abs(ref[np.isfinite(ref)]))) if np.isfinite(ref).any() else 0.0
    np.testing.assert_allclose(H.to_numpy(out), ref, rtol=rtol, atol=max(atol, rtol * scale))


def test_max_min_dim_indices_match_torch(torch):
    a = np.random.default_rng(0).permutation(24).reshape(2, 3, 4).astype(np.float32)
    for fn in ("max", "min"):
        for d in (0, 1, -1):
            for k in (False, True):
                j = getattr(jitgrad.tensor(a), fn)(d, keepdim=k)
                t = getattr(torch.tensor(a), fn)(d, keepdim=k)
                np.testing.assert_array_equal(j.indices.numpy(), t.indices.numpy())
                np.testing.assert_array_equal(j[1].numpy(), t[1].numpy())
                assert H.dtype_name(j.indices) == "int64"


# ----------------------------------------------------------------------- gradients
GRAD_BUGS = {**H.BACKWARD_BUGS, **H.FORWARD_BUGS}
GRAD_CASES = [c for dt in (F32, F64) for c in _params(
    DIFFERENTIABLE, dt, keep=lambda n, a, p: not p.get("_nograd"), xfail=GRAD_BUGS)]


@pytest.mark.parametrize("name,i,dtype", GRAD_CASES)
def test_gradients_match_torch(torch, name, i, dtype):
    jts, out, tts, t_out = _both(torch, name, i, dtype)
    assert out.requires_grad == t_out.requires_grad
    w = np.random.default_rng(7).uniform(-1.0, 1.0, size=tuple(t_out.shape))
    w = w.astype(H.to_numpy(t_out).dtype)
    (out * jitgrad.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    rtol, atol = _tol(GRAD_TOL, name, dtype)
    for k, (j, t) in enumerate(zip(jts, tts)):
        if not H.is_tensor(torch, t) or not t.requires_grad:
            continue
        assert (j.grad is None) == (t.grad is None), f"input {k}: {j.grad} vs {t.grad}"
        if t.grad is not None:
            assert H.dtype_name(j.grad) == H.dtype_name(t.grad)
            np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {k}")


# ---------------------------------------------------------------------- node names
#: accepted differences: only the grad_fn class name differs from PyTorch's (values match)
NAME_ONLY = "KNOWN DIFFERENCE (node name only): "
ASSEMBLE_NAME = (NAME_ONLY + "assemble_slices is the op a compiled plan runs for the summed "
                 "gradients of a split (IndexPutBackward0 under create_graph); PyTorch's graph "
                 "has the adds (AddBackward0) or one slice's SliceBackwardBackward0")
BUG_GETITEM_BWD_NAME = (NAME_ONLY + "the create_graph gradient of indexing is always "
                        "IndexPutBackward0; "
                        "PyTorch: SelectBackwardBackward0 / SliceBackwardBackward0 / "
                        "IndexPutImplBackward0 ...")
BUG_COPYSLICES = (NAME_ONLY + "y[basic index] = v records IndexPutBackward0; PyTorch records "
                  "CopySlices (IndexPutBackward0 only for advanced indices)")
BUG_MM_3D_NAME = NAME_ONLY + "2-D @ 3-D records UnsafeViewBackward0; PyTorch CloneBackward0"
BUG_BCE_CG_NAME = (NAME_ONLY + "the create_graph gradient of BCE-with-logits records "
                   "BinaryCrossEntropyWithLogitsBackwardBackward0; PyTorch builds it from "
                   "ordinary ops (MulBackward0)")
BUG_POW_CG = (NAME_ONLY + "the create_graph gradient of x ** c records "
              "PowBackwardBackward0; PyTorch "
              "computes it with ordinary ops (MulBackward0; no graph for c == 0)")
BUG_CLAMP_CG = (NAME_ONLY + "the create_graph gradient of clamp records "
                "ClampBackwardBackward0; PyTorch's "
                "is a where() on the incoming gradient (WhereBackward0, or no grad_fn)")
BUG_CTC_ZERO_INF = (NAME_ONLY + "ctc_loss(zero_infinity=True): PyTorch zeroes the infinite "
                    "losses with a where() after its CTC node (WhereBackward0); jitgrad's CTC op "
                    "zeroes them itself (CtcLossBackward0)")
NAME_BUGS = {
    "ctc_loss-3": BUG_CTC_ZERO_INF,
    **{f"pow_backward-{i}": BUG_POW_CG for i in range(6)},
    **{f"clamp_backward-{i}": BUG_CLAMP_CG for i in range(4)},
    **{f"binary_cross_entropy_with_logits_backward-{c}": BUG_BCE_CG_NAME
       for c in ("mean", "sum", "none", "weight", "pos_weight", "both", "0d")},
    **{f"getitem_backward-{c[2]}": BUG_GETITEM_BWD_NAME for c in H._GETITEM},
    **{f"assemble_slices-{i}": ASSEMBLE_NAME for i in range(3)},
    **{f"index_put-{c}": BUG_COPYSLICES for c in ("row", "col", "broadcast", "0d-value",
                                                  "ellipsis")},
    "matmul-(2, 3)@(5, 3, 4)": BUG_MM_3D_NAME,
    **{f"pool_gather-{c}": NAME_ONLY + "max_pool2d's double backward (a gather at the argmax "
       "positions) is one node, pool_gather; PyTorch's is a view of an index_select (ViewBackward0)"
       for c in ("k2", "k3s2p1", "dilated", "ceil", "overlap", "unbatched")},
    **{f"sign_of_det-{c}": NAME_ONLY + "slogdet's sign is an op of its own with no gradient; "
       "PyTorch's is the other output of the LinalgSlogdetBackward0 node (its gradient is "
       "zero)" for c in ("matrix", "batch", "1x1")},
}
#: ops whose node a CPU wheel of PyTorch cannot make: the name from derivatives.yaml
NODES_WITHOUT_ORACLE = {"pin_memory": "PinMemoryBackward0",  # _pin_memory: self: grad
                        # the LSTM cell's backward as ops (PyTorch's CPU LSTM: composites)
                        "lstm_cell_c_backward": "LstmCellCBackwardBackward0",
                        "lstm_cell_h_backward": "LstmCellHBackwardBackward0",
                        # PyTorch's CPU LSTM layer's node, whose op returns (output, hy,
                        # cy, workspace): the oracle is a composite of the same steps
                        "lstm_layer": "MkldnnRnnLayerBackward0",
                        # PyTorch's CPU GRU is a composite: one node of jitgrad's own
                        "gru_layer": "GruLayerBackward0", "elman_layer": "RnnLayerBackward0"}
NAME_CASES = [c for dt in (F32, F64) for c in _params(
    [n for n in ALL if n not in NODES_WITHOUT_ORACLE], dt, xfail=NAME_BUGS)]


@pytest.mark.parametrize("name,i,dtype", NAME_CASES)
def test_node_name_matches_torch(torch, name, i, dtype):
    _, out, _, t_out = _both(torch, name, i, dtype)
    assert H.node_name(out) == H.node_name(t_out)


@pytest.mark.parametrize("name", sorted(NODES_WITHOUT_ORACLE))
def test_node_names_pytorch_cannot_show_on_a_cpu(name):
    args, p = H.sample(name, 0, F64)
    out = H.call(jitgrad, name, H.make_inputs(jitgrad, args), p)
    assert H.node_name(out) == NODES_WITHOUT_ORACLE[name]


# expression -> PyTorch's grad_fn class (torch 2.13; the list of /tmp/names.py)
PUBLIC_NAMES = """
x+2 AddBackward0 | 2+x AddBackward0 | x-2 SubBackward0 | 2-x RsubBackward1 | x*2 MulBackward0
2*x MulBackward0 | x/2 DivBackward0 | 2/x MulBackward0 | x**2 PowBackward0 | 2**x PowBackward2
x**x PowBackward1 | -x NegBackward0 | abs(x) AbsBackward0 | x.exp() ExpBackward0
x.log() LogBackward0 | x.sqrt() SqrtBackward0 | x.sin() SinBackward0 | x.cos() CosBackward0
x.tanh() TanhBackward0 | x.sigmoid() SigmoidBackward0 | x.relu() ReluBackward0
torch.maximum(x,x) MaximumBackward0 | torch.minimum(x,x) MinimumBackward0
x.clamp(0,1) ClampBackward1 | x.clamp(min=0) ClampBackward1 | x.clamp(max=1) ClampBackward1
torch.where(x>1,x,x) WhereBackward0 | x.sum() SumBackward0 | x.sum(0) SumBackward1
m.sum(1,keepdim=True) SumBackward1 | x.mean() MeanBackward0 | m.mean(0) MeanBackward1
x.max() MaxBackward1 | m.max(1)[0] MaxBackward0 | x.min() MinBackward1
m.min(0)[0] MinBackward0 | x.softmax(0) SoftmaxBackward0 | x.log_softmax(0) LogSoftmaxBackward0
x.logsumexp(0) LogsumexpBackward0 | m@v MvBackward0 | v@v DotBackward0 | m@m.T MmBackward0
b3@c3 UnsafeViewBackward0 | v@m.T SqueezeBackward4 | b3@v UnsafeViewBackward0
m.reshape(3,2) ViewBackward0 | m.view(6) ViewBackward0 | m.transpose(0,1) TransposeBackward0
m.permute(1,0) PermuteBackward0 | m.T PermuteBackward0 | m.unsqueeze(0) UnsqueezeBackward0
m.unsqueeze(0).squeeze(0) SqueezeBackward1 | m.unsqueeze(0).squeeze() SqueezeBackward0
v.expand(2,3) ExpandBackward0 | m.flatten() ViewBackward0 | m[0] SelectBackward0
m[:,1:] SliceBackward0 | m[None] UnsqueezeBackward0 | m[...,0] SelectBackward0
m[[0,1]] IndexBackward0 | m[m>0] IndexBackward0 | m[0,1] SelectBackward0
torch.cat([m,m]) CatBackward0 | torch.stack([m,m]) StackBackward0 | m.clone() CloneBackward0
x.double() ToCopyBackward0 | x.float() NoneType | x.to(torch.float64) ToCopyBackward0
x.pow(2) PowBackward0 | x.pow(x) PowBackward1 | torch.pow(2,x) PowBackward2
x.square() PowBackward0 | x.rsqrt() RsqrtBackward0 | x.exp().detach() NoneType
m.t() TBackward0 | x.max(0)[0] MaxBackward0 | x.reciprocal() ReciprocalBackward0
m.reshape(-1) ViewBackward0 | x.clamp(0.0,1.0) ClampBackward1
torch.nn.functional.relu(x) ReluBackward0 | m.contiguous() NoneType
m.T.reshape(6) UnsafeViewBackward0 | x.expand(2,3) ExpandBackward0
torch.amax(m,1) AmaxBackward0 | x.neg() NegBackward0 | x.abs() AbsBackward0
m[0][1] SelectBackward0 | m[:, [0,2]] IndexBackward0
"""
PUBLIC = [tuple(e.strip().rsplit(" ", 1)) for line in PUBLIC_NAMES.strip().splitlines()
          for e in line.split("|")]
PUBLIC_BUGS: dict[str, str] = {}


def _namespace(M):
    ns = {"torch": M, "x": M.tensor([1.0, 2.0, 3.0], requires_grad=True),
          "m": M.ones(2, 3, requires_grad=True), "v": M.ones(3, requires_grad=True),
          "b3": M.ones(4, 2, 3, requires_grad=True), "c3": M.ones(4, 3, 5, requires_grad=True)}

    def g(y, wrt="x"):  # create_graph gradient of y.sum()
        return M.autograd.grad(y.sum(), ns[wrt], create_graph=True)[0]
    ns["g"] = g
    return ns


def _name_of(M, expr):
    r = eval(expr, _namespace(M))
    return type(r.grad_fn).__name__


@pytest.mark.parametrize("expr,expected", [
    pytest.param(e, n, id=e, marks=[pytest.mark.xfail(reason=PUBLIC_BUGS[e], strict=True)]
                 if e in PUBLIC_BUGS else []) for e, n in PUBLIC])
def test_public_node_names(expr, expected):
    assert _name_of(jitgrad, expr) == expected


def test_public_node_names_are_torchs(torch):
    for expr, expected in PUBLIC:
        assert _name_of(torch, expr) == expected, expr


def _names_file():
    p = Path("/tmp/names.py")
    if not p.exists():
        return []
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "exprs":
            return list(ast.literal_eval(node.value))
    return []


@pytest.mark.parametrize("expr", [pytest.param(e, id=e, marks=[pytest.mark.xfail(
    reason=PUBLIC_BUGS[e], strict=True)] if e in PUBLIC_BUGS else []) for e in _names_file()])
def test_names_file_matches_torch(torch, expr):
    assert _name_of(jitgrad, expr) == _name_of(torch, expr)


MORE_NAMES = [
    ("torch.rsub(x, x)", None), ("torch.rsub(x, 2.0)", None),
    ("x.sum(dim=None)", None), ("m.sum((0, 1))", None),
    ("m.split(1)[0]", None), ("m.chunk(3, 1)[2]", None),
    ("m.unbind()[0]", None), ("m.narrow(1, 0, 2)", None), ("m.select(1, 0)", None),
    ("m.var()", None), ("m.std(0)", None), ("m.var(1, unbiased=False)", None), ("m.mT", None),
    ("m.movedim(0, 1)", None), ("torch.swapaxes(m, 0, 1)", None), ("m.amax()", None),
    ("m.amin(0)", None), ("m.unsqueeze(0).squeeze((0,))", None), ("m.view_as(m)", None),
    ("m.unflatten(1, (3, 1))", None), ("x.expand_as(m)", None), ("m.T.contiguous()", None),
    ("m.T.flatten()", None), ("m.flatten(1)", None), ("m.reshape(2, 3)", None),
    ("m[..., None]", None), ("m[1:, None, ::2]", None), ("m[None, :, 0]", None),
    ("m[:, 0, None]", None),
    ("m[torch.tensor(1)]", None), ("m[torch.tensor([True, False])]", None),
    ("torch.mm(m, m.T)", None), ("torch.mv(m, v)", None), ("torch.dot(v, v)", None),
    ("torch.bmm(b3, c3)", None), ("m @ c3", BUG_MM_3D_NAME), ("b3 @ m.T", None),
    ("x.masked_fill(x > 1, 0.0)", None),
    ("x.masked_fill(x > 1, x.sum())", NAME_ONLY + "masked_fill with a 0-d tensor value that "
     "requires "
     "grad records WhereBackward0; PyTorch MaskedFillBackward1"),
    ("torch.where(x > 1, x, 0.0)", None),
    ("x.expm1()", None), ("x.log1p()", None), ("x.sign()", None), ("x.clip(0, 1)", None),
    ("x ** 0.5", None), ("x.type(torch.float64)", None), ("x.to(torch.float32)", None),
    ("torch.nn.functional.softmax(m, 1)", None), ("torch.nn.functional.log_softmax(m, -1)",
                                                   None),
    ("torch.nn.functional.binary_cross_entropy_with_logits(x, x.detach().sigmoid())", None),
    ("torch.logsumexp(m, (0, 1))", None), ("torch.outer(x, x)", None),
    ("torch.clamp(x, torch.tensor(0.5), torch.tensor(2.5))",
     NAME_ONLY + "clamp with tensor bounds records MinimumBackward0 (maximum/minimum composite); "
     "PyTorch ClampBackward0"),
]
CREATE_GRAPH_NAMES = [
    ("g(x ** 2)", BUG_POW_CG), ("g(x ** 3.0)", BUG_POW_CG), ("g(x.pow(0))", BUG_POW_CG),
    ("g(x.tanh())", None), ("g(x.sigmoid())", None), ("g(x.relu())", None),
    ("g(x.exp())", None), ("g(x.sin())", None), ("g(x.log())", None), ("g(x * x)", None),
    ("g(x.clamp(0, 2))", BUG_CLAMP_CG), ("g(m[0] * 2, 'm')", None),
]


@pytest.mark.parametrize("expr", [
    pytest.param(e, id=e, marks=[pytest.mark.xfail(reason=bug, strict=True)] if bug else [])
    for e, bug in MORE_NAMES + CREATE_GRAPH_NAMES])
def test_more_node_names_match_torch(torch, expr):
    assert _name_of(jitgrad, expr) == _name_of(torch, expr)


def test_int_and_list_separated_by_a_slice_index_like_torch():
    a = jitgrad.tensor(np.arange(24.0).reshape(2, 3, 4))
    r = a[0, :, [3, 1]]
    assert r.shape == (3, 2)
    assert r.tolist() == [[3.0, 1.0], [7.0, 5.0], [11.0, 9.0]]


POW_EXPONENTS = [0.5, -0.5, 1.5, -1.5, 2.0, 3.0, -1.0, -2.0, 0.3, 2, 3, -3, 0]
POW_BUGS: dict = {}


@pytest.mark.parametrize("e", [pytest.param(e, id=repr(e), marks=[pytest.mark.xfail(
    reason=POW_BUGS[e], strict=True)] if e in POW_BUGS else []) for e in POW_EXPONENTS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_special_bases_like_torch(torch, dtype, e):
    """x ** e at the bases where C pow, NumPy and PyTorch's specialisations can differ."""
    base = [-np.inf, np.inf, -0.0, 0.0, -1.0, 1.0, -2.5, np.nan]
    with np.errstate(all="ignore"):
        j = (jitgrad.tensor(base, dtype=getattr(jitgrad, dtype)) ** e).numpy()
    t = (torch.tensor(base, dtype=getattr(torch, dtype)) ** e).numpy()
    np.testing.assert_allclose(j, t, rtol=1e-6, equal_nan=True)
    assert (np.signbit(j) == np.signbit(t))[~np.isnan(t)].all(), (j, t)


@pytest.mark.parametrize("e", [0.5, -0.5, 1.5, -1.5, 2.0, 3.0, -1.0, 0.0])
def test_pow_backward_at_special_bases_like_torch(torch, e):
    base = [-np.inf, np.inf, -0.0, 0.0, -1.0, 1.0, 2.5]
    j = jitgrad.tensor(base, dtype=jitgrad.float64, requires_grad=True)
    t = torch.tensor(base, dtype=torch.float64, requires_grad=True)
    (j ** e).sum().backward()
    (t ** e).sum().backward()
    np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True)
