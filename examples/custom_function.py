"""A custom autograd Function used inside an nn.Module, trained with an optimizer.

``Swish`` (``x * sigmoid(beta * x)``) gets a hand-written backward; ``gradcheck`` confirms it
against finite differences, then a small regression model that uses it is trained with Adam.

Run: ``python examples/custom_function.py``.
"""

import jitgrad as torch
import jitgrad.nn as nn
from jitgrad.autograd import Function, gradcheck


class SwishFn(Function):
    @staticmethod
    def forward(ctx, x, beta):
        s = torch.sigmoid(beta * x)
        ctx.save_for_backward(x, s)
        ctx.beta = beta
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        # d/dx [x s(bx)] = s + b x s (1 - s)
        return grad * (s + ctx.beta * x * s * (1 - s)), None


class Swish(nn.Module):
    def __init__(self, beta: float = 1.0):
        super().__init__()
        self.beta = beta

    def forward(self, x):
        return SwishFn.apply(x, self.beta)

    def extra_repr(self):
        return f"beta={self.beta}"


x = torch.randn(5, dtype=torch.float64, requires_grad=True)
print("gradcheck(SwishFn):", gradcheck(lambda t: SwishFn.apply(t, 1.5), (x,)))

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1, 32), Swish(1.0), nn.Linear(32, 1))
print(model)
xs = torch.linspace(-3, 3, 128).unsqueeze(1)
ys = torch.sin(xs) * 2
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(301):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(xs), ys)
    loss.backward()
    opt.step()
    if step % 100 == 0:
        hidden = model[1](model[0](xs))
        print(f"step {step:3d}  mse {loss.item():.5f}  (hidden layer grad_fn: "
              f"{type(hidden.grad_fn).__name__})")
