"""jitgrad quickstart: the story of the seed documents, end to end.

Run with ``make demo`` (or ``python examples/quickstart.py``). Every block is plain PyTorch
autograd code; only the import differs.
"""

import time

import jitgrad as torch


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


section("1. Tensors that record a graph")
x = torch.tensor(5.0, requires_grad=True)
y = x ** 3
z = torch.log(y)
print("x =", x)
print("y = x ** 3 =", y)
print("z = log(y) =", z, "| z.grad_fn:", z.grad_fn.name(),
      "| next:", [type(f).__name__ for f, _ in z.grad_fn.next_functions])

section("2. backward(), retain_graph and accumulation into .grad")
z.backward(retain_graph=True)
print("after backward   x.grad =", x.grad, f"({x.grad.item()!r})")
z.backward()
print("after 2nd (kept) x.grad =", x.grad, "-> gradients accumulate")
try:
    z.backward()
except RuntimeError as e:
    print("3rd backward:", str(e)[:95] + "...")
x.grad.zero_()
print("after x.grad.zero_():", x.grad)

section("3. Two paths to one leaf (the chain rule sums them)")
x = torch.tensor(5.0, requires_grad=True)
y, w = x ** 3, x ** 2
z = torch.log(y) + torch.sqrt(w)
for t in (y, w, z):
    t.retain_grad()
z.backward()
print(f"dz/dy = {y.grad.item():.4f}, dz/dw = {w.grad.item():.4f}, dz/dx = {x.grad.item():.4f}")

section("4. Two leaves: x ** q")
q = torch.tensor(3.0, requires_grad=True)
x = torch.tensor(5.0, requires_grad=True)
z = torch.log(x ** q)
z.backward()
print("z gradient w.r.t q:", q.grad, " | w.r.t x:", x.grad, " | node:", (x ** q).grad_fn)


section("5. A custom autograd.Function")


class MyPow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a ** b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b * a ** (b - 1), grad_output * a ** b * torch.log(a)


q = torch.tensor(3.0, requires_grad=True)
x = torch.tensor(5.0, requires_grad=True)
torch.log(MyPow.apply(x, q)).backward()
print("MyPow grads:", x.grad, q.grad, "(same as the built-in PowBackward1)")

section("6. Vectors: gradient arguments, matmul, a loss")
inp = torch.eye(5, requires_grad=True)
out = (inp + 1).pow(2)
out.backward(torch.ones_like(inp), retain_graph=True)
print("Jacobian-vector product, first call:\n", inp.grad, sep="")
torch.manual_seed(0)
xs, ys = torch.ones(5), torch.zeros(3)
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(xs, w) + b, ys)
loss.backward()
print("loss =", loss, "\nb.grad =", b.grad)

section("7. no_grad, detach, hooks")
with torch.no_grad():
    print("inside no_grad, (w * 2).requires_grad =", (w * 2).requires_grad)
print("detach():", (w * 2).detach().requires_grad)
h = b.register_hook(lambda g: g * 0.5)
b.grad = None
torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(xs, w) + b, ys).backward()
print("b.grad with a halving hook:", b.grad)
h.remove()

section("8. Errors are PyTorch's")
for label, fn in [
    ("non-scalar backward", lambda: (w * 2).backward()),
    ("int requires_grad", lambda: torch.tensor([1, 2], requires_grad=True)),
    ("shape mismatch", lambda: torch.ones(2, 3) + torch.ones(4)),
    ("numpy() of a grad tensor", lambda: w.numpy()),
]:
    try:
        fn()
    except RuntimeError as e:
        print(f"{label:26s} -> {e}")

section("9. Speed: element-wise work runs on generated Numba kernels")
n = 1_000_000
xb = torch.randn(n, requires_grad=True)
wb = torch.randn(n, requires_grad=True)
bb = torch.randn(n, requires_grad=True)


def step():
    for t in (xb, wb, bb):
        t.grad = None
    (torch.tanh(xb * wb + bb) ** 2 * torch.sigmoid(xb)).sum().backward()


step()  # first call loads (or compiles and caches) the kernels
t0 = time.perf_counter()
reps = 10
for _ in range(reps):
    step()
dt = (time.perf_counter() - t0) / reps
print(f"sum(tanh(x*w + b)**2 * sigmoid(x)), forward+backward on {n:,} float32: "
      f"{dt * 1e3:.2f} ms per step")
