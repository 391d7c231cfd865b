"""jitgrad.nn.utils.rnn against torch.nn.utils.rnn: packing / padding values, batch sizes,
sorted and unsorted indices, gradients, errors; RNN / LSTM / GRU on packed batches (outputs,
final states per sequence, gradients of inputs, initial states and weights) with identical
weights loaded both ways; the NLP-tutorial training step."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import assert_same_error as _errors

import jitgrad
import jitgrad.nn as nn
from jitgrad.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn


def _j(a, grad=False):
    return jitgrad.tensor(np.array(a), requires_grad=grad)


def _t(a, grad=False):
    return torch.tensor(np.array(a), requires_grad=grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_padded_sequence_matches_torch(batch_first, enforce_sorted):
    rng = np.random.default_rng(0)
    lengths = [5, 4, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4, 4]
    shape = (5, 6, 3) if batch_first else (6, 5, 3)
    x = rng.standard_normal(shape)
    jx, tx = _j(x, True), _t(x, True)
    jp = R.pack_padded_sequence(jx, lengths, batch_first, enforce_sorted)
    tp = TR.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    _close(jp.data, tp.data)
    assert jp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    assert jp.batch_sizes.dtype == jitgrad.int64 and jp.batch_sizes.device.type == "cpu"
    for a, b in ((jp.sorted_indices, tp.sorted_indices),
                 (jp.unsorted_indices, tp.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist() and a.dtype == jitgrad.int64
    w = rng.standard_normal(jp.data.shape)
    (jp.data * _j(w)).sum().backward()
    (tp.data * _t(w)).sum().backward()
    _close(jx.grad, tx.grad)
    # lengths as a tensor too
    jp2 = R.pack_padded_sequence(jx.detach(), jitgrad.tensor(lengths), batch_first,
                                 enforce_sorted)
    _close(jp2.data, jp.data)


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_packed_sequence_matches_torch(batch_first):
    rng = np.random.default_rng(1)
    seqs = [rng.standard_normal((n, 2)) for n in (3, 5, 1, 4)]
    jseqs = [_j(s, True) for s in seqs]
    tseqs = [_t(s, True) for s in seqs]
    jp = R.pack_sequence(jseqs, enforce_sorted=False)
    tp = TR.pack_sequence(tseqs, enforce_sorted=False)
    for kw in ({}, {"total_length": 7}, {"padding_value": -2.5}):
        jo, jl = R.pad_packed_sequence(jp, batch_first=batch_first, **kw)
        to, tl = TR.pad_packed_sequence(tp, batch_first=batch_first, **kw)
        _close(jo, to)
        assert jl.tolist() == tl.tolist() and jl.dtype == jitgrad.int64
    w = rng.standard_normal(jo.shape)
    (jo * _j(w)).sum().backward()
    (to * _t(w)).sum().backward()
    for a, b in zip(jseqs, tseqs):
        _close(a.grad, b.grad)
    _errors(lambda: R.pad_packed_sequence(jp, total_length=3),
            lambda: TR.pad_packed_sequence(tp, total_length=3))


def test_pad_sequence_options_and_errors():
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 3)) for n in (2, 4, 3)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            jo = R.pad_sequence([_j(s) for s in seqs], batch_first, 7.0, side)
            to = TR.pad_sequence([_t(s) for s in seqs], batch_first, 7.0, side)
            _close(jo, to)
    ints = [np.arange(n) for n in (3, 1)]
    assert R.pad_sequence([_j(s) for s in ints], True).tolist() == \
        TR.pad_sequence([_t(s) for s in ints], True).tolist()
    _errors(lambda: R.pad_sequence([]), lambda: TR.pad_sequence([]))
    _errors(lambda: R.pad_sequence(5), lambda: TR.pad_sequence(5))
    _errors(lambda: R.pad_sequence([_j(seqs[0])], padding_side="up"),
            lambda: TR.pad_sequence([_t(seqs[0])], padding_side="up"))
    _errors(lambda: R.pad_sequence([jitgrad.ones(2, 3), jitgrad.ones(3, 2)]),
            lambda: TR.pad_sequence([torch.ones(2, 3), torch.ones(3, 2)]))


def test_pack_errors_match_torch():
    x = np.zeros((4, 3, 2))
    for lengths, kw in (([3, 4, 1], {}), ([4, 3], {}), ([4, 2, 0], {}),
                        ([0, 2, 1], {"enforce_sorted": False})):
        _errors(lambda n=lengths, k=kw: R.pack_padded_sequence(_j(x), n, **k),
                lambda n=lengths, k=kw: TR.pack_padded_sequence(_t(x), n, **k))
    _errors(lambda: R.pack_padded_sequence(_j(x), jitgrad.tensor([[4, 3, 1]])),
            lambda: TR.pack_padded_sequence(_t(x), torch.tensor([[4, 3, 1]])))


def test_sequence_lists_round_trip_and_repr():
    seqs = [[1, 2, 3], [4, 5], [6]]
    jp = R.pack_sequence([jitgrad.tensor(s) for s in seqs])
    tp = TR.pack_sequence([torch.tensor(s) for s in seqs])
    assert repr(jp) == repr(tp)
    assert jp._fields == tp._fields == ("data", "batch_sizes", "sorted_indices",
                                        "unsorted_indices")
    assert [s.tolist() for s in R.unpack_sequence(jp)] == seqs
    unsorted = [[4, 5], [1, 2, 3], [6]]
    jp = R.pack_sequence([jitgrad.tensor(s) for s in unsorted], enforce_sorted=False)
    tp = TR.pack_sequence([torch.tensor(s) for s in unsorted], enforce_sorted=False)
    assert repr(jp) == repr(tp)
    assert [s.tolist() for s in R.unpack_sequence(jp)] == unsorted
    padded = R.pad_sequence([jitgrad.tensor(s) for s in unsorted])
    lengths = jitgrad.tensor([2, 3, 1])
    for batch_first, p in ((False, padded), (True, padded.transpose(0, 1))):
        out = R.unpad_sequence(p, lengths, batch_first)
        assert [s.tolist() for s in out] == unsorted
    assert tuple(padded.shape) == (3, 3)  # not transposed in place (PyTorch's is)
    assert R.invert_permutation(jitgrad.tensor([2, 0, 1])).tolist() == \
        TR.invert_permutation(torch.tensor([2, 0, 1])).tolist()
    assert R.invert_permutation(None) is None


def test_packed_sequence_to_and_fields():
    jp = R.pack_sequence([jitgrad.ones(3, 2), jitgrad.ones(1, 2)], enforce_sorted=False)
    assert jp.to(jitgrad.float32) is jp and jp.to("cpu") is jp
    d = jp.to(jitgrad.float64)
    assert d is not jp and d.data.dtype == jitgrad.float64
    assert d.batch_sizes is jp.batch_sizes and d.sorted_indices.tolist() == [0, 1]
    assert jp.double().data.dtype == jitgrad.float64 and jp.long().data.dtype == jitgrad.int64
    assert not jp.is_cuda
    data, batch_sizes, sorted_indices, unsorted_indices = jp  # a tuple
    assert isinstance(jp, tuple) and batch_sizes.tolist() == [2, 1, 1]
    rebuilt = R.PackedSequence(data, batch_sizes, sorted_indices)
    assert rebuilt.unsorted_indices.tolist() == jp.unsorted_indices.tolist()


def _pair(kind, num_layers, bidirectional, batch_first, from_torch):
    """A jitgrad and a torch module with the same weights (copied one way or the other)."""
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    jm = getattr(nn, kind)(3, 5, dtype=jitgrad.float64, **kw)
    tm = getattr(torch.nn, kind)(3, 5, dtype=torch.float64, **kw)
    if from_torch:
        jm.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    else:
        tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in jm.state_dict().items()})
    assert list(jm.state_dict()) == list(tm.state_dict())
    return jm, tm


CONFIGS = [("LSTM", 1, False, False), ("LSTM", 2, True, True), ("GRU", 2, False, True),
           ("GRU", 1, True, False), ("RNN", 2, True, False), ("RNN", 1, False, True)]


@pytest.mark.parametrize("kind,num_layers,bidirectional,batch_first", CONFIGS)
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_recurrent_layers_on_packed_batches(kind, num_layers, bidirectional, batch_first,
                                            enforce_sorted):
    rng = np.random.default_rng(3)
    jm, tm = _pair(kind, num_layers, bidirectional, batch_first,
                   from_torch=enforce_sorted)
    lengths = [6, 4, 4, 3, 1] if enforce_sorted else [3, 6, 1, 4, 4]
    x = rng.standard_normal((5, 6, 3) if batch_first else (6, 5, 3))
    layers = num_layers * (2 if bidirectional else 1)
    h0 = rng.standard_normal((layers, 5, 5))
    jx, tx, jh, th = _j(x, True), _t(x, True), _j(h0, True), _t(h0, True)
    lstm = kind == "LSTM"
    jhx = (jh, jh * 0.5) if lstm else jh
    thx = (th, th * 0.5) if lstm else th
    jp = R.pack_padded_sequence(jx, lengths, batch_first, enforce_sorted)
    tp = TR.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    jo, jhn = jm(jp, jhx)
    to, thn = tm(tp, thx)
    assert isinstance(jo, R.PackedSequence)
    _close(jo.data, to.data)
    assert jo.batch_sizes.tolist() == to.batch_sizes.tolist()
    jstates = jhn if lstm else (jhn,)
    tstates = thn if lstm else (thn,)
    for a, b in zip(jstates, tstates):
        _close(a, b)  # each sequence's state at its own last step, original batch order
    jpad, _ = R.pad_packed_sequence(jo, batch_first)
    tpad, _ = TR.pad_packed_sequence(to, batch_first)
    w = rng.standard_normal(jpad.shape)
    jloss = (jpad * _j(w)).sum() + sum((s * (i + 1)).sum() for i, s in enumerate(jstates))
    tloss = (tpad * _t(w)).sum() + sum((s * (i + 1)).sum() for i, s in enumerate(tstates))
    jloss.backward()
    tloss.backward()
    _close(jx.grad, tx.grad, 1e-9)
    _close(jh.grad, th.grad, 1e-9)
    for (_, p), (_, q) in zip(jm.named_parameters(), tm.named_parameters()):
        _close(p.grad, q.grad, 1e-9)


def test_packed_input_without_initial_state_and_errors():
    jm, tm = _pair("GRU", 1, False, False, from_torch=True)
    x = np.random.default_rng(4).standard_normal((4, 3, 3))
    jp = R.pack_padded_sequence(_j(x), [4, 2, 1])
    tp = TR.pack_padded_sequence(_t(x), [4, 2, 1])
    jo, jh = jm(jp)
    to, th = tm(tp)
    _close(jo.data, to.data)
    _close(jh, th)
    _errors(lambda: jm(jp, jitgrad.zeros(1, 4, 5, dtype=jitgrad.float64)),
            lambda: tm(tp, torch.zeros(1, 4, 5, dtype=torch.float64)))
    jl, tl = _pair("LSTM", 1, False, False, from_torch=True)
    bad_c = (jitgrad.zeros(1, 3, 5, dtype=jitgrad.float64),
             jitgrad.zeros(1, 2, 5, dtype=jitgrad.float64))
    bad_ct = (torch.zeros(1, 3, 5, dtype=torch.float64),
              torch.zeros(1, 2, 5, dtype=torch.float64))
    # PyTorch's LSTM skips its size check on packed input (a broadcast fails in its
    # kernel); jitgrad checks as for padded input, with PyTorch's messages of that path
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 3, 5\), got "
                                           r"\[1, 2, 5\]"):
        jl(jp, bad_c)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 5\), got "
                                           r"\[1, 2, 5\]"):
        jl(jp, bad_c[::-1])
    _errors(lambda: jl(jitgrad.zeros(4, 3, 3, dtype=jitgrad.float64), bad_c),
            lambda: tl(torch.zeros(4, 3, 3, dtype=torch.float64), bad_ct))


def test_rnn_base_names_and_flat_weights():
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    t = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert isinstance(m, nn.RNNBase) and isinstance(nn.GRUCell(2, 3), nn.RNNCellBase)
    assert m._flat_weights_names == t._flat_weights_names
    assert [[tuple(p.shape) for p in ws] for ws in m.all_weights] == \
        [[tuple(p.shape) for p in ws] for ws in t.all_weights]
    m.flatten_parameters()
    base = nn.RNNBase("GRU", 3, 4)
    assert [k for k, _ in base.named_parameters()] == \
        [k for k, _ in torch.nn.RNNBase("GRU", 3, 4).named_parameters()]
    _errors(lambda: nn.RNNBase("XYZ", 3, 4), lambda: torch.nn.RNNBase("XYZ", 3, 4))
    cell = nn.RNNCellBase(3, 4, True, 2)
    tcell = torch.nn.RNNCellBase(3, 4, True, 2)
    assert [(k, tuple(p.shape)) for k, p in cell.named_parameters()] == \
        [(k, tuple(p.shape)) for k, p in tcell.named_parameters()]
    assert repr(nn.RNNCell(3, 4, bias=False, nonlinearity="relu")) == \
        repr(torch.nn.RNNCell(3, 4, bias=False, nonlinearity="relu"))


class _Tagger:
    """The NLP tutorial's model (embedding -> pack -> LSTM -> unpack -> linear) in either
    library."""

    def __init__(self, M, R_):
        self.M, self.R = M, R_
        self.emb = M.nn.Embedding(12, 4, padding_idx=0, dtype=M.float64)
        self.lstm = M.nn.LSTM(4, 6, batch_first=True, bidirectional=True, dtype=M.float64)
        self.out = M.nn.Linear(12, 3, dtype=M.float64)

    def modules(self):
        return [self.emb, self.lstm, self.out]

    def __call__(self, tokens, lengths):
        packed = self.R.pack_padded_sequence(self.emb(tokens), lengths, batch_first=True,
                                             enforce_sorted=False)
        out, (h, _) = self.lstm(packed)
        padded, _ = self.R.pad_packed_sequence(out, batch_first=True, total_length=5)
        return self.out(padded), h


def test_nlp_tutorial_training_step_matches_torch():
    j, t = _Tagger(jitgrad, R), _Tagger(torch, TR)
    for jm, tm in zip(j.modules(), t.modules()):
        tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in jm.state_dict().items()})
    tokens = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5], [7, 0, 0, 0, 0], [8, 9, 10, 0, 0]])
    lengths = [3, 5, 1, 3]
    targets = np.array([[0, 1, 2, 0, 0], [1, 1, 2, 0, 1], [2, 0, 0, 0, 0], [0, 0, 1, 0, 0]])
    mask = (np.arange(5)[None] < np.array(lengths)[:, None]).astype(np.float64)
    jopt = jitgrad.optim.SGD([p for m in j.modules() for p in m.parameters()], lr=0.5)
    topt = torch.optim.SGD([p for m in t.modules() for p in m.parameters()], lr=0.5)
    for _ in range(3):
        for M, model, opt in ((jitgrad, j, jopt), (torch, t, topt)):
            logits, h = model(M.tensor(tokens), lengths)
            losses = M.nn.functional.cross_entropy(logits.reshape(-1, 3),
                                                   M.tensor(targets.reshape(-1)),
                                                   reduction="none")
            loss = (losses * M.tensor(mask.reshape(-1))).sum() + h.pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        for jm, tm in zip(j.modules(), t.modules()):
            for (_, p), (_, q) in zip(jm.named_parameters(), tm.named_parameters()):
                _close(p, q, 1e-9)


@pytest.mark.skipif(not jitgrad.cuda.is_available(), reason="no CUDA")
def test_packed_lstm_on_cuda_equals_cpu():
    jitgrad.manual_seed(0)
    m = nn.LSTM(2, 3, bidirectional=True)
    x = np.random.default_rng(5).standard_normal((3, 2, 2)).astype(np.float32)
    outs = []
    for device in ("cpu", "cuda"):
        xd = jitgrad.tensor(x, device=device, requires_grad=True)
        md = m.to(device)
        packed = R.pack_padded_sequence(xd, jitgrad.tensor([1, 3]), enforce_sorted=False)
        out, (h, c) = md(packed)
        assert out.data.device.type == device and out.batch_sizes.device.type == "cpu"
        padded, _ = R.pad_packed_sequence(out)
        (padded.sum() + h.sum()).backward()
        outs.append((padded.detach().cpu().numpy(), h.detach().cpu().numpy(),
                     xd.grad.cpu().numpy()))
        m.zero_grad()
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
