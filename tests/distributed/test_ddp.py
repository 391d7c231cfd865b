"""DistributedDataParallel in one process (a world of size 1): the wrapper, its argument
checks, bucketing, PyTorch's unfinished-reduction error, no_sync. Two-rank training is in
test_mpi.py (mpi_worker.check_ddp)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.distributed as dist
import jitgrad.nn as nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP

pytest.importorskip("mpi4py")


@pytest.fixture
def group():
    dist.init_process_group("mpi")
    yield
    dist.destroy_process_group()


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(3, 2)
        self.unused = nn.Linear(3, 2)

    def forward(self, x):
        return self.used(x)


def test_needs_a_process_group():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DDP(nn.Linear(2, 2))


def test_wraps_module(group):
    inner = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model = DDP(inner)
    assert model.module is inner
    assert [n for n, _ in model.named_parameters()][0] == "module.0.weight"
    assert set(model.state_dict()) == {"module." + k for k in inner.state_dict()}
    x = jitgrad.randn(5, 3)
    out = model(x)
    np.testing.assert_array_equal(out.detach().numpy(), inner(x).detach().numpy())
    out.sum().backward()
    expected = inner[2].bias.grad.tolist()
    assert expected == [5.0]  # a world of one: the average is the local gradient


def test_arguments(group):
    with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a "
                                           "gradient"):
        DDP(nn.ReLU())
    with pytest.raises(ValueError, match="find_unused_parameters=True is not supported"):
        DDP(nn.Linear(2, 2), find_unused_parameters=True)
    with pytest.raises(ValueError, match="process_group=None"):
        DDP(nn.Linear(2, 2), process_group=object())
    with pytest.raises(ValueError, match="device_ids"):
        DDP(nn.Linear(2, 2), device_ids=[0])


def test_buckets_reverse_order_cap_and_dtype(group):
    inner = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4).double(), nn.Linear(4, 4))
    params = list(inner.parameters())
    one = DDP(inner)
    assert [b.params for b in one._buckets] == [params[::-1][:2], params[::-1][2:4],
                                                params[::-1][4:]]
    small = DDP(inner, bucket_cap_mb=300 / 2**20)  # 300 bytes
    sizes = [[p.numel() * p.element_size() for p in b.params] for b in small._buckets]
    assert [p for b in small._buckets for p in b.params] == params[::-1]
    assert all(len(b) == 1 or sum(b) <= 300 for b in sizes)
    assert sizes[-1] == [1024]  # larger than the cap: a bucket alone


def test_unused_parameter_error(group):
    model = DDP(TwoHeads())
    model(jitgrad.ones(1, 3)).sum().backward()
    with pytest.raises(RuntimeError, match="Expected to have finished reduction in the prior "
                                           "iteration before starting a new one"):
        model(jitgrad.ones(1, 3))


def test_no_sync_and_eval_forwards(group):
    model = DDP(TwoHeads())
    with model.no_sync():
        assert not model.require_backward_grad_sync
        model(jitgrad.ones(1, 3)).sum().backward()  # not synchronised: no reduction pending
    assert model.require_backward_grad_sync
    with jitgrad.no_grad():
        model(jitgrad.ones(1, 3))
    model.module.used(jitgrad.ones(1, 3)).sum().backward()  # not through the wrapper
    assert model.module.used.bias.grad.tolist() == [2.0, 2.0]
    model(jitgrad.ones(1, 3))  # no reduction was started: no error


@pytest.mark.parametrize("as_view", [True, False])
def test_gradient_as_bucket_view(group, as_view):
    """True (jitgrad's default): each .grad is a view of its bucket's buffer; False
    (PyTorch's default): gradients are tensors of their own."""
    model = DDP(nn.Linear(3, 2), gradient_as_bucket_view=as_view)
    assert model.gradient_as_bucket_view is as_view
    model(jitgrad.ones(4, 3)).sum().backward()
    bucket = model._buckets[0]
    for p, g in zip(bucket.params, bucket.grads):
        assert (p.grad is g) is as_view
        assert np.shares_memory(p.grad._data, bucket.flat) is as_view
    assert model.module.bias.grad.tolist() == [4.0, 4.0]
