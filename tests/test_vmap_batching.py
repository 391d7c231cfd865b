"""``vmap`` batching by tracing (``jitgrad/func/_batch_trace.py``, ``_batch_rules.py``): the
batched replay equals the per-element loop (``JITGRAD_VMAP=loop``) -- values and gradients --
for every registered op's samples and for the functions users map (per-sample gradients,
Jacobians, models), and it really batches (one trace, no per-element calls) where it should.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_helpers

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.func import _batch_rules, _batch_trace, grad, vjp, vmap
from jitgrad.ops import REGISTRY

H = ops_helpers()
F64 = np.float64
SIZE = 3
SCALES = (1.0, 0.9, 0.8)  # element i = sample * SCALES[i]: domains and orderings kept


class Counter:
    """How a vmap call ran: traces replayed, and op calls that fell back to the per-element
    loop (by op name)."""

    def __init__(self, monkeypatch) -> None:
        self.replays = 0
        self.looped: list = []
        real_replay, real_loop = _batch_trace._replay, _batch_trace.loop_rule

        def replay(*a, **k):
            self.replays += 1
            return real_replay(*a, **k)

        def loop(op, *a, **k):
            self.looped.append(op.name)
            return real_loop(op, *a, **k)

        monkeypatch.setattr(_batch_trace, "_replay", replay)
        monkeypatch.setattr(_batch_trace, "loop_rule", loop)


@pytest.fixture
def counter(monkeypatch):
    return Counter(monkeypatch)


def looped(monkeypatch, fn):
    """``fn()`` with vmap running its per-element loop."""
    monkeypatch.setenv("JITGRAD_VMAP", "loop")
    try:
        return fn()
    finally:
        monkeypatch.delenv("JITGRAD_VMAP")


def assert_close(a, b, rtol=1e-11, atol=1e-12):
    a = a.detach().numpy() if isinstance(a, jitgrad.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, jitgrad.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------ every op's samples
def _op_cases():
    return [c for c in H.case_params(sorted(REGISTRY), F64)]


def _batched_inputs(args):
    """Float arrays batched (scaled copies along a new dim 0), the rest shared."""
    ins, dims = [], []
    for a in args:
        if isinstance(a, np.generic):
            a = np.asarray(a)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            ins.append(jitgrad.tensor(np.stack([a * s for s in SCALES]), requires_grad=True))
            dims.append(0)
        elif isinstance(a, np.ndarray):
            ins.append(jitgrad.tensor(a.copy()))
            dims.append(None)
        else:
            ins.append(a)
            dims.append(None)
    return ins, tuple(dims)


@pytest.mark.parametrize("name,i", _op_cases())
def test_every_op_batches_like_the_loop(name, i, monkeypatch):
    """Each registered op's samples, mapped over three scaled copies of their float inputs:
    the values, and the gradients of every float input, equal the loop's."""
    args, p = H.sample(name, i, F64)
    if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
        pytest.skip("no float input to map over")

    def f(*ts):
        out = H.call(jitgrad, name, list(ts), p)
        return tuple(out) if isinstance(out, (tuple, list)) else out

    def run():
        ins, dims = _batched_inputs(args)
        try:
            out = vmap(f, in_dims=dims)(*ins)
        except Exception as e:  # noqa: BLE001 - both paths must raise alike
            return ins, type(e)
        outs = out if isinstance(out, tuple) else (out,)
        floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
        if floats:
            total = sum((o * jitgrad.linspace(0.5, 1.5, o.numel(), dtype=o.dtype)
                         .reshape(o.shape)).sum() for o in floats)
            try:
                total.backward()
            except (RuntimeError, NotImplementedError) as e:  # (not differentiable)
                return ins, outs + (type(e),)
        return ins, outs

    ins_b, got = run()
    ins_l, want = looped(monkeypatch, run)
    if isinstance(want, type):
        assert got is want
        return
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, type):
            assert g is w
            continue
        assert_close(g, w, rtol=1e-10, atol=1e-11)
    for a, b in zip(ins_b, ins_l):
        if isinstance(a, jitgrad.Tensor) and a.requires_grad:
            assert (a.grad is None) == (b.grad is None), name
            if a.grad is not None:
                assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-11)


#: ops whose samples are replayed batched with a rule of their own, no per-element loop
BATCHED_OPS = ["add", "mul", "tanh", "exp", "where", "clamp", "sum", "mean", "amax", "std",
               "var", "logsumexp", "vector_norm", "softmax", "log_softmax", "cumsum",
               "reshape", "permute", "expand", "getitem", "cat", "stack", "matmul", "addmm",
               "max_dim", "flip", "to_dtype", "tril", "constant_pad_nd"]


@pytest.mark.parametrize("name", BATCHED_OPS)
def test_ops_with_rules_run_once_on_the_batch(name, counter):
    """Their samples replay with no op falling back to the per-element loop."""
    cases = H.samples_for(name, F64)
    ran = 0
    for args, p in cases:
        if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
            continue
        ins, dims = _batched_inputs(args)
        try:
            vmap(lambda *ts, p=p: H.call(jitgrad, name, list(ts), p), in_dims=dims)(*ins)
        except Exception:  # noqa: BLE001 - error samples (checked against the loop above)
            continue
        ran += 1
    assert ran and counter.replays == ran
    assert name not in counter.looped


# ------------------------------------------------------------ per-sample gradients
def _mlp_params(dtype=jitgrad.float64):
    g = jitgrad.Generator().manual_seed(3)
    return (jitgrad.randn(16, 6, generator=g, dtype=dtype),
            jitgrad.randn(16, generator=g, dtype=dtype),
            jitgrad.randn(4, 16, generator=g, dtype=dtype))


def _mlp_loss(params, x, t, reduction="mean", weight=None, ignore_index=-100):
    w1, b1, w2 = params
    h = jitgrad.tanh(F.linear(x.unsqueeze(0), w1, b1))
    return F.cross_entropy(F.linear(h, w2), t.unsqueeze(0), weight=weight,
                           reduction=reduction, ignore_index=ignore_index)


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"},
                                {"weight": "w"}, {"ignore_index": 2}])
def test_per_sample_gradients_of_an_mlp(kw, counter, monkeypatch):
    """torch.func's tutorial recipe: vmap(grad(loss), in_dims=(None, 0, 0)); one replay,
    cross-entropy's forward and backward batched by their rules."""
    params = _mlp_params()
    x = jitgrad.randn(10, 6, dtype=jitgrad.float64)
    t = jitgrad.tensor([0, 1, 2, 3, 2, 1, 0, 2, 2, 3])
    if kw.get("weight") == "w":
        kw = {"weight": jitgrad.tensor([0.5, 1.0, 2.0, 1.5], dtype=jitgrad.float64)}

    def run():
        return vmap(grad(lambda p, a, b: _mlp_loss(p, a, b, **kw)), in_dims=(None, 0, 0))(
            params, x, t)

    got = run()
    assert counter.replays == 1 and counter.looped == []
    want = looped(monkeypatch, run)
    for g, w in zip(got, want):
        assert_close(g, w)
    # each element's gradient is the gradient of that element's loss alone
    one = grad(lambda p: _mlp_loss(p, x[4], t[4], **kw))(params)
    for g, w in zip(got, one):
        assert_close(g[4], w)


def test_per_sample_gradients_of_a_cnn(counter, monkeypatch):
    """conv2d, max_pool2d, flatten, linear: per-sample gradients via functional_call; the
    conv weight's per-sample gradient is one grouped convolution (the batch times the
    groups), the bias's a sum."""
    from jitgrad.func import functional_call

    jitgrad.manual_seed(0)
    model = jitgrad.nn.Sequential(
        jitgrad.nn.Conv2d(1, 4, 3), jitgrad.nn.ReLU(), jitgrad.nn.MaxPool2d(2),
        jitgrad.nn.Flatten(), jitgrad.nn.Linear(4 * 3 * 3, 5)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = jitgrad.randn(6, 1, 8, 8, dtype=jitgrad.float64)
    t = jitgrad.tensor([0, 4, 1, 3, 2, 0])

    def loss(p, a, b):
        out = functional_call(model, p, (a.unsqueeze(0),))
        return F.cross_entropy(out, b.unsqueeze(0))

    def run():
        return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)

    got = run()
    assert counter.replays == 1 and counter.looped == []  # (conv weights: groups)
    want = looped(monkeypatch, run)
    assert got.keys() == want.keys()
    for k in got:
        assert_close(got[k], want[k])


def test_jacobian_rows_by_vmap_of_vjp(counter):
    """jacrev's recipe: the vjp function mapped over the identity's rows."""
    x = jitgrad.randn(5, dtype=jitgrad.float64)
    w = jitgrad.randn(4, 5, dtype=jitgrad.float64)
    _, pullback = vjp(lambda a: jitgrad.sin(w @ a) * a.sum(), x)
    jac = vmap(pullback)(jitgrad.eye(4, dtype=jitgrad.float64))[0]
    assert counter.replays == 1
    want = jitgrad.autograd.functional.jacobian(lambda a: jitgrad.sin(w @ a) * a.sum(), x)
    assert_close(jac, want)


# ---------------------------------------------------------------- autograd through
def test_gradients_flow_through_the_outputs_to_inputs_and_captured_tensors(monkeypatch):
    w = jitgrad.randn(4, 3, dtype=jitgrad.float64, requires_grad=True)

    def run():
        x = jitgrad.linspace(-1, 1, 15, dtype=jitgrad.float64).reshape(5, 3).requires_grad_()
        w.grad = None
        y = vmap(lambda a: jitgrad.tanh(w @ a).sum() * a.norm())(x)
        (y * jitgrad.arange(5, dtype=jitgrad.float64)).sum().backward()
        return y, x.grad, w.grad

    got = run()
    want = looped(monkeypatch, run)
    for g, v in zip(got, want):
        assert_close(g, v)


def test_detach_and_no_grad_inside_cut_the_gradient_as_in_the_loop(monkeypatch):
    def f(a):
        with jitgrad.no_grad():
            s = a * 3
        return a.detach() * a + s * a

    def run():
        x = jitgrad.randn(4, 2, dtype=jitgrad.float64, generator=jitgrad.Generator()
                          .manual_seed(1)).requires_grad_()
        vmap(f)(x).sum().backward()
        return x.grad

    got = run()
    assert_close(got, looped(monkeypatch, run))


# ---------------------------------------------------------------- dims and chunks
@pytest.mark.parametrize("in_dims,out_dims", [(1, 0), (-1, 1), ((1, None), 0),
                                              ((0, 0), (1, None))])
def test_in_and_out_dims(in_dims, out_dims, monkeypatch):
    a = jitgrad.randn(3, 4, dtype=jitgrad.float64)
    b = jitgrad.randn(4, 3, dtype=jitgrad.float64)
    two = isinstance(out_dims, tuple)

    def f(x, y=b):
        r = x * 2 + (y.sum() if y.dim() == 2 else y.sum())
        return (r, y.sum() * 0 + 1) if two else r

    def run():
        if isinstance(in_dims, tuple):
            return vmap(f, in_dims=in_dims, out_dims=out_dims)(a, b.t() if in_dims[1] == 0
                                                              else b)
        return vmap(f, in_dims=in_dims, out_dims=out_dims)(a)

    if two:
        with pytest.raises(ValueError, match="can not return a BatchedTensor"):
            run()
        return
    got, want = run(), looped(monkeypatch, run)
    assert_close(got, want)


def test_an_output_that_does_not_depend_on_the_batch_is_expanded():
    c = jitgrad.ones(2, dtype=jitgrad.float64)
    out = vmap(lambda a: (a * 2, c + 1))(jitgrad.zeros(3, 2, dtype=jitgrad.float64))
    assert out[1].shape == (3, 2) and np.all(out[1].numpy() == 2)
    same = vmap(lambda a: (a * 2, c + 1), out_dims=(0, None))(jitgrad.zeros(3, 2))
    assert same[1].shape == (2,)


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_chunk_size_replays_slices_of_the_batch(chunk, counter, monkeypatch):
    x = jitgrad.randn(5, 3, dtype=jitgrad.float64)

    def run():
        return vmap(lambda a: jitgrad.softmax(a, 0) @ a, chunk_size=chunk)(x)

    got = run()
    assert counter.replays == -(-5 // min(chunk, 5))
    assert_close(got, looped(monkeypatch, run))


# ---------------------------------------------------------------- what falls back
def test_random_draws_run_the_loop_and_keep_randomness_semantics():
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + jitgrad.rand(()))(jitgrad.zeros(3))
    d = vmap(lambda a: a + jitgrad.rand(()), randomness="different")(jitgrad.zeros(3))
    assert len(set(d.tolist())) == 3


def test_in_place_writes_to_inputs_run_the_loop(counter):
    x = jitgrad.zeros(3, 2)
    vmap(lambda a: a.add_(1.0))(x)
    assert counter.replays == 0
    np.testing.assert_array_equal(x.numpy(), np.ones((3, 2)))


def test_a_module_updating_its_buffers_runs_the_loop(counter, monkeypatch):
    bn = jitgrad.nn.BatchNorm1d(2)
    x = jitgrad.randn(3, 4, 2)

    def run():
        bn.running_mean.zero_()
        out = vmap(bn)(x)
        return out, bn.running_mean.clone()

    got = run()
    assert counter.replays == 0
    for g, w in zip(got, looped(monkeypatch, run)):
        assert_close(g, w)


def test_nested_vmap_batches_both_maps(counter, monkeypatch):
    """The inner vmap runs inside the outer one's trace: its replay is what that trace
    records, and the outer replay batches it again (no per-element op)."""
    x = jitgrad.randn(3, 4, 2, dtype=jitgrad.float64)

    def run():
        return vmap(vmap(lambda a: a.sum() * a))(x)

    got = run()
    assert counter.replays == 2 and counter.looped == []
    assert_close(got, looped(monkeypatch, run))


def test_vmap_inside_compile_is_one_batched_graph():
    """compile(vmap(f)): the plan holds f's ops once, batched -- not once per element --
    and gives eager's values."""
    f = jitgrad.compile(lambda x: vmap(lambda a: (a * a).sum() * a)(x), fullgraph=True)
    for n in (4, 40):
        x = jitgrad.randn(n, 3)
        assert_close(f(x), (x * x).sum(1, keepdim=True) * x, rtol=1e-6, atol=1e-6)
        assert len(f.lower(x).graph.splitlines()) < 10  # (the graph's text)


def test_compiled_per_sample_gradients_follow_python_state(monkeypatch):
    """The function vmap traces inside a compiled one is still watched by compile's
    guards: a number it reads changes, the plan retraces (never a stale result); a value
    escaping inside it is a graph break of the compiled call."""
    params = _mlp_params()
    x = jitgrad.randn(6, 6, dtype=jitgrad.float64)
    t = jitgrad.tensor([0, 1, 2, 3, 2, 1])
    scale = [1.0]

    def loss(p, a, b):
        return _mlp_loss(p, a, b) * scale[0]

    f = jitgrad.compile(lambda p, a, b: vmap(grad(loss), in_dims=(None, 0, 0))(p, a, b))
    for s in (1.0, 1.0, 3.0):
        scale[0] = s
        got = f(params, x, t)
        want = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=1e-10, atol=1e-12)

    def escapes(a):
        return a * 2 if a.sum().item() > 0 else -a

    h = jitgrad.compile(lambda a: vmap(escapes)(a))
    a = jitgrad.tensor([[1.0, 2.0], [-3.0, 1.0]])
    with pytest.warns(UserWarning, match="eagerly"):
        np.testing.assert_array_equal(h(a).numpy(), [[2, 4], [3, -1]])
    np.testing.assert_array_equal(h(-a).numpy(), [[1, 2], [6, -2]])


def test_unknown_ops_fall_back_per_op(counter, monkeypatch):
    """An op with no rule runs once per element inside an otherwise batched replay."""
    monkeypatch.delitem(_batch_rules.RULES, "softmax")
    x = jitgrad.randn(4, 3, dtype=jitgrad.float64)
    got = vmap(lambda a: jitgrad.softmax(a * 2, 0) + 1)(x)
    assert counter.replays == 1 and counter.looped == ["softmax"]
    assert_close(got, jitgrad.softmax(x * 2, 1) + 1)


@pytest.mark.parametrize("chunk", [None, 4])
def test_jacrev_and_hessian_batch_their_rows(chunk, counter, monkeypatch):
    """jacrev maps its vector-Jacobian product over the identity's rows (one replay, or one
    per chunk of rows); hessian = jacfwd(jacrev): the inner map's replay is recorded by the
    outer map's trace and batched again. Both equal the per-row loop."""
    from jitgrad.func import hessian, jacrev

    w = jitgrad.randn(6, 5, dtype=jitgrad.float64)
    x = jitgrad.randn(5, dtype=jitgrad.float64)

    def f(a):
        return jitgrad.tanh(w @ a) * a.sum()

    got = jacrev(f, chunk_size=chunk)(x)
    assert counter.replays == (1 if chunk is None else 2)
    assert_close(got, looped(monkeypatch, lambda: jacrev(f)(x)))

    def g(a):
        return (jitgrad.tanh(w @ a) ** 2).sum()

    got = hessian(g)(x)
    assert_close(got, looped(monkeypatch, lambda: hessian(g)(x)), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.numpy(), got.numpy().T, rtol=1e-10, atol=1e-12)


def test_model_ensemble_with_stacked_weights(counter, monkeypatch):
    """torch.func's ensembling recipe: stack_module_state, then vmap(functional_call,
    in_dims=(0, 0, None)) -- per-model weights batched through linear and layer_norm (its
    affine part applied per model), one replay and no per-element op."""

    jitgrad.manual_seed(0)
    models = [jitgrad.nn.Sequential(jitgrad.nn.Linear(6, 8), jitgrad.nn.GELU(),
                                    jitgrad.nn.LayerNorm(8), jitgrad.nn.Linear(8, 3)).double()
              for _ in range(4)]
    x = jitgrad.randn(5, 6, dtype=jitgrad.float64)
    got = _ensemble_matches_the_loop(models, x, counter, monkeypatch)
    assert_close(got[0][2], models[2](x))


def _ensemble_matches_the_loop(models, x, counter, monkeypatch) -> list:
    """vmap(functional_call) over the stacked ``models`` on ``x``: one replay, nothing per
    element, outputs and per-model gradients equal to the loop's; returns them."""
    from jitgrad.func import functional_call, stack_module_state

    params, buffers = stack_module_state(models)

    def run():
        out = vmap(lambda p, b, a: functional_call(models[0], (p, b), (a,)),
                   in_dims=(0, 0, None))(params, buffers, x)
        out.pow(2).sum().backward()
        return [out] + [params[k].grad.clone() for k in sorted(params)]

    got = run()
    assert counter.replays == 1 and counter.looped == []
    for p in params.values():
        p.grad = None
    for g, w in zip(got, looped(monkeypatch, run)):
        assert_close(g, w)
    return got


@pytest.mark.parametrize("loss_name", ["mse_loss", "smooth_l1_loss", "huber_loss",
                                       "binary_cross_entropy_with_logits"])
def test_per_sample_gradients_of_an_embedding_regressor(loss_name, counter, monkeypatch):
    """An embedding (with a padding row) and a linear head under an element-wise loss: the
    embedding's per-sample gradient is one scatter-add with offset indices, the loss and
    its backward run unreduced on the batch and reduce per element; nothing per element."""
    jitgrad.manual_seed(1)
    emb = jitgrad.nn.Embedding(7, 4, padding_idx=0).double()
    head = jitgrad.nn.Linear(4, 2).double()
    params = {"emb": emb.weight.detach(), "w": head.weight.detach(), "b": head.bias.detach()}
    tokens = jitgrad.tensor([[1, 2, 0], [3, 3, 6], [0, 0, 5], [4, 1, 2]])
    target = jitgrad.rand(4, 3, 2, dtype=jitgrad.float64)
    fn = getattr(F, loss_name)

    def loss(p, tok, y):
        h = F.embedding(tok, p["emb"], padding_idx=0)
        return fn(F.linear(h, p["w"], p["b"]), y)

    def run():
        return vmap(grad(loss), in_dims=(None, 0, 0))(params, tokens, target)

    got = run()
    assert counter.replays == 1 and counter.looped == []
    want = looped(monkeypatch, run)
    for k in got:
        assert_close(got[k], want[k])
    assert np.all(got["emb"].numpy()[:, 0] == 0)  # the padding row


# ------------------------------------------ cases a probe of batched vs loop turned up
class _Square(jitgrad.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return 2 * g * a


@pytest.mark.parametrize("fn", [lambda a: a.median(), lambda a: _Square.apply(a).sum()],
                         ids=["median", "custom_function"])
def test_custom_function_nodes_keep_their_gradient(fn, monkeypatch):
    """A custom Function's node (median() of all elements is one) is not an equation the
    replay can rebuild: a call whose outputs carry one runs the loop, so gradients flow
    through vmap's outputs as in eager mode."""
    def run():
        x = jitgrad.tensor([[1.0, 5, 3], [4, 2, 6]], dtype=jitgrad.float64,
                           requires_grad=True)
        out = vmap(fn)(x)
        out.sum().backward()
        return out, x.grad

    for g, w in zip(run(), looped(monkeypatch, run)):
        assert_close(g, w)


def test_sizes_that_depend_on_values_are_not_frozen():
    """nonzero / unique results have value-dependent sizes: reading them stops the trace."""
    x = jitgrad.tensor([[1.0, -1, 2], [-1, -1, -1], [3, 3, 3]])
    got = vmap(lambda a: a * (a > 0).nonzero().shape[0])(x)
    np.testing.assert_array_equal(got.numpy(), [[2, -2, 4], [-0.0, -0.0, -0.0], [9, 9, 9]])
    got = vmap(lambda a: a * len(a.unique()))(x)
    np.testing.assert_array_equal(got.numpy(), [[3, -3, 6], [-1, -1, -1], [3, 3, 3]])


def test_a_leaf_made_inside_stops_the_gradient(monkeypatch):
    def run():
        x = jitgrad.tensor([[1.0, 2], [3, 4]], requires_grad=True)
        out = vmap(lambda a: a.detach().requires_grad_() * a.detach())(x)
        assert out.requires_grad
        out.sum().backward()
        return x.grad

    assert run() is None and looped(monkeypatch, run) is None


def test_empty_contraction_through_the_shared_matrix_path():
    out = vmap(lambda a, b: a @ b, in_dims=(0, None))(jitgrad.zeros(3, 2, 0),
                                                     jitgrad.zeros(0, 4))
    assert out.shape == (3, 2, 4) and not out.numpy().any()


def test_an_output_that_depends_on_the_batch_with_out_dim_none_is_pytorchs_error():
    with pytest.raises(ValueError, match="can not return a BatchedTensor"):
        vmap(lambda a: a * 0, out_dims=None)(jitgrad.ones(3, 2))


def test_per_sample_gradients_record_no_history():
    """vmap(grad(...)) outputs have none (as the loop's): the replay runs without
    recording autograd nodes."""
    params = _mlp_params()
    x = jitgrad.randn(5, 6, dtype=jitgrad.float64)
    t = jitgrad.tensor([0, 1, 2, 3, 1])
    got = vmap(grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, t)
    assert not any(g.requires_grad for g in got)


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_per_element_statistics(training, counter, monkeypatch):
    """BatchNorm inside vmap: an ensemble's own running statistics in eval mode, each
    element's own batch statistics in training mode (no running stats tracked: their
    update would be a write, which runs the loop) -- one replay, nothing per element."""

    jitgrad.manual_seed(2)
    models = [jitgrad.nn.Sequential(jitgrad.nn.Conv2d(2, 3, 3),
                                    jitgrad.nn.BatchNorm2d(3, track_running_stats=not training),
                                    jitgrad.nn.ReLU()).double() for _ in range(3)]
    for m in models:
        m.train(training)
        if not training:
            m[1].running_mean.uniform_(-1, 1)
            m[1].running_var.uniform_(0.5, 2)
    x = jitgrad.randn(4, 2, 6, 6, dtype=jitgrad.float64)
    got = _ensemble_matches_the_loop(models, x, counter, monkeypatch)
    assert_close(got[0][1], models[1](x))
