"""Fixes from the fourth probe of real-style scripts (stop 54): SDPA backend selection,
``torch.utils._pytree``, ``torch.utils.hooks``, ``torch.utils.data.distributed``,
``torch._inductor.config``, custom Functions with non-tensor outputs, ``inference_mode(False)``,
``sum(dtype=<integer>)`` and schedulers resumed with ``last_epoch``. Where PyTorch is
installed, each is compared with it."""

from __future__ import annotations

import collections
import warnings

import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.nn.attention import SDPBackend, sdpa_kernel


# ----------------------------------------------------------------------- SDPA backends
def test_sdpa_switches_and_context():
    bc = jitgrad.backends.cuda
    assert bc.flash_sdp_enabled() and bc.math_sdp_enabled() and bc.mem_efficient_sdp_enabled()
    q = jitgrad.randn(1, 2, 3, 4)
    ref = F.scaled_dot_product_attention(q, q, q)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        assert not bc.math_sdp_enabled() and bc.mem_efficient_sdp_enabled()
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q, q, q)
    assert bc.math_sdp_enabled()  # restored
    for chosen in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION,
                   [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        with sdpa_kernel(chosen):
            out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            assert out.shape == ref.shape
    with pytest.raises(AssertionError):
        with sdpa_kernel(["math"]):
            pass
    bc.enable_math_sdp(False)
    bc.enable_flash_sdp(False)
    try:
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q, q, q)
    finally:
        bc.enable_math_sdp(True)
        bc.enable_flash_sdp(True)
    with pytest.warns(FutureWarning, match="sdp_kernel"):
        with bc.sdp_kernel(enable_math=False):
            assert not bc.math_sdp_enabled()
    assert bc.math_sdp_enabled()
    assert int(SDPBackend.MATH) == 0 and SDPBackend.ERROR == -1


def test_sdpa_backend_names_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend as TB

    assert {k: int(v) for k, v in TB.__members__.items()} == \
        {k: int(v) for k, v in SDPBackend.__members__.items()}
    names = [n for n in dir(torch.backends.cuda) if "sdp" in n]
    assert all(hasattr(jitgrad.backends.cuda, n) for n in names), names


# ----------------------------------------------------------------------- pytree
NT = collections.namedtuple("NT", "a b")


def _tree():
    return {"x": [1, (2, 3)], "n": None, "nt": NT(4, [5]),
            "od": collections.OrderedDict(z=6, y=7), "dq": collections.deque([8])}


def test_pytree_round_trip_and_maps():
    from jitgrad.utils import _pytree as P

    leaves, spec = P.tree_flatten(_tree())
    assert leaves == [1, 2, 3, None, 4, 5, 6, 7, 8]
    back = P.tree_unflatten([v * 10 if v else v for v in leaves], spec)
    assert back["nt"] == NT(40, [50]) and back["dq"] == collections.deque([80])
    assert list(back["od"]) == ["z", "y"]
    assert P.tree_map(lambda a, b: a + b, [1, {"k": 2}], [10, {"k": 20}]) == [11, {"k": 22}]
    assert P.tree_map_only(int, lambda v: -v, [1, "s", 2.5]) == [-1, "s", 2.5]
    assert P.tree_flatten([1, [2, 3]], is_leaf=lambda x: x == [2, 3])[0] == [1, [2, 3]]
    assert P.tree_all(lambda v: v > 0, [1, 2]) and P.tree_any_only(str, str.isalpha, [1, "s"])
    with pytest.raises(ValueError, match="has length 1"):
        P.tree_unflatten([1], spec)
    with pytest.raises(ValueError):
        P.tree_map(lambda a, b: a, [1, 2], [1])
    batch = {"x": jitgrad.tensor([1.0, 2.0]), "meta": ["id"]}
    out = P.tree_map(lambda t: t * 2 if isinstance(t, jitgrad.Tensor) else t, batch)
    assert out["x"].tolist() == [2.0, 4.0] and out["meta"] == ["id"]


def test_pytree_registered_node():
    from jitgrad.utils import _pytree as P

    class Point:
        def __init__(self, a, b):
            self.a, self.b = a, b

    P.register_pytree_node(Point, lambda p: ([p.a, p.b], None), lambda c, ctx: Point(*c))
    try:
        r = P.tree_map(lambda v: v * 2, Point(1, [2]))
        assert (r.a, r.b) == (2, [4])
        with pytest.raises(ValueError, match="already registered"):
            P.register_pytree_node(Point, None, None)
    finally:
        P.SUPPORTED_NODES.pop(Point)


def test_pytree_specs_print_as_pytorch():
    pytest.importorskip("torch")
    from torch.utils import _pytree as TP

    from jitgrad.utils import _pytree as P

    for tree in (_tree(), (1, [2]), [None, {"a": (1,)}]):
        assert P.tree_flatten(tree)[0] == TP.tree_flatten(tree)[0]
        assert repr(P.tree_structure(tree)) == repr(TP.tree_structure(tree))


# ----------------------------------------------------------------------- hooks, data, config
def test_removable_handle_covers_module_and_tensor_hooks():
    from jitgrad.utils.hooks import RemovableHandle, unserializable_hook, warn_if_has_hooks

    h = jitgrad.nn.Linear(2, 2).register_forward_hook(lambda *a: None)
    x = jitgrad.ones(2, requires_grad=True)
    assert isinstance(h, RemovableHandle) and isinstance(x.register_hook(lambda g: g),
                                                         RemovableHandle)
    assert not isinstance(3, RemovableHandle)
    made = RemovableHandle(collections.OrderedDict())
    made.remove()
    y = x * 2
    y.register_hook(unserializable_hook(lambda g: g))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_has_hooks(x)
        warn_if_has_hooks(y)
    assert len(caught) == 1


def test_distributed_sampler_module():
    from jitgrad.utils.data import DataLoader, TensorDataset
    from jitgrad.utils.data.distributed import DistributedSampler

    ds = TensorDataset(jitgrad.arange(10.0))
    assert list(DistributedSampler(ds, num_replicas=3, rank=0, shuffle=False)) == [0, 3, 6, 9]
    assert list(DistributedSampler(ds, 3, 1, shuffle=False, drop_last=True)) == [1, 4, 7]
    loader = DataLoader(ds, batch_size=2,
                        sampler=DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1.0, 3.0], [5.0, 7.0], [9.0]]


def test_inductor_config():
    cfg = jitgrad._inductor.config
    assert cfg.coordinate_descent_tuning is False and cfg.triton.cudagraphs is False
    cfg.coordinate_descent_tuning = True
    cfg.triton.cudagraphs = True
    try:
        assert cfg.coordinate_descent_tuning and cfg.triton.cudagraphs
        with pytest.raises(AttributeError, match="bogus does not exist"):
            cfg.bogus = 1
        with pytest.raises(AttributeError, match="does not exist"):
            cfg.triton = None
        assert jitgrad.compile(lambda t: t + 1)(jitgrad.ones(1)).item() == 2.0
    finally:
        cfg.coordinate_descent_tuning = False
        cfg.triton.cudagraphs = False


# ----------------------------------------------------------------------- autograd
def test_function_with_a_non_tensor_output():
    class WithInfo(jitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k, k + 1

        @staticmethod
        def backward(ctx, g, _):
            assert _ is None
            return g * ctx.k, None

    x = jitgrad.ones(3, requires_grad=True)
    y, n = WithInfo.apply(x, 3)
    assert n == 4
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_inference_mode_false_enables_grad():
    x = jitgrad.ones(2, requires_grad=True)
    with jitgrad.no_grad():
        with jitgrad.inference_mode(False):
            assert jitgrad.is_grad_enabled() and (x * 2).requires_grad
        assert not jitgrad.is_grad_enabled()
    with jitgrad.inference_mode():
        with jitgrad.inference_mode(False):
            assert jitgrad.is_grad_enabled() and not jitgrad.is_inference_mode_enabled()
        assert not jitgrad.is_grad_enabled() and jitgrad.is_inference_mode_enabled()


# ----------------------------------------------------------------------- ops, schedulers
def test_sum_in_an_integer_dtype():
    assert jitgrad.tensor([1, 2, 3]).sum(dtype=jitgrad.int32).dtype is jitgrad.int32
    r = jitgrad.tensor([1.5, 2.5]).sum(dtype=jitgrad.int16)
    assert r.dtype is jitgrad.int16 and r.item() == 3
    r = jitgrad.tensor([100, 100], dtype=jitgrad.int8).sum(dtype=jitgrad.int8)
    assert r.dtype is jitgrad.int8 and r.item() == -56  # wraps, as PyTorch's
    r = jitgrad.tensor([[1, 2], [3, 4]], dtype=jitgrad.int8).sum(0, dtype=jitgrad.float32)
    assert r.dtype is jitgrad.float32 and r.tolist() == [4.0, 6.0]


SCHEDULERS = [
    lambda LS, o: LS.PolynomialLR(o, total_iters=5, power=2.0, last_epoch=2),
    lambda LS, o: LS.ExponentialLR(o, 0.5, last_epoch=2),
    lambda LS, o: LS.LinearLR(o, 0.5, total_iters=4, last_epoch=2),
    lambda LS, o: LS.MultiplicativeLR(o, lambda e: 0.5, last_epoch=2),
]


def _lrs(lib, make) -> list:
    p = lib.nn.Parameter(lib.zeros(1))
    opt = lib.optim.SGD([{"params": [p], "initial_lr": 0.2}], lr=0.2)
    sched = make(lib.optim.lr_scheduler, opt)
    out = [opt.param_groups[0]["lr"]]
    for _ in range(3):
        opt.step()
        sched.step()
        out.append(opt.param_groups[0]["lr"])
    return out


@pytest.mark.parametrize("make", SCHEDULERS)
def test_scheduler_resumed_with_last_epoch_keeps_the_lr(make):
    assert _lrs(jitgrad, make)[0] == 0.2  # made with last_epoch >= 0: no step yet


@pytest.mark.parametrize("make", SCHEDULERS)
def test_scheduler_resumed_with_last_epoch_matches_pytorch(make):
    torch = pytest.importorskip("torch")
    assert _lrs(jitgrad, make) == pytest.approx(_lrs(torch, make), rel=1e-12)


# ----------------------------------------------------------------------- fifth probe
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix():
    import numpy as np

    for a in ([[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
              [[0.0, 0.0], [0.0, 0.0]]):
        a = np.array(a)
        t = jitgrad.tensor(a, requires_grad=True)
        jitgrad.linalg.det(t).backward()
        eps, num = 1e-6, np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi, lo = a.copy(), a.copy()
            hi[idx] += eps
            lo[idx] -= eps
            num[idx] = (np.linalg.det(hi) - np.linalg.det(lo)) / (2 * eps)
        np.testing.assert_allclose(t.grad.numpy(), num, atol=1e-8)
    batch = jitgrad.tensor(np.stack([np.eye(2) * 2, [[1.0, 2.0], [2.0, 4.0]]]),
                           requires_grad=True)  # one singular matrix in the batch
    jitgrad.det(batch).sum().backward()
    np.testing.assert_allclose(batch.grad.numpy(), [[[2, 0], [0, 2]], [[4, -2], [-2, 1]]],
                               atol=1e-12)


def test_consume_prefix_in_state_dict_if_present():
    import collections

    sd = collections.OrderedDict(
        ("module." + k, v) for k, v in jitgrad.nn.Linear(2, 2).state_dict().items())
    sd._metadata = collections.OrderedDict([("", {}), ("module", {}), ("module.fc", {})])
    jitgrad.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
    assert list(sd) == ["weight", "bias"] and list(sd._metadata) == ["", "fc"]  # (torch's)


def test_compiled_attention_sees_a_later_change_of_the_sdpa_switches():
    bc = jitgrad.backends.cuda
    f = jitgrad.compile(lambda q: F.scaled_dot_product_attention(q, q, q).sum())
    q = jitgrad.randn(1, 2, 3, 4)
    assert f(q).item() == pytest.approx(F.scaled_dot_product_attention(q, q, q).sum().item())
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):  # as eager: no CPU kernel allowed
        with pytest.raises(RuntimeError, match="No viable backend"):
            f(q)
    assert f(q).item() == pytest.approx(F.scaled_dot_product_attention(q, q, q).sum().item())
    assert bc.math_sdp_enabled()
