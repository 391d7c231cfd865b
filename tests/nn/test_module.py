"""Module semantics against PyTorch: registration through attribute assignment, iteration
order and de-duplication, train/eval, zero_grad, requires_grad_, dtype conversion, apply,
containers, Parameter behaviour, repr strings and registration errors."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn


def _net(M):
    class Net(M.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = M.nn.Linear(3, 4)
            self.act = M.nn.ReLU()
            self.block = M.nn.Sequential(M.nn.Linear(4, 4), M.nn.BatchNorm1d(4))
            self.shared = self.fc1  # the same module twice
            self.scale = M.nn.Parameter(M.ones(1))
            self.register_buffer("steps", M.zeros(1))
            self.register_buffer("cache", M.zeros(2), persistent=False)
            self.plain = M.ones(1)  # a plain tensor attribute: not registered

        def forward(self, x):
            return self.block(self.act(self.fc1(x))) * self.scale

    return Net()


def test_registration_and_iteration_match_torch(torch):
    nets = [_net(jitgrad), _net(torch)]
    for fn in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        names = [[n for n, _ in getattr(net, fn)()] for net in nets]
        assert names[0] == names[1], fn
    for net in nets:
        assert len(list(net.parameters())) == 7
        assert len(list(net.modules())) == 6 and len(list(net.children())) == 3
        assert [n for n, _ in net.named_parameters(prefix="m", recurse=False)] == ["m.scale"]
    assert list(nets[0].state_dict()) == list(nets[1].state_dict())


def test_train_eval_requires_grad_and_zero_grad(torch):
    for M in (jitgrad, torch):
        net = _net(M)
        assert net.training and net.block[1].training
        assert net.eval() is net and not net.block[1].training
        net.train()
        assert net.block[1].training
        with pytest.raises(ValueError, match="training mode is expected to be boolean"):
            net.train("yes")
        net(M.ones(5, 3)).sum().backward()
        net.zero_grad(set_to_none=False)
        assert net.fc1.weight.grad is not None and not net.fc1.weight.grad.any()
        net.zero_grad()
        assert net.fc1.weight.grad is None
        net.requires_grad_(False)
        assert not any(p.requires_grad for p in net.parameters())


def test_to_double_keeps_parameter_objects():
    net = _net(jitgrad)
    w = net.fc1.weight
    net(jitgrad.ones(5, 3)).sum().backward()
    opt = jitgrad.optim.SGD(net.parameters(), lr=0.1)
    assert net.double() is net
    assert net.fc1.weight is w and w.dtype == jitgrad.float64 and w.grad.dtype == jitgrad.float64
    assert net.steps.dtype == jitgrad.float64 and isinstance(w, jnn.Parameter)
    opt.step()
    net.to(jitgrad.float32)
    assert w.dtype == jitgrad.float32
    assert net.block[1].num_batches_tracked.dtype == jitgrad.int64  # integers stay
    net.to(jitgrad.zeros(1, dtype=jitgrad.float64))
    assert w.dtype == jitgrad.float64
    net.to("cuda")  # the simulator's CUDA device in the test session: tests/cuda covers it
    assert net.fc1.weight is w and w.device == "cuda:0" and w.grad.device == "cuda:0"
    net.cpu()
    assert w.device == "cpu" and w.dtype == jitgrad.float64


def test_apply_and_init():
    net = _net(jitgrad)
    seen = []

    def init_linear(m):
        seen.append(type(m).__name__)
        if isinstance(m, jnn.Linear):
            jnn.init.zeros_(m.weight)

    net.apply(init_linear)
    assert seen[-1] == "Net" and seen.count("Linear") == 2  # fc1 once (shared)
    assert not net.fc1.weight.detach().numpy().any()


def test_parameter_semantics(torch):
    p = jnn.Parameter(jitgrad.tensor([1.0, 2.0]))
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0]))).replace("torch",
                                                                                 "jitgrad")
    assert p.requires_grad and p.is_leaf and isinstance(p, jitgrad.Tensor)
    assert not isinstance(p * 2, jnn.Parameter)
    assert not jnn.Parameter(jitgrad.ones(1), requires_grad=False).requires_grad
    q = copy.deepcopy(p)
    assert isinstance(q, jnn.Parameter) and q is not p and q.tolist() == p.tolist()
    src = jitgrad.zeros(2)
    r = jnn.Parameter(src)
    with jitgrad.no_grad():
        r.add_(1.0)
    assert src.tolist() == [1.0, 1.0]  # shares memory with its data
    assert not isinstance(p.detach(), jnn.Parameter)


def test_deepcopy_of_a_model_is_independent():
    net = _net(jitgrad)
    twin = copy.deepcopy(net)
    assert isinstance(twin.fc1.weight, jnn.Parameter)
    assert twin.shared is twin.fc1
    with jitgrad.no_grad():
        twin.fc1.weight.fill_(0.0)
    assert net.fc1.weight.detach().numpy().any()


REPRS = [
    lambda M: M.nn.Sequential(M.nn.Linear(2, 2), M.nn.Linear(2, 2), M.nn.ReLU()),
    lambda M: M.nn.ModuleList([M.nn.Linear(2, 2), M.nn.Linear(2, 2), M.nn.ReLU()]),
    lambda M: M.nn.Sequential(M.nn.Conv2d(1, 8, 3, padding=1),
                              M.nn.Conv2d(1, 8, (3, 5), stride=2, bias=False, dilation=2),
                              M.nn.MaxPool2d(3, 2, 1), M.nn.Flatten(0, -1)),
    lambda M: M.nn.Sequential(M.nn.ReLU(inplace=True), M.nn.Tanh(), M.nn.Sigmoid(),
                              M.nn.GELU("tanh"), M.nn.Softmax(dim=1), M.nn.LogSoftmax(1),
                              M.nn.Dropout(0.2), M.nn.Identity()),
    lambda M: M.nn.Sequential(M.nn.LayerNorm(5), M.nn.LayerNorm((3, 4),
                                                                elementwise_affine=False),
                              M.nn.BatchNorm1d(4),
                              M.nn.BatchNorm1d(4, momentum=None, affine=False,
                                               track_running_stats=False),
                              M.nn.Embedding(10, 3), M.nn.Embedding(10, 3, padding_idx=0),
                              M.nn.Linear(3, 2, bias=False)),
    lambda M: M.nn.ModuleDict({"a": M.nn.CrossEntropyLoss(), "b": M.nn.MSELoss(),
                               "c": M.nn.NLLLoss(), "d": M.nn.BCELoss(),
                               "e": M.nn.BCEWithLogitsLoss(), "f": M.nn.L1Loss()}),
    _net,
]


@pytest.mark.parametrize("i", range(len(REPRS)))
def test_repr_matches_torch(torch, i):
    assert repr(REPRS[i](jitgrad)) == repr(REPRS[i](torch))


def test_containers():
    seq = jnn.Sequential(jnn.Linear(2, 3), jnn.ReLU(), jnn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], jnn.Linear)
    assert isinstance(seq[1:], jnn.Sequential) and len(seq[1:]) == 2
    seq.append(jnn.Sigmoid())
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Sigmoid"]
    assert list(seq._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError, match="index 5 is out of range"):
        seq[5]
    ml = jnn.ModuleList([jnn.Linear(2, 2)])
    ml += [jnn.ReLU()]
    ml.insert(0, jnn.Tanh())
    assert [type(m).__name__ for m in ml] == ["Tanh", "Linear", "ReLU"]
    assert len(list(jnn.Sequential(ml).parameters())) == 2
    md = jnn.ModuleDict({"a": jnn.ReLU()})
    md["b"] = jnn.Linear(1, 1)
    assert list(md) == ["a", "b"] and "b" in md and len(list(md.parameters())) == 2


def test_get_submodule_parameter_buffer():
    net = _net(jitgrad)
    assert net.get_submodule("block.0") is net.block[0]
    assert net.get_parameter("block.0.bias") is net.block[0].bias
    assert net.get_buffer("block.1.running_var") is net.block[1].running_var
    with pytest.raises(AttributeError, match="Linear has no attribute `foo`"):
        net.get_submodule("fc1.foo")


ERRORS = [
    (lambda M, m: m.register_parameter("x.y", None), KeyError,
     r'parameter name can.+t contain "\."'),
    (lambda M, m: setattr(m, "weight", M.zeros(3)), TypeError,
     r"cannot assign '\w+\.FloatTensor' as parameter 'weight' \(torch\.nn\.Parameter or None "
     r"expected\)"),
    (lambda M, m: m.register_buffer("weight", M.zeros(3)), KeyError,
     "attribute 'weight' already exists"),
    (lambda M, m: m.register_parameter("w2", M.ones(1)), TypeError,
     r"cannot assign '\w+\.FloatTensor' object to parameter 'w2' \(torch\.nn\.Parameter or None "
     r"required\)"),
    (lambda M, m: m.add_module("", M.nn.ReLU()), KeyError, "module name can.+t be empty string"),
    (lambda M, m: m.foo, AttributeError, "'Linear' object has no attribute 'foo'"),
    (lambda M, m: m.forward_missing(), AttributeError, "has no attribute 'forward_missing'"),
    (lambda M, m: M.nn.Module()(M.ones(1)), NotImplementedError,
     r'Module \[Module\] is missing the required "forward" function'),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_registration_errors_match_torch(torch, i):
    fn, exc, msg = ERRORS[i]
    for M in (jitgrad, torch):
        with pytest.raises(exc, match=msg):
            fn(M, M.nn.Linear(2, 3))


def test_reassignment_moves_between_kinds():
    m = jnn.Module()
    m.x = jnn.Linear(1, 1)
    m.x = jnn.Parameter(jitgrad.ones(1))
    assert "x" in m._parameters and "x" not in m._modules
    m.x = None
    assert m._parameters["x"] is None and list(m.parameters()) == []
    del m.x
    assert "x" not in m._parameters
    m.register_buffer("b", jitgrad.ones(1))
    m.b = jitgrad.zeros(2)
    assert m._buffers["b"].tolist() == [0.0, 0.0]
    with pytest.raises(AttributeError, match="cannot assign parameters before "
                                             "Module.__init__\\(\\) call"):
        class Bad(jnn.Module):
            def __init__(self):
                self.w = jnn.Parameter(jitgrad.ones(1))
        Bad()
    assert np.isin("b", dir(m))
