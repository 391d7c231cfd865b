"""Module hooks on a small CNN (the story of seed 004, as PyTorch tutorials tell it):

1. a forward hook saves an intermediate activation (what CAM-style visualisations need),
2. a forward pre-hook looks at what goes into a layer,
3. a full backward hook sees ``grad_input`` / ``grad_output`` and scales the gradient that
   flows on, changing every gradient upstream,
4. ``handle.remove()`` takes the hooks out again.

Run: ``python examples/hooks.py``.
"""

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F


class SimpleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 2 * 2, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


torch.manual_seed(0)
net = SimpleNet()
x = torch.randn(2, 1, 8, 8)
target = torch.tensor([0, 2])

# 1. forward hook: save the activation of conv2 -- hook(module, input, output)
save_feat = []
h_fwd = net.conv2.register_forward_hook(lambda module, inputs, output:
                                        save_feat.append(output.detach()))
# 2. forward pre-hook: runs before forward -- hook(module, input)
h_pre = net.conv2.register_forward_pre_hook(lambda module, inputs: print(
    f"conv2 receives {tuple(inputs[0].shape)}"))


# 3. full backward hook on conv2: hook(module, grad_input, grad_output) -> new grad_input
def hook_grad(module, grad_input, grad_output):
    print(f"conv2 backward: grad_output {tuple(grad_output[0].shape)}, "
          f"grad_input {tuple(grad_input[0].shape)}")
    return (grad_input[0] * 0.5,)  # halve the gradient that flows on to conv1


h_bwd = net.conv2.register_full_backward_hook(hook_grad)

loss = F.cross_entropy(net(x), target)
loss.backward()
print(f"saved activation: {tuple(save_feat[0].shape)}, mean {save_feat[0].mean().item():.4f}")
hooked = net.conv1.weight.grad.clone()

# 4. remove the hooks: the same pass now runs without them
for h in (h_fwd, h_pre, h_bwd):
    h.remove()
net.zero_grad()
F.cross_entropy(net(x), target).backward()
ratio = (hooked / net.conv1.weight.grad).mean().item()
print(f"conv1 gradient with the hook / without: {ratio:.3f}  (the hook halved it)")
print(f"activations saved after removal: {len(save_feat)} (still one)")
