"""Train an MLP and a small CNN on scikit-learn's bundled digits (8x8 images, no download)
with jitgrad's nn / optim / DataLoader — plain PyTorch code with ``import jitgrad as torch`` —
once eagerly and once with the whole training step compiled by ``jitgrad.compile``.

    python examples/train_digits.py                       # both models, eager and compiled
    python examples/train_digits.py --model cnn --mode compiled --epochs 20

Prints each run's test accuracy, its steady-state training steps per second (epochs 2 on)
and the time of its first epoch (which includes tracing and, on a cold kernel cache,
compiling), the compiled speed-up, and writes a loss-curve PNG when matplotlib is
installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.utils.data import DataLoader, TensorDataset


def load_data(seed: int):
    """Digits as float32 tensors scaled to [0, 1]: (x_train, y_train, x_test, y_test)."""
    # scikit-learn and tqdm are imported where they are used: compile_inspect.py, the
    # benchmarks and the tests import make_step from this file without them
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    y = digits.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return torch.tensor(xtr), torch.tensor(ytr), torch.tensor(xte), torch.tensor(yte)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64),
                         nn.ReLU(), nn.Linear(64, 10))


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 4 x 4
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 64 x 2 x 2
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(256, 10))


def make_step(model: nn.Module, opt: torch.optim.Optimizer,
              loss_fn: Callable = F.cross_entropy) -> Callable:
    """One training step: forward, loss, backward and the optimizer update. Wrapped in
    ``jitgrad.compile`` it becomes one plan of fused kernels (parameters, gradients and the
    optimizer's state are captured; the scheduler's learning rate is read at every call).

    Nothing in it is jitgrad's own: given PyTorch's ``cross_entropy`` as ``loss_fn``, it
    trains a PyTorch model too (the benchmarks time both)."""
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def make_predict(model: nn.Module) -> Callable:
    """Class predictions (``model.eval()`` and ``no_grad`` are the caller's)."""
    def predict(x):
        return model(x).argmax(1)
    return predict


def bars_wanted() -> bool:
    """Progress bars only where someone watches them: tqdm redraws its bar on stderr with a
    carriage return per update, which a terminal overwrites and a log file keeps (``make demo
    > log 2>&1`` grew by a bar per step)."""
    return sys.stderr.isatty()


def train(model: nn.Module, opt: torch.optim.Optimizer, loader: DataLoader, epochs: int,
          step_fn: Callable, scheduler=None) -> tuple[list[float], float, float]:
    """Run ``epochs`` passes of ``step_fn(x, y)`` over ``loader`` (on a terminal a progress
    bar per epoch, otherwise a printed line per epoch; ``scheduler.step()`` after each);
    returns (loss per step, steady-state steps per second, seconds of the first epoch).

    The first epoch is where a compiled step traces (first step, the steady state once the
    optimizer has its state, the short last batch) and compiles its kernels (seconds on a cold
    kernel cache, nothing on a warm one), and where eager mode loads its kernels: steps per
    second are timed over the later epochs (over the first epoch's steps after its first
    when there is only one)."""
    from tqdm import tqdm

    model.train()
    show_bars = bars_wanted()
    losses: list[float] = []
    start, steps, first_epoch_s = None, 0, 0.0
    t0 = time.perf_counter()
    for epoch in range(epochs):
        t_epoch, n_before = time.perf_counter(), len(losses)
        bar = tqdm(loader, desc=f"epoch {epoch + 1:2d}/{epochs}", leave=False, unit="step",
                   disable=not show_bars)
        for x, y in bar:
            loss = step_fn(x, y).item()
            losses.append(loss)
            if start is None:
                start = time.perf_counter()
            elif epochs == 1 or epoch > 0:
                steps += 1
            bar.set_postfix(loss=f"{loss:.3f}")
        if not show_bars:
            epoch_losses = losses[n_before:]
            print(f"  epoch {epoch + 1:2d}/{epochs}: mean loss "
                  f"{sum(epoch_losses) / max(1, len(epoch_losses)):.4f} over "
                  f"{len(epoch_losses)} steps, {time.perf_counter() - t_epoch:.2f} s", flush=True)
        if scheduler is not None:
            scheduler.step()
        if epoch == 0:
            first_epoch_s = time.perf_counter() - t0
            if epochs > 1:
                start = time.perf_counter()
    elapsed = time.perf_counter() - start if start is not None else 0.0
    return losses, steps / elapsed if elapsed > 0 else float("nan"), first_epoch_s


@torch.no_grad()
def accuracy(model: nn.Module, predict: Callable, x, y) -> float:
    model.eval()
    return (predict(x) == y).float().mean().item()


def plot(curves: dict, path: str, title: str = "digits: training loss") -> None:
    """Each run's loss per step (faint) and its moving average over 25 steps, on a log
    scale, as a PNG at ``path`` (a line says so; skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no loss curve)")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, losses in curves.items():
        line, = ax.plot(losses, linewidth=0.6, alpha=0.35)
        k = min(25, len(losses))  # moving average over k steps
        smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k - 1, len(losses)), smooth, color=line.get_color(), label=name)
    ax.set(xlabel="step", ylabel="cross-entropy", yscale="log", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"loss curve written to {path}")


#: name -> (builder, learning rate, epochs)
MODELS = {"mlp": (mlp, 3e-3, 20), "cnn": (cnn, 3e-3, 20)}


def run(name: str, compiled: bool, data, epochs: int | None, batch_size: int, seed: int) -> dict:
    """Train one model from a fixed seed; returns accuracy, steps/s, losses and, compiled,
    the step function's trace counts."""
    xtr, ytr, xte, yte = data
    build, lr, default_epochs = MODELS[name]
    torch.manual_seed(seed)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    n_epochs = epochs or default_epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=n_epochs)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    step, predict = make_step(model, opt), make_predict(model)
    if compiled:
        step, predict = torch.compile(step), torch.compile(predict)
    losses, steps_per_s, first_epoch_s = train(model, opt, loader, n_epochs, step, sched)
    acc = accuracy(model, predict, xte, yte)
    out = {"accuracy": acc, "steps_per_s": steps_per_s, "losses": losses, "epochs": n_epochs,
           "first_epoch_s": first_epoch_s}
    if compiled:
        out["traces"] = step.stats["traces"]
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=[*MODELS, "both"], default="both")
    p.add_argument("--mode", choices=["eager", "compiled", "both"], default="both")
    p.add_argument("--epochs", type=int, default=None, help="default: 20")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=os.path.join(tempfile.gettempdir(), "digits_loss.png"),
                   help="loss-curve PNG ('' for none)")
    args = p.parse_args(argv)

    data = load_data(args.seed)
    names = list(MODELS) if args.model == "both" else [args.model]
    modes = ["eager", "compiled"] if args.mode == "both" else [args.mode]
    results: dict = {}
    curves = {}
    for name in names:
        for mode in modes:
            r = run(name, mode == "compiled", data, args.epochs, args.batch_size, args.seed)
            results[(name, mode)] = r
            curves[f"{name} {mode}"] = r["losses"]
            extra = f", {r['traces']} traces" if "traces" in r else ""
            print(f"{name.upper():4s} {mode:8s}: test accuracy {r['accuracy']:.4f} after "
                  f"{r['epochs']} epochs, {r['steps_per_s']:7.1f} steps/s "
                  f"(batch {args.batch_size}{extra}; first epoch {r['first_epoch_s']:.2f} s)")
        if len(modes) == 2:
            e, c = results[(name, "eager")], results[(name, "compiled")]
            print(f"{name.upper():4s} compiled speed-up (steady state): "
                  f"{c['steps_per_s'] / e['steps_per_s']:.2f}x")
    if args.plot:
        plot(curves, args.plot)
    return results


if __name__ == "__main__":
    main()
