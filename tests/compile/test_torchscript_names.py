"""``torch.jit``'s entry points (``jit/torchscript.py``): code written for TorchScript runs
unchanged -- ``script`` returns its argument, the decorators theirs, ``trace`` is a
compiled function traced on the example -- and computes what PyTorch computes."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad


def _program(M):
    @M.jit.script
    def fused_gelu(x):
        return x * 0.5 * (1.0 + M.erf(x / 1.41421356237))

    class Block(M.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0
            M.manual_seed(0)
            self.lin = M.nn.Linear(4, 3, dtype=M.float64)

        @M.jit.ignore
        def debug(self):
            return "debug"

        @M.jit.export
        def doubled(self, x):
            return self.forward(x) * self.scale

        def forward(self, x):
            y = M.jit.annotate(M.Tensor, self.lin(x))
            return fused_gelu(y)

    return Block


def test_script_and_decorators_run_the_python():
    import typing

    assert jitgrad.jit.Final is typing.Final
    block = _program(jitgrad)()
    assert jitgrad.jit.script(block) is block and not jitgrad.jit.is_scripting()
    assert block.debug() == "debug" and not jitgrad.jit.is_tracing()
    x = jitgrad.tensor(np.linspace(-1, 1, 8).reshape(2, 4))
    np.testing.assert_array_equal(block.doubled(x).detach().numpy(),
                                  2.0 * block(x).detach().numpy())


def test_trace_is_a_compiled_function_that_retraces_where_the_example_does_not_hold():
    block = _program(jitgrad)()
    x = jitgrad.tensor(np.linspace(-1, 1, 8).reshape(2, 4))
    traced = jitgrad.jit.trace(block, x)
    assert isinstance(traced, jitgrad.jit.OptimizedModule)
    np.testing.assert_array_equal(traced(x).detach().numpy(), block(x).detach().numpy())
    x3 = jitgrad.tensor(np.linspace(-2, 2, 12).reshape(3, 4))  # another shape: traced anew
    np.testing.assert_array_equal(traced(x3).detach().numpy(), block(x3).detach().numpy())
    f = jitgrad.jit.trace(lambda a, b: a * b + 1.0, (x, x))
    np.testing.assert_array_equal(f(x, x).numpy(), (x * x + 1.0).numpy())


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-1, 1, 8).reshape(2, 4)
    ours, theirs = _program(jitgrad)(), torch.jit.script(_program(torch)())
    with torch.no_grad():
        for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    np.testing.assert_allclose(jitgrad.jit.trace(ours, jitgrad.tensor(x))(
        jitgrad.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
        rtol=1e-12)
    np.testing.assert_allclose(ours.doubled(jitgrad.tensor(x)).detach().numpy(),
                               theirs.doubled(torch.tensor(x)).detach().numpy(), rtol=1e-12)
