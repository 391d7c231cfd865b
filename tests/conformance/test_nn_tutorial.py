"""pytorch/tutorials' "What is torch.nn really?" (``nn_tutorial.py``), run with ``import
jitgrad as torch`` and with PyTorch on the same data and initial weights: logistic regression
from scratch (hand-written ``log_softmax`` and ``nll``, the update under ``no_grad``), then
``F.cross_entropy``, ``nn.Module`` with ``nn.Parameter`` (``Mnist_Logistic``), ``nn.Linear``,
``optim.SGD``, ``TensorDataset`` / ``DataLoader`` with ``fit()`` and a validation loss, and
the ``nn.Sequential`` CNN with a ``Lambda`` layer and ``nn.AdaptiveAvgPool2d``.

MNIST is replaced by synthetic 28x28 images (the tutorial downloads it); its sizes, batch
size and learning rate are kept (fewer samples)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad

N_TRAIN, N_VALID, BS, LR = 128, 64, 32, 0.5


@pytest.fixture(scope="module")
def mnist_like():
    return make_data()


def make_data():
    """``x_train, y_train, x_valid, y_valid`` (float32 rows of 784 pixels in [0, 1), int64
    labels) and the from-scratch model's initial weights (``randn(784, 10) / sqrt(784)``)."""
    rng = np.random.default_rng(17)
    # mostly-black images, as MNIST's (a fifth of the pixels lit)
    x = rng.random((N_TRAIN + N_VALID, 784), dtype=np.float32)
    x *= rng.random(x.shape) < 0.2
    # labels that depend on the pixels, so there is something to learn
    proj = rng.standard_normal((784, 10)).astype(np.float32)
    y = np.argmax(x @ proj, axis=1).astype(np.int64)
    weights = (rng.standard_normal((784, 10)) / math.sqrt(784)).astype(np.float32)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:], weights


def tensors(torch, data):
    x_train, y_train, x_valid, y_valid, _ = map(torch.tensor, data)
    return x_train, y_train, x_valid, y_valid


def from_scratch(torch, data):
    """"Neural net from scratch": ``weights``/``bias`` updated by hand under ``no_grad``."""
    x_train, y_train, x_valid, y_valid = tensors(torch, data)
    n, c = x_train.shape
    weights = torch.tensor(data[4])
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    loss_func = nll

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    xb = x_train[0:BS]
    yb = y_train[0:BS]
    before = (loss_func(model(xb), yb), accuracy(model(xb), yb))
    losses = []
    epochs = 2
    for epoch in range(epochs):  # noqa: B007 (the tutorial's loop)
        for i in range((n - 1) // BS + 1):
            start_i = i * BS
            end_i = start_i + BS
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)
            losses.append(loss.item())
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * LR
                bias -= bias.grad * LR
                weights.grad.zero_()
                bias.grad.zero_()
    after = (loss_func(model(xb), yb), accuracy(model(xb), yb))
    # "Using torch.nn.functional": the same loss from F.cross_entropy on the raw scores
    F = torch.nn.functional
    ce = F.cross_entropy(xb @ weights + bias, yb)
    return before, losses, after, ce, weights, bias


def fit_all_stages(torch, data, weights0):
    """``Mnist_Logistic`` (nn.Parameter), the nn.Linear version, ``optim.SGD``,
    ``TensorDataset``/``DataLoader`` and ``fit()`` with a validation loss; returns the
    validation losses of each stage."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    from_ = {"jitgrad": "jitgrad.utils.data", "torch": "torch.utils.data"}[torch.__name__]
    data_mod = __import__(from_, fromlist=["DataLoader", "TensorDataset"])
    DataLoader, TensorDataset = data_mod.DataLoader, data_mod.TensorDataset
    x_train, y_train, x_valid, y_valid = tensors(torch, data)
    loss_func = F.cross_entropy

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.tensor(data[4]))
            self.bias = nn.Parameter(torch.zeros(10))

        def forward(self, xb):
            return xb @ self.weights + self.bias

    class Mnist_Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(784, 10)

        def forward(self, xb):
            return self.lin(xb)

    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss.item(), len(xb)

    def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
        out = []
        for epoch in range(epochs):  # noqa: B007
            model.train()
            for xb, yb in train_dl:
                loss_batch(model, loss_func, xb, yb, opt)
            model.eval()
            with torch.no_grad():
                losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
            out.append(np.sum(np.multiply(losses, nums)) / np.sum(nums))
        return out

    def get_data(train_ds, valid_ds, bs):
        return (DataLoader(train_ds, batch_size=bs, shuffle=False),
                DataLoader(valid_ds, batch_size=bs * 2))

    train_dl, valid_dl = get_data(TensorDataset(x_train, y_train),
                                  TensorDataset(x_valid, y_valid), BS)
    results = {}
    # refactor using nn.Module: the fit() loop by hand, parameters from model.parameters()
    model = Mnist_Logistic()
    results["logistic"] = fit(2, model, loss_func, optim.SGD(model.parameters(), lr=LR),
                              train_dl, valid_dl)
    # nn.Linear, initial weights from jitgrad's model (a state_dict of NumPy arrays)
    model = Mnist_Linear()
    model.load_state_dict({k: torch.tensor(v) for k, v in weights0["linear"].items()})
    results["linear"] = fit(2, model, loss_func, optim.SGD(model.parameters(), lr=LR),
                            train_dl, valid_dl)

    # "Switch to CNN" with nn.Sequential and a Lambda layer
    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    def preprocess(x):
        return x.view(-1, 1, 28, 28)

    model = nn.Sequential(
        Lambda(preprocess),
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    model.load_state_dict({k: torch.tensor(v) for k, v in weights0["cnn"].items()})
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    results["cnn"] = fit(2, model, loss_func, opt, train_dl, valid_dl)
    return results


def jitgrad_initial_weights() -> dict:
    """Default-initialised ``nn.Linear(784, 10)`` and CNN weights of jitgrad, as NumPy."""
    nn = jitgrad.nn
    jitgrad.manual_seed(0)
    linear = {"lin." + k: v.numpy() for k, v in nn.Linear(784, 10).state_dict().items()}
    convs = [nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.Conv2d(16, 16, 3, stride=2, padding=1),
             nn.Conv2d(16, 10, 3, stride=2, padding=1)]
    cnn = {f"{i}.{k}": v.numpy() for i, c in zip((1, 3, 5), convs)
           for k, v in c.state_dict().items()}
    return {"linear": linear, "cnn": cnn}


def test_from_scratch_matches_pytorch(mnist_like):
    pt = pytest.importorskip("torch")
    ours, theirs = from_scratch(jitgrad, mnist_like), from_scratch(pt, mnist_like)
    (l0, a0), losses, (l1, a1), ce, w, b = ours
    assert l1.item() < l0.item()  # it learns
    np.testing.assert_allclose(ce.item(), l1.item(), rtol=1e-5)  # nll(log_softmax) == CE
    np.testing.assert_allclose(losses, theirs[1], rtol=1e-5)
    for o, t in zip((l0, a0, l1, a1, ce, w, b),
                    (*theirs[0], *theirs[2], theirs[3], theirs[4], theirs[5])):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)


def test_nn_module_optim_dataloader_and_cnn_match_pytorch(mnist_like):
    pt = pytest.importorskip("torch")
    w0 = jitgrad_initial_weights()
    ours, theirs = fit_all_stages(jitgrad, mnist_like, w0), fit_all_stages(pt, mnist_like, w0)
    for stage in ("logistic", "linear", "cnn"):
        assert ours[stage][-1] < ours[stage][0], (stage, ours[stage])  # it learns
        np.testing.assert_allclose(ours[stage], theirs[stage], rtol=1e-4, err_msg=stage)
