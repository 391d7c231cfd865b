"""Device selection as current public PyTorch code writes it, run with ``import jitgrad as
torch`` and with PyTorch on the same weights and data:

* pytorch/examples' ``mnist/main.py``: ``use_accel = not args.no_accel and
  torch.accelerator.is_available()``, ``device = torch.accelerator.current_accelerator()``
  (else ``torch.device("cpu")``), ``model.to(device)``, batches ``.to(device)``, Adadelta
  with ``StepLR(step_size=1, gamma=0.7)``, ``F.nll_loss`` of ``log_softmax``;
* pytorch/tutorials' "Build the Neural Network" / quickstart: ``device =
  torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else
  "cpu"`` and ``NeuralNetwork().to(device)`` (Flatten, Linear/ReLU stack), then
  ``torch.rand(1, 28, 28, device=device)`` through it and ``nn.Softmax(dim=1)``.

Under the tests jitgrad's accelerator is CUDA (Numba's simulator); PyTorch's CPU build has
none and runs on the CPU: the same script, different devices, the same numbers. Sizes are
cut down (8x8 images) for the simulator; the structure is the scripts'."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad

SIDE, HIDDEN, CLASSES, BATCH, STEPS = 8, 16, 10, 6, 4


def select_device(torch, no_accel: bool = False):
    """mnist/main.py's selection."""
    use_accel = not no_accel and torch.accelerator.is_available()
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    return device


def neural_network(torch):
    """The tutorials' ``NeuralNetwork`` (28*28 -> 512 -> 512 -> 10, here smaller)."""
    nn = torch.nn

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(SIDE * SIDE, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN),
                nn.ReLU(), nn.Linear(HIDDEN, CLASSES))

        def forward(self, x):
            x = self.flatten(x)
            return self.linear_relu_stack(x)

    return NeuralNetwork()


def train(torch, state: dict, data, no_accel: bool = False):
    """mnist/main.py's loop: Adadelta(lr=1.0), StepLR(step_size=1, gamma=0.7) per epoch,
    ``nll_loss(log_softmax(output))``; returns the device, the losses and the weights."""
    F = torch.nn.functional
    device = select_device(torch, no_accel)
    model = neural_network(torch).to(device)
    model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for _epoch in range(2):
        model.train()
        for images, labels in data:
            data_b, target = torch.tensor(images).to(device), torch.tensor(labels).to(device)
            optimizer.zero_grad()
            output = F.log_softmax(model(data_b), dim=1)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    weights = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return device, losses, weights


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(5)
    data = [(rng.random((BATCH, 1, SIDE, SIDE), dtype=np.float32),
             rng.integers(0, CLASSES, BATCH)) for _ in range(STEPS)]
    jitgrad.manual_seed(0)
    state = {k: v.numpy().copy() for k, v in neural_network(jitgrad).state_dict().items()}
    return state, data


def test_mnist_example_selects_the_accelerator_and_trains_as_pytorch(setup):
    torch = pytest.importorskip("torch")
    state, data = setup
    device, losses, weights = train(jitgrad, state, data)
    assert device == ("cuda" if jitgrad.cuda.is_available() else "cpu")
    t_device, t_losses, t_weights = train(torch, state, data)
    assert t_device.type == ("cuda" if torch.accelerator.is_available() else "cpu")
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5, atol=1e-6)
    for name, w in weights.items():
        np.testing.assert_allclose(w, t_weights[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert losses[-1] < losses[0]


def test_no_accel_runs_on_the_cpu_with_the_same_numbers(setup):
    state, data = setup
    device, losses, weights = train(jitgrad, state, data, no_accel=True)
    assert device == "cpu"
    _, acc_losses, acc_weights = train(jitgrad, state, data)
    np.testing.assert_allclose(losses, acc_losses, rtol=1e-5, atol=1e-6)


def test_tutorial_device_string_and_prediction_as_pytorch(setup):
    torch = pytest.importorskip("torch")
    state, _ = setup
    results = []
    for M in (jitgrad, torch):
        device = M.accelerator.current_accelerator().type if M.accelerator.is_available() \
            else "cpu"
        print(f"Using {device} device")
        model = neural_network(M).to(device)
        model.load_state_dict({k: M.tensor(v) for k, v in state.items()})
        M.manual_seed(0)
        X = M.tensor(np.random.default_rng(1).random((1, SIDE, SIDE), dtype=np.float32),
                     device=device)
        logits = model(X)
        pred_probab = M.nn.Softmax(dim=1)(logits)
        y_pred = pred_probab.argmax(1)
        results.append((device, pred_probab.detach().cpu().numpy(), y_pred.cpu().numpy()))
    assert results[0][0] == ("cuda" if jitgrad.cuda.is_available() else "cpu")
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_set_default_device_to_the_accelerator_builds_there(setup):
    # torch.set_default_device(device) after selecting it, then factories without device=
    state, _ = setup
    device = select_device(jitgrad)
    jitgrad.set_default_device(device)
    try:
        model = neural_network(jitgrad)
        assert all(p.device == jitgrad.get_default_device() for p in model.parameters())
        out = model(jitgrad.rand(2, SIDE, SIDE))
        assert out.device == jitgrad.get_default_device() and out.shape == (2, CLASSES)
    finally:
        jitgrad.set_default_device(None)
