"""Training-step workloads shared by the asv suite (``bench_training.py``) and the peer report
(``compare.py``): one full step (forward, loss, backward, update) of

* the MLP of the peers' W3: float32 784-256-256-10, ReLU, softmax cross-entropy (mean), plain
  SGD lr=0.01, the same batch every step, weights as ``shared/peers-bench/w3_mlp.py`` draws
  them (so the first-step losses of every implementation agree);
* the small CNN of ``examples/train_digits.py`` (two 3x3 conv + ReLU + 2x2 max-pool blocks,
  a linear head) on 1x8x8 images, SGD with momentum;
* the character-level GPT of ``examples/train_gpt.py`` and its step (cross-entropy,
  ``clip_grad_norm_``, AdamW with decay / no-decay groups), PyTorch running the same file
  through ``train_gpt.pytorch_twin()`` on the same initial weights.

Every ``*_step`` builder returns ``step() -> loss`` (a scalar of its library); the state of
each implementation advances with every call, as in training. The jitgrad and PyTorch steps
are the demo's own (``make_step`` of ``examples/train_digits.py``).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                             "examples"))
from train_digits import make_step  # noqa: E402

MLP_SIZES = (784, 256, 256, 10)
LR = 0.01


def mlp_flops(batch: int) -> float:
    """GEMM FLOPs of one MLP step (bias, ReLU, softmax and the update are O(B*H))."""
    d0, d1, d2, d3 = MLP_SIZES
    fwd = 2 * batch * (d0 * d1 + d1 * d2 + d2 * d3)
    return 2 * fwd + 2 * batch * (d1 * d2 + d2 * d3)  # backward: dW as forward, dX but layer 1


def mlp_data(batch: int):
    """``x, y, [W1, b1, W2, b2, W3, b3]`` with W as (fan_in, fan_out), He-scaled."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, MLP_SIZES[0])).astype(np.float32)
    y = rng.integers(0, MLP_SIZES[-1], size=batch).astype(np.int64)
    params = []
    for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        w = (rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        params += [w, np.zeros(fan_out, dtype=np.float32)]
    return x, y, params


def mlp_loss0(batch: int) -> float:
    """The first step's loss in float64 (the reference every implementation is checked on)."""
    x, y, params = mlp_data(batch)
    a = x.astype(np.float64)
    for i in range(3):
        a = a @ params[2 * i].astype(np.float64) + params[2 * i + 1]
        if i < 2:
            a = np.maximum(a, 0)
    a = a - a.max(axis=1, keepdims=True)
    logp = a - np.log(np.exp(a).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(batch), y].mean())


def numpy_mlp_step(batch: int):
    """Hand-written NumPy forward/backward/update (the peers' W3 code)."""
    x, y, params = mlp_data(batch)
    w1, b1, w2, b2, w3, b3 = params
    rows = np.arange(batch)

    def step():
        h1 = x @ w1
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2
        h2 += b2
        a2 = np.maximum(h2, 0)
        logits = a2 @ w3
        logits += b3
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.log(p[rows, y]).mean()
        d = p
        d[rows, y] -= 1
        d /= batch
        dw3, db3 = a2.T @ d, d.sum(axis=0)
        da2 = d @ w3.T
        da2 *= h2 > 0
        dw2, db2 = a1.T @ da2, da2.sum(axis=0)
        da1 = da2 @ w2.T
        da1 *= h1 > 0
        dw1, db1 = x.T @ da1, da1.sum(axis=0)
        for p_, g in ((w1, dw1), (b1, db1), (w2, dw2), (b2, db2), (w3, dw3), (b3, db3)):
            p_ -= LR * g
        return float(loss)
    return step


def _mlp(nn):
    """784-256-256-10 with ReLU, in ``nn`` (``jitgrad.nn`` or ``torch.nn``)."""
    d0, d1, d2, d3 = MLP_SIZES
    return nn.Sequential(nn.Linear(d0, d1), nn.ReLU(), nn.Linear(d1, d2), nn.ReLU(),
                         nn.Linear(d2, d3))


def _copy_linears(model, params, tensor_from_numpy) -> None:
    """``mlp_data``'s weights into the model's layers that have weights (its Linears)."""
    linears = [m for m in model if hasattr(m, "weight")]
    for i, lin in enumerate(linears):
        lin.weight.data.copy_(tensor_from_numpy(np.ascontiguousarray(params[2 * i].T)))
        lin.bias.data.copy_(tensor_from_numpy(params[2 * i + 1].copy()))


def _sgd_step(lib, model, lr: float, compiled: bool, **sgd):
    """The demo's step (forward, cross-entropy, backward, update) of ``model`` with
    ``lib.optim.SGD(lr, **sgd)``; with ``compiled``, the whole step under ``lib.compile``.
    ``lib`` is ``jitgrad`` or ``torch``."""
    opt = lib.optim.SGD(model.parameters(), lr=lr, **sgd)
    step = make_step(model, opt, lib.nn.functional.cross_entropy)
    return lib.compile(step) if compiled else step


def jitgrad_mlp_step(jg, batch: int, compiled: bool):
    """``nn.Sequential`` + ``F.cross_entropy`` + ``optim.SGD`` — compiled: the whole step
    under ``jitgrad.compile`` (traced by the first call, made here)."""
    import jitgrad.nn as nn

    x, y, params = mlp_data(batch)
    model = _mlp(nn)
    _copy_linears(model, params, jg.from_numpy)
    step = _sgd_step(jg, model, LR, compiled)
    xt, yt = jg.from_numpy(x), jg.from_numpy(y)
    return (lambda: step(xt, yt)), step


def jitgrad_mlp_module_step(jg, batch: int):
    """The same step with the model compiled and the rest eager, as torch.compile users
    write it: ``cm = jitgrad.compile(model)``, then ``F.cross_entropy(cm(x), y)``,
    ``loss.backward()`` and ``opt.step()`` outside (the demo's ``make_step`` over ``cm``)."""
    import jitgrad.nn as nn

    x, y, params = mlp_data(batch)
    model = _mlp(nn)
    _copy_linears(model, params, jg.from_numpy)
    opt = jg.optim.SGD(model.parameters(), lr=LR)
    step = make_step(jg.compile(model), opt, jg.nn.functional.cross_entropy)
    xt, yt = jg.from_numpy(x), jg.from_numpy(y)
    return lambda: step(xt, yt)


def torch_mlp_step(torch, batch: int, compiled: bool = False):
    """PyTorch eager (or ``torch.compile`` of the whole step): the same model and update."""
    from torch import nn

    x, y, params = mlp_data(batch)
    model = _mlp(nn)
    with torch.no_grad():
        _copy_linears(model, params, torch.from_numpy)
    step = _sgd_step(torch, model, LR, compiled)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: step(xt, yt).detach()


def jax_mlp_step(jax, batch: int):
    """``jax.jit`` of value_and_grad + the SGD update, parameters donated."""
    jnp = jax.numpy
    x, y, params = mlp_data(batch)

    def loss_fn(p, xb, yb):
        w1, b1, w2, b2, w3, b3 = p
        a1 = jax.nn.relu(xb @ w1 + b1)
        a2 = jax.nn.relu(a1 @ w2 + b2)
        logp = jax.nn.log_softmax(a2 @ w3 + b3)
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1))

    def train_step(p, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(p, xb, yb)
        return [pi - LR * gi for pi, gi in zip(p, g)], loss

    jstep = jax.jit(train_step, donate_argnums=0)
    state = {"p": [jnp.asarray(a) for a in params]}
    xj, yj = jnp.asarray(x), jnp.asarray(y.astype(np.int32))

    def step():
        state["p"], loss = jstep(state["p"], xj, yj)
        jax.block_until_ready((state["p"], loss))
        return loss
    return step


# ------------------------------------------------------------------------------------- CNN
CNN_LR = 0.05


def cnn_data(batch: int):
    rng = np.random.default_rng(1)
    x = rng.random((batch, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, size=batch).astype(np.int64)
    return x, y


def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(256, 10))


def jitgrad_cnn_step(jg, batch: int, compiled: bool):
    """The demo's CNN (without dropout, for a deterministic step), SGD with momentum."""
    import jitgrad.nn as nn

    x, y = cnn_data(batch)
    jg.manual_seed(0)
    model = _cnn(nn)
    step = _sgd_step(jg, model, CNN_LR, compiled, momentum=0.9)
    xt, yt = jg.from_numpy(x), jg.from_numpy(y)
    return (lambda: step(xt, yt)), step


def torch_cnn_step(torch, batch: int, jg_model_state: dict | None = None):
    """PyTorch eager, same architecture (weights from ``jg_model_state`` when given)."""
    from torch import nn

    x, y = cnn_data(batch)
    model = _cnn(nn)
    if jg_model_state is not None:
        model.load_state_dict({k: torch.from_numpy(np.array(v, copy=True))
                               for k, v in jg_model_state.items()})
    step = _sgd_step(torch, model, CNN_LR, False, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: step(xt, yt).detach()


def jitgrad_cnn_initial_state(jg) -> dict:
    """The CNN's initial weights under ``manual_seed(0)`` as NumPy arrays (to give PyTorch
    the same start)."""
    import jitgrad.nn as nn

    jg.manual_seed(0)
    return {k: v.numpy().copy() for k, v in _cnn(nn).state_dict().items()}


# ------------------------------------------------------------------------------------- GPT
#: name -> (batch, block_size, n_layer, n_head, n_embd): one layer for smoke runs ("nano"),
#: the example's default ("tiny") and a model 4x its width x depth, over twice the tokens
GPT_CONFIGS = {"nano": (8, 16, 1, 2, 32), "tiny": (16, 32, 2, 4, 64),
               "small": (32, 64, 4, 4, 128)}
GPT_VOCAB = 65
GPT_LR, GPT_WEIGHT_DECAY, GPT_BETAS, GPT_CLIP = 1e-3, 0.1, (0.9, 0.99), 1.0


def _gpt_module(torch):
    """``examples/train_gpt.py`` over ``torch`` (jitgrad, or PyTorch through its twin)."""
    import train_gpt

    return train_gpt if torch.__name__ == "jitgrad" else train_gpt.pytorch_twin()


def gpt_data(config: str):
    """One batch of token ids and its targets, (batch, block_size) int64."""
    batch, block, *_ = GPT_CONFIGS[config]
    rng = np.random.default_rng(2)
    ids = rng.integers(0, GPT_VOCAB, size=(batch, block + 1)).astype(np.int64)
    return ids[:, :-1].copy(), ids[:, 1:].copy()


def gpt_initial_state(config: str) -> dict:
    """The jitgrad GPT's initial weights under ``manual_seed(0)`` as NumPy arrays (the tied
    embedding under both its names, as ``state_dict`` gives it)."""
    import jitgrad

    jitgrad.manual_seed(0)
    model = _gpt_model(jitgrad, config)
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _gpt_model(torch, config: str):
    _, block, n_layer, n_head, n_embd = GPT_CONFIGS[config]
    mod = _gpt_module(torch)
    return mod.GPT(mod.GPTConfig(block_size=block, vocab_size=GPT_VOCAB, n_layer=n_layer,
                                 n_head=n_head, n_embd=n_embd, dropout=0.0, bias=True))


def gpt_step(torch, config: str, mode: str, state: dict | None = None):
    """The example's training step (forward, cross-entropy, backward, ``clip_grad_norm_``,
    AdamW with its two parameter groups) of ``torch`` (``jitgrad`` or ``torch``) on the
    weights ``state`` (default: ``gpt_initial_state``); ``mode`` "eager" or "compiled"
    (``torch.compile`` of the whole step). Returns ``step() -> loss``."""
    state = gpt_initial_state(config) if state is None else state
    model = _gpt_model(torch, config)
    with torch.no_grad():
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = model.configure_optimizers(GPT_WEIGHT_DECAY, GPT_LR, GPT_BETAS, "cpu")
    step = _gpt_module(torch).make_step(model, opt, GPT_CLIP)
    if mode == "compiled":
        step = torch.compile(step)
    x, y = (torch.from_numpy(a) for a in gpt_data(config))
    return lambda: step(x, y).detach()


def optimizer_step(lib, name: str, **options):
    """``step() -> first parameter`` of ``lib.optim.<name>(**options)`` over the MLP's
    parameters (``mlp_data``'s weights in the Linear layout) with fixed gradients: the
    optimizer's update alone, as an eager training loop or a compiled model's loop calls
    ``opt.step()``. ``lib`` is ``jitgrad`` or ``torch``."""
    _, _, params = mlp_data(128)
    rng = np.random.default_rng(1)
    tensors = []
    for a in params:
        a = np.ascontiguousarray(a.T) if a.ndim == 2 else a.copy()
        p = lib.from_numpy(a)
        p.requires_grad_(True)
        p.grad = lib.from_numpy((rng.standard_normal(a.shape) * 0.01).astype(np.float32))
        tensors.append(p)
    opt = getattr(lib.optim, name)(tensors, **options)

    def step():
        opt.step()
        return tensors[0]
    return step


# ------------------------------------------------------------- per-sample gradients
def per_sample_grads(lib, batch: int, mode: str):
    """torch.func's per-sample-gradient recipe on the MLP: ``vmap(grad(loss), in_dims=(None,
    0, 0))(params, x, y)``, each element's loss that of a batch of one. ``lib`` is jitgrad
    or torch; ``mode`` "vmap" (jitgrad: one trace, a batched replay), "compiled" (the vmap
    under ``lib.compile``), "loop" (jitgrad's per-element loop, ``JITGRAD_VMAP=loop``) or
    "for" (a Python loop of ``grad`` calls, what a user writes without vmap). Returns
    ``run() -> tuple of per-sample gradients``."""
    x, y, params = mlp_data(batch)
    xt, yt = lib.from_numpy(x), lib.from_numpy(y)
    ps = tuple(lib.from_numpy(np.ascontiguousarray(p.T) if p.ndim == 2 else p.copy())
               for p in params)
    F = lib.nn.functional
    func = lib.func

    def loss(ps, xi, yi):
        w1, b1, w2, b2, w3, b3 = ps
        h = F.relu(F.linear(xi.unsqueeze(0), w1, b1))
        h = F.relu(F.linear(h, w2, b2))
        return F.cross_entropy(F.linear(h, w3, b3), yi.unsqueeze(0))

    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
    if mode == "for":
        g = func.grad(loss)

        def run():
            grads = [g(ps, xt[i], yt[i]) for i in range(batch)]
            return tuple(lib.stack([gs[k] for gs in grads]) for k in range(len(ps)))
        return run
    if mode == "loop":
        def run():
            os.environ["JITGRAD_VMAP"] = "loop"
            try:
                return per_sample(ps, xt, yt)
            finally:
                del os.environ["JITGRAD_VMAP"]
        return run
    if mode == "compiled":
        compiled = lib.compile(per_sample)
        return lambda: compiled(ps, xt, yt)
    return lambda: per_sample(ps, xt, yt)
