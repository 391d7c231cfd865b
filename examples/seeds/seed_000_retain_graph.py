"""Seed 000 (olxtar, "Autograd-03: Practice02"): retain_graph, an extra stem, an extra leaf,
a custom Function (MyPow) and no_grad — run with ``import jitgrad as torch``."""

import jitgrad as torch


def get_tensor_info(tensor):
    """One line with a tensor's autograd attributes (the blog defines it in an earlier post)."""
    info = []
    for name in ["requires_grad", "is_leaf", "retains_grad", "grad_fn", "grad"]:
        value = getattr(tensor, name)
        if name == "grad" and value is not None:
            value = value.item()
        info.append(f"{name}({value})")
    info.append(f"tensor({str(tensor)})")
    return " ".join(info)


def print_tensor_infos(suffix="", **tensors):
    """``get_tensor_info`` of each tensor on its own line, labelled ``name + suffix`` (the blog
    prints them one ``print`` at a time)."""
    for name, tensor in tensors.items():
        print(name + suffix, get_tensor_info(tensor))


# 06. retain_graph
x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward(retain_graph=True)

print_tensor_infos(' after backward', x=x, y=y, z=z)

z.backward()

print_tensor_infos(' after 2backward', x=x, y=y, z=z)

# 07. an extra stem
x = torch.tensor(5.0, requires_grad=True)
y = x ** 3
w = x ** 2
z = torch.log(y) + torch.sqrt(w)

print_tensor_infos(x=x, y=y, w=w, z=z)

y.retain_grad()
w.retain_grad()
z.retain_grad()

z.backward()

print_tensor_infos(' after backward', x=x, y=y, w=w, z=z)

# 08. an extra leaf
q = torch.tensor(3.0, requires_grad=True)
x = torch.tensor(5.0, requires_grad=True)
y = x ** q
z = torch.log(y)

print_tensor_infos(q=q, x=x, y=y, z=z)

z.backward()

print_tensor_infos('_after_backward', q=q, x=x, y=y, z=z)

print("z gradient w.r.t q:", q.grad)
print("z gradient w.r.t x:", x.grad)


# 09. Operation: a custom autograd.Function
class MyPow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_1, input_2):
        ctx.save_for_backward(input_1, input_2)
        result = input_1 ** input_2
        return result

    @staticmethod
    def backward(ctx, grad_output):
        input_1, input_2 = ctx.saved_tensors
        grad_input_1 = grad_output * input_2 * input_1 ** (input_2 - 1)
        grad_input_2 = grad_output * input_1 ** input_2 * torch.log(input_1)
        print('input_1', input_1)
        print('input_2', input_2)
        print('grad_output', grad_output)
        print('grad_input_1', grad_input_1)
        print('grad_input_2', grad_input_2)
        return grad_input_1, grad_input_2


q = torch.tensor(3.0, requires_grad=True)
x = torch.tensor(5.0, requires_grad=True)
y = MyPow.apply(x, q)
z = torch.log(y)
z.backward()

# 10. no_grad
with torch.no_grad():
    q = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor(5.0, requires_grad=True)
    y = x ** q
print('inside no_grad: y.requires_grad =', y.requires_grad, '| q is a leaf requiring grad:',
      q.requires_grad)
