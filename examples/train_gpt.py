"""Train a small character-level GPT (nanoGPT's architecture) on text every Python install
ships (its LICENSE), eagerly and with the whole training step compiled by ``jitgrad.compile``,
then sample from it. The code is PyTorch code with ``import jitgrad as torch``.

    python examples/train_gpt.py                        # tiny model, eager then compiled
    python examples/train_gpt.py --mode compiled --n-layer 4 --n-embd 128 --block-size 64 \\
        --max-iters 2000 --dropout 0.1

The model: token + position embeddings, ``n_layer`` pre-norm blocks of causal self-attention
(the explicit "slow attention" path: ``q @ k^T``, a lower-triangular mask applied with
``masked_fill``, softmax; ``F.scaled_dot_product_attention`` once it exists, as nanoGPT
switches) and a GELU MLP, LayerNorm with optional bias, the language-model head tied to the
token embedding. Training: AdamW with weight decay on the matrices only (two parameter
groups), warm-up then cosine learning rate, gradient clipping, ``torch.multinomial``
sampling. Prints the loss at each evaluation, the two runs' speed and final losses (equal to ~1e-7
relative: the compiled AdamW update rounds differently from eager's, see
docs/architecture.md), a sample, and writes a loss-curve PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import dataclass

import jitgrad as torch
import jitgrad.nn as nn
from jitgrad.nn import functional as F

# ----------------------------------------------------------------------------------- data


#: standard-library modules whose docstrings make the text where LICENSE.txt is missing
FALLBACK_MODULES = ("argparse", "collections", "dataclasses", "functools", "json", "re",
                    "string", "textwrap", "typing", "unittest")


def load_text(path: str | None = None) -> str:
    """Python's LICENSE text from this interpreter's standard library folder (~14 kB on
    CPython installs; ``path`` names another file), or, where a distribution left it out,
    the docstrings of ``FALLBACK_MODULES``: text every machine with Python has, no
    download."""
    path = os.path.join(os.path.dirname(os.__file__), "LICENSE.txt") if path is None else path
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return "\n".join(importlib.import_module(m).__doc__ or "" for m in FALLBACK_MODULES)


class CharData:
    """A text as integer tensors (one id per distinct character, sorted), split 90/10 into
    training and validation data, and nanoGPT's ``get_batch``: ``batch_size`` random windows
    of ``block_size`` characters and the same windows shifted by one (the targets)."""

    def __init__(self, text: str, block_size: int, batch_size: int, seed: int):
        chars = sorted(set(text))
        self.vocab_size = len(chars)
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = dict(enumerate(chars))
        data = torch.tensor(self.encode(text), dtype=torch.long)
        n = int(0.9 * len(data))
        self.train_data, self.val_data = data[:n], data[n:]
        self.block_size, self.batch_size = block_size, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def encode(self, s: str) -> list[int]:
        return [self.stoi[c] for c in s]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.itos[i] for i in ids)

    def get_batch(self, split: str):
        data = self.train_data if split == "train" else self.val_data
        ix = torch.randint(len(data) - self.block_size, (self.batch_size,),
                           generator=self.generator)
        x = torch.stack([data[i:i + self.block_size] for i in ix.tolist()])
        y = torch.stack([data[i + 1:i + 1 + self.block_size] for i in ix.tolist()])
        return x, y


# ---------------------------------------------------------------------------------- model


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 96
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True  # bias in the Linears and LayerNorms, as GPT-2


class LayerNorm(nn.Module):
    """LayerNorm whose bias is optional (``bias=False``)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions <= t only."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # query, key and value projections of all heads in one matrix, then the output one
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # the fused kernel where the library has it (PyTorch >= 2.0), else the explicit path
        self.flash = hasattr(F, "scaled_dot_product_attention")
        # the causal mask of the explicit path (a buffer, not saved in the state dict)
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.size()  # batch, sequence length, embedding width
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        # (B, T, C) -> (B, nh, T, hs): the heads become a batch dimension
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying: the token embedding is the output projection (one parameter)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        # GPT-2's scaled initialisation of the projections into the residual stream
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding: bool = True) -> int:
        """Parameters (the tied embedding counted once), without the position embedding by
        default."""
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, \
            f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # (t,)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:
            # generation reads the last position only (the list keeps the time dim)
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float,
                             betas: tuple[float, float], device_type: str):
        """AdamW with two parameter groups: every matrix (Linear weights, embeddings) decays,
        biases and LayerNorm weights do not."""
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0,
                 generator=None):
        """Extend ``idx`` (b, t) by ``max_new_tokens`` tokens, each drawn from the softmax of
        the last position's logits / ``temperature`` (``torch.multinomial``)."""
        for _ in range(max_new_tokens):
            bs = self.config.block_size
            idx_cond = idx if idx.size(1) <= bs else idx[:, -bs:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# ------------------------------------------------------------------------------- training


def get_lr(it: int, learning_rate: float, warmup_iters: int, lr_decay_iters: int,
           min_lr: float) -> float:
    """Linear warm-up for ``warmup_iters``, cosine decay to ``min_lr`` at
    ``lr_decay_iters``, ``min_lr`` after."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def make_step(model: nn.Module, optimizer, grad_clip: float) -> Callable:
    """One training step: forward and loss, backward, gradient clipping, AdamW update.
    ``torch.compile(make_step(...))`` compiles all of it into one plan."""
    def step(X, Y):
        _, loss = model(X, Y)
        loss.backward()
        if grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss
    return step


@torch.no_grad()
def estimate_loss(model: nn.Module, data: CharData, eval_iters: int) -> dict:
    """Mean loss over ``eval_iters`` batches of each split (model in eval mode meanwhile)."""
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = data.get_batch(split)
            _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


def progress(total: int, desc: str):
    """A tqdm bar when stderr is a terminal; None otherwise (the caller prints lines)."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="it", leave=False)


def train(args: argparse.Namespace, compiled: bool) -> dict:
    """Train one GPT from ``args.seed``: eagerly, or with ``torch.compile`` of the step.
    Returns the per-step training losses, the evaluations, the training steps per second
    (steps 3 on, evaluations not counted), the model and the data."""
    torch.manual_seed(args.seed)
    data = CharData(load_text(), args.block_size, args.batch_size, args.seed)
    config = GPTConfig(block_size=args.block_size, vocab_size=data.vocab_size,
                       n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                       dropout=args.dropout, bias=not args.no_bias)
    model = GPT(config)
    optimizer = model.configure_optimizers(args.weight_decay, args.learning_rate,
                                           (args.beta1, args.beta2), "cpu")
    step = make_step(model, optimizer, args.grad_clip)
    if compiled:
        step = torch.compile(step)
    name = "compiled" if compiled else "eager"
    bar = progress(args.max_iters, f"{name:8s}")
    losses, evals = [], []
    step_s, timed = 0.0, 0  # seconds in steps 3 on (past tracing and warm-up), their count
    for it in range(args.max_iters):
        lr = get_lr(it, args.learning_rate, args.warmup_iters, args.max_iters, args.min_lr)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if args.eval_interval and (it % args.eval_interval == 0 or it == args.max_iters - 1):
            ev = estimate_loss(model, data, args.eval_iters)
            evals.append((it, ev["train"], ev["val"]))
            msg = f"{name:8s} step {it:5d}: train loss {ev['train']:.4f}, val {ev['val']:.4f}"
            print(msg, flush=True) if bar is None else bar.write(msg)
        X, Y = data.get_batch("train")
        t0 = time.perf_counter()
        loss = step(X, Y).item()
        if it >= min(3, args.max_iters - 1):
            step_s, timed = step_s + time.perf_counter() - t0, timed + 1
        losses.append(loss)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.1e}")
    if bar is not None:
        bar.close()
    return {"losses": losses, "evals": evals, "its_per_s": timed / step_s, "model": model,
            "data": data, "step": step, "num_params": model.get_num_params()}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compiled", "both"], default="both")
    p.add_argument("--max-iters", type=int, default=150)
    p.add_argument("--eval-interval", type=int, default=50, help="0: no evaluations")
    p.add_argument("--eval-iters", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--no-bias", action="store_true", help="no bias in Linears and LayerNorms")
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--min-lr", type=float, default=3e-4)
    p.add_argument("--warmup-iters", type=int, default=10)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    p.add_argument("--sample-tokens", type=int, default=200, help="0: no sample")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--plot", default=os.path.join(tempfile.gettempdir(), "gpt_loss.png"),
                   help="loss-curve PNG ('' for none)")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    modes = ["eager", "compiled"] if args.mode == "both" else [args.mode]
    results = {}
    for mode in modes:
        r = train(args, mode == "compiled")
        results[mode] = r
        extra = f", {r['step'].stats['traces']} traces" if mode == "compiled" else ""
        print(f"{mode:8s}: {r['num_params'] / 1e6:.2f}M parameters, final training loss "
              f"{r['losses'][-1]:.4f} (first {r['losses'][0]:.4f}), "
              f"{r['its_per_s']:.1f} it/s{extra}", flush=True)
    if len(modes) == 2:
        e, c = results["eager"], results["compiled"]
        rel = max(abs(a - b) / abs(a) for a, b in zip(e["losses"], c["losses"]))
        # not bit for bit: a compiled AdamW step takes PyTorch's capturable update
        agree = "identical" if rel == 0 else f"equal to {rel:.1e} relative"
        print(f"eager vs compiled: losses {agree} over {len(e['losses'])} steps; compiled "
              f"step speed-up {c['its_per_s'] / e['its_per_s']:.2f}x")
    last = results[modes[-1]]
    if args.sample_tokens:
        model, data = last["model"], last["data"]
        model.eval()
        start = torch.tensor([data.encode("\n")], dtype=torch.long)
        g = torch.Generator().manual_seed(args.seed)
        out = model.generate(start, args.sample_tokens, temperature=args.temperature,
                             generator=g)
        print("sample:\n" + data.decode(out[0].tolist()))
    if args.plot:
        from train_digits import plot  # the demo's loss-curve plot (examples/)

        plot({m: r["losses"] for m, r in results.items()}, args.plot,
             title="char-level GPT: training loss")
    return results


# ----------------------------------------------------------------------- the PyTorch twin
_TORCH_IMPORTS = (("import jitgrad as torch\n", "import torch\n"),
                  ("import jitgrad.nn as nn\n", "import torch.nn as nn\n"),
                  ("from jitgrad.nn import functional as F\n",
                   "from torch.nn import functional as F\n"))


def pytorch_twin() -> types.ModuleType:
    """This file run over real PyTorch: its source with ``import torch`` in place of
    ``import jitgrad as torch`` (and the ``nn``/``F`` imports likewise), as the module
    ``train_gpt_torch``. Nothing else changes, so the benchmark and the conformance tests
    compare the two libraries on the same model code, weights and data."""
    name = "train_gpt_torch"
    if name in sys.modules:
        return sys.modules[name]
    with open(__file__, encoding="utf-8") as f:
        src = f.read()
    for ours, theirs in _TORCH_IMPORTS:
        assert src.count(ours) == 1, ours
        src = src.replace(ours, theirs)
    mod = types.ModuleType(name)
    mod.__file__ = __file__
    sys.modules[name] = mod  # dataclasses look their module up there
    try:
        exec(compile(src, __file__, "exec"), mod.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


if __name__ == "__main__":
    main()
