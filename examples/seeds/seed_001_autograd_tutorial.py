"""Seed 001 (the Korean PyTorch autograd tutorial): requires_grad, grad_fn, mean, backward
with a gradient argument, retain_graph and no_grad — run with ``import jitgrad as torch``.

The tutorial was written for an old PyTorch that printed ``AddBackward``/``MulBackward``/
``MeanBackward1``; PyTorch 2 (and jitgrad) print ``AddBackward0``/``MulBackward0``/
``MeanBackward0``. Its random numbers differ run to run (no seed is set).
"""

import jitgrad as torch

x = torch.ones(2, 2, requires_grad=True)
print(x)
print(x.data)
print(x.grad)
print(x.grad_fn)  # we've created x ourselves

y = x + 2
print(y)

z = y * y * 3
out = z.mean()

print(z, out)

a = torch.randn(2, 2)
a = ((a * 3) / (a - 1))
print(a.requires_grad)
a.requires_grad_(True)
print(a.requires_grad)
b = (a * a).sum()
print(b.grad_fn)

out.backward()
print(x.grad)

x = torch.ones(2, 2, requires_grad=True)
y = x + 2
y.backward(torch.ones(2, 2), retain_graph=True)
print(x.grad)

z = y * y
print(z)

gradient = torch.randn(2, 2)
y.backward(gradient)
print(x.grad)

print(x.requires_grad)
print((x ** 2).requires_grad)

with torch.no_grad():
    print((x ** 2).requires_grad)
