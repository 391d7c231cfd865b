"""L-BFGS (``torch.optim.LBFGS``): limited-memory BFGS on the parameters flattened into one
vector, with a fixed step (``lr``) or a strong-Wolfe line search (cubic interpolation,
bracketing then zooming, as minFunc's and PyTorch's); driven by a closure that re-evaluates
the loss. The vectors are jitgrad tensors, so the parameters may live on any device."""

from __future__ import annotations

import math
from collections.abc import Callable

from .. import creation
from ..autograd.grad_mode import enable_grad, no_grad
from ..ops.concat import cat
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                  bounds: tuple[float, float] | None = None) -> float:
    """The minimiser of the cubic through ``(x1, f1)`` and ``(x2, f2)`` with slopes ``g1``,
    ``g2``, clipped to ``bounds`` (default: the two points); their middle when the cubic
    has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def strong_wolfe(evaluate: Callable, t: float, d: Tensor, f: float, g: Tensor, gtd: float,
                 c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_ls: int = 25) -> tuple[float, Tensor, float, int]:
    """A step ``t`` along ``d`` satisfying the strong Wolfe conditions (sufficient decrease
    ``c1``, curvature ``c2``), starting from ``t``; ``evaluate(t)`` gives the loss and flat
    gradient there. Returns ``(loss, gradient, t, evaluations)``."""
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals, ls_iter = 1, 0
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    # bracketing: grow t until an interval holds a point meeting the conditions
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            pts = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            pts = [[t, f_new, g_new, gtd_new]]
            done = True
            break
        if gtd_new >= 0:
            pts = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        step = cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                             bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = step
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
    if ls_iter == max_ls:
        pts = [[0.0, f, g, None], [t, f_new, g_new, None]]
    # zoom: shrink the interval around a point meeting the conditions
    low, high = (0, 1) if pts[0][1] <= pts[-1][1] else (1, 0)
    insufficient = False
    while not done and ls_iter < max_ls:
        if abs(pts[1][0] - pts[0][0]) * d_norm < tolerance_change:
            break
        t = cubic_minimum(pts[0][0], pts[0][1], pts[0][3], pts[1][0], pts[1][1], pts[1][3])
        top, bottom = max(pts[0][0], pts[1][0]), min(pts[0][0], pts[1][0])
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move inside
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= pts[low][1]:
            pts[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if pts[0][1] <= pts[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (pts[high][0] - pts[low][0]) >= 0:
                pts[high] = list(pts[low])
            pts[low] = [t, f_new, g_new, gtd_new]
    t, f_new, g_new, _ = pts[low] if len(pts) > 1 else pts[0]
    return f_new, g_new, t, evals


class LBFGS(Optimizer):
    """L-BFGS (PyTorch's ``torch.optim.LBFGS``): every :meth:`step` runs up to ``max_iter``
    iterations (``max_eval`` loss evaluations) of limited-memory BFGS with ``history_size``
    correction pairs, stopping when the gradient's largest entry is at most
    ``tolerance_grad`` or the step or loss change is below ``tolerance_change``; the step
    length is ``lr`` (the first: ``lr * min(1, 1 / |g|_1)``) or, with
    ``line_search_fn="strong_wolfe"``, found by a line search. One parameter group only.

    >>> import jitgrad
    >>> x = jitgrad.tensor([1.5, -0.5], dtype=jitgrad.float64, requires_grad=True)
    >>> opt = jitgrad.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((x - 2.0) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 6) for v in x.tolist()]
    [2.0, 2.0]
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad,
                                  "tolerance_change": tolerance_change,
                                  "history_size": history_size,
                                  "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ------------------------------------------------------------- flat-vector helpers
    def _flat_grad(self) -> Tensor:
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(creation.zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                parts.append(p.grad.reshape(-1))
        return cat(parts, 0)

    def _move(self, t: float, d: Tensor) -> None:
        """Every parameter += ``t`` times its part of ``d``."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=t)
            offset += n

    def _evaluate(self, closure: Callable, x0: list, t: float, d: Tensor):
        """The loss and flat gradient at ``x0 + t d`` (the parameters are put back)."""
        self._move(t, d)
        with enable_grad():
            loss = float(closure())
        g = self._flat_grad()
        for p, x in zip(self._params, x0):
            p.copy_(x)
        return loss, g

    # ----------------------------------------------------------------------------- step
    @no_grad()
    def step(self, closure: Callable[[], Tensor]):
        """Run up to ``max_iter`` L-BFGS iterations; ``closure`` clears the gradients,
        computes the loss, backpropagates and returns it. Returns its first loss."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history, line_search = group["history_size"], group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if float(g.abs().max()) <= tol_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        dirs, steps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, g_prev, loss_prev = state.get("H_diag"), state.get("prev_flat_grad"), \
            state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -g
                dirs, steps, ro = [], [], []
                h_diag = 1.0
            else:
                y = g - g_prev
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:  # keep the pair only where the curvature is positive
                    if len(dirs) == history:
                        dirs.pop(0)
                        steps.pop(0)
                        ro.pop(0)
                    dirs.append(y)
                    steps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y.dot(y))
                # two-loop recursion: d = -H g
                # (PyTorch keeps the two-loop coefficients in state["al"], history_size long)
                alpha = state.get("al")
                if alpha is None or len(alpha) < len(dirs):
                    alpha = state["al"] = [None] * max(history, len(dirs))
                q = -g
                for i in range(len(dirs) - 1, -1, -1):
                    alpha[i] = float(steps[i].dot(q)) * ro[i]
                    q = q - dirs[i] * alpha[i]
                r = q * h_diag
                for i in range(len(dirs)):
                    beta = float(dirs[i].dot(r)) * ro[i]
                    r = r + steps[i] * (alpha[i] - beta)
                d = r
            g_prev = g.clone()
            loss_prev = loss
            t = min(1.0, 1.0 / float(g.abs().sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(g.dot(d))
            if gtd > -tol_change:  # not a descent direction
                break
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = [p.clone() for p in self._params]
                loss, g, t, ls_evals = strong_wolfe(
                    lambda step, x0=x0, d=d: self._evaluate(closure, x0, step, d), t, d, loss,
                    g, gtd)
                self._move(t, d)
            else:
                self._move(t, d)
                ls_evals = 0
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    g = self._flat_grad()
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval:
                break
            if float(g.abs().max()) <= tol_grad:
                break
            if float((d * t).abs().max()) <= tol_change:
                break
            if abs(loss - loss_prev) < tol_change:
                break

        state.update({"d": d, "t": t, "old_dirs": dirs, "old_stps": steps, "ro": ro,
                      "H_diag": h_diag, "prev_flat_grad": g_prev, "prev_loss": loss_prev})
        return orig_loss
