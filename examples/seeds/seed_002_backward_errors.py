"""Seed 002 ("computational graph and backward()"): backward needs a scalar float output on a
graph that requires grad; each misuse raises PyTorch's message — run with jitgrad as torch."""

import jitgrad as torch

x = torch.randn(7, requires_grad=True)
w = torch.randn(7, requires_grad=True)
out = x * w
max_score = out.max()
max_score.backward()  # a one-element tensor: fine
print("d max / dx =", x.grad)

for label, fn in [
    ("backward on a 7-element tensor", lambda: (x * w).backward()),
    ("requires_grad on an integer tensor", lambda: torch.tensor([1, 2, 3], requires_grad=True)),
    ("backward without requires_grad", lambda: (torch.randn(3) * 2).sum().backward()),
]:
    try:
        fn()
    except RuntimeError as e:
        print(f"{label}: RuntimeError: {e}")
