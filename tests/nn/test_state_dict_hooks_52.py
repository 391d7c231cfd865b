"""Module state-dict hooks (``register_state_dict_pre_hook`` / ``_post_hook``, the private
``_register_state_dict_hook``, ``register_load_state_dict_pre_hook`` / ``_post_hook`` and the
private ``_register_load_state_dict_pre_hook``), ``state_dict()._metadata``,
``_IncompatibleKeys`` and ``Module.share_memory``, with PyTorch 2.13's semantics.

The tests without PyTorch assert concrete values; those with it (``importorskip``) run the same
script on both libraries and compare what the hooks saw."""

from __future__ import annotations

import copy
import doctest
import inspect
import pickle

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn
from jitgrad.nn import state_dict as sd_module
from jitgrad.nn.hooks import RemovableHandle
from jitgrad.nn.state_dict import IncompatibleKeys, _IncompatibleKeys


def _net(M):
    """``Sequential(Linear, Sequential(Linear))``: modules "", "0", "1", "1.0"."""
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(2, 3), M.nn.Sequential(M.nn.Linear(3, 1)))


def _instrument(net, log: list) -> list:
    """One hook of each public kind on every module of ``net``, each logging what it saw;
    returns the handles."""
    handles = []
    for name, m in net.named_modules():
        handles.append(m.register_state_dict_pre_hook(
            lambda mod, prefix, keep_vars, name=name: log.append(
                ("pre", name, prefix, keep_vars))))
        handles.append(m.register_state_dict_post_hook(
            lambda mod, sd, prefix, md, name=name: log.append(
                ("post", name, prefix, dict(md), list(sd)))))
        handles.append(m.register_load_state_dict_pre_hook(
            lambda mod, sd, prefix, md, strict, mk, uk, em, name=name: log.append(
                ("load_pre", name, prefix, dict(md), strict, sorted(sd), list(mk), list(uk),
                 list(em)))))
        handles.append(m.register_load_state_dict_post_hook(
            lambda mod, ik, name=name: log.append(
                ("load_post", name, type(ik).__name__, list(ik.missing_keys),
                 list(ik.unexpected_keys)))))
    return handles


def _to_jitgrad(sd):
    """A PyTorch state dict as jitgrad tensors (``_metadata`` kept)."""
    out = type(sd)((k, jitgrad.tensor(v.numpy())) for k, v in sd.items())
    if hasattr(sd, "_metadata"):
        out._metadata = sd._metadata
    return out


# ------------------------------------------------------------------ _IncompatibleKeys
def test_incompatible_keys_class_name_alias_and_repr():
    assert IncompatibleKeys is _IncompatibleKeys
    r = jnn.Linear(2, 2).load_state_dict(jnn.Linear(2, 2).state_dict())
    assert type(r).__name__ == "_IncompatibleKeys" and type(r) is _IncompatibleKeys
    assert repr(r) == str(r) == "<All keys matched successfully>"
    assert r == ([], []) and r.missing_keys == [] and r.unexpected_keys == []
    r = jnn.Linear(2, 2).load_state_dict({"weight": jitgrad.ones(2, 2), "x": jitgrad.ones(1)},
                                         strict=False)
    assert repr(r) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['x'])"
    assert doctest.testmod(sd_module).failed == 0


# ------------------------------------------------------------------ state_dict hooks
def test_state_dict_metadata_and_hook_order_across_nested_modules():
    net, log = _net(jitgrad), []
    _instrument(net, log)
    sd = net.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.0.weight", "1.0.bias"]
    assert sd._metadata == {"": {"version": 1}, "0": {"version": 1}, "1": {"version": 1},
                            "1.0": {"version": 1}}
    v = {"version": 1}
    assert log == [
        ("pre", "", "", False),
        ("pre", "0", "0.", False),
        ("post", "0", "0.", v, ["0.weight", "0.bias"]),
        ("pre", "1", "1.", False),
        ("pre", "1.0", "1.0.", False),
        ("post", "1.0", "1.0.", v, list(sd)),
        ("post", "1", "1.", v, list(sd)),
        ("post", "", "", v, list(sd)),
    ]
    log.clear()
    net.state_dict(prefix="m.", keep_vars=True)
    assert log[0] == ("pre", "", "m.", True) and log[-1] == ("post", "", "m.", v,
                                                             ["m.0.weight", "m.0.bias",
                                                              "m.1.0.weight", "m.1.0.bias"])
    assert ("pre", "1.0", "m.1.0.", True) in log


def test_keep_vars_and_a_given_destination():
    net = _net(jitgrad)
    kept = net.state_dict(keep_vars=True)
    assert kept["0.weight"] is net[0].weight and kept["0.weight"].requires_grad
    plain = net.state_dict()
    assert plain["0.weight"] is not net[0].weight and not plain["0.weight"].requires_grad
    dest: dict = {}
    assert net.state_dict(destination=dest) is dest and not hasattr(dest, "_metadata")
    assert list(dest) == list(plain)


def test_post_hook_edits_in_place_and_must_return_none():
    m = jnn.Linear(2, 2)

    def add_key(mod, sd, prefix, md):
        sd[prefix + "extra"] = jitgrad.zeros(1)

    h = m.register_state_dict_post_hook(add_key)
    assert isinstance(h, RemovableHandle) and add_key._from_public_api is True
    assert list(m.state_dict()) == ["weight", "bias", "extra"]
    h.remove()
    assert list(m.state_dict()) == ["weight", "bias"]
    m.register_state_dict_post_hook(lambda mod, sd, prefix, md: {})
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        m.state_dict()
    with pytest.raises(RuntimeError, match="Cannot register the same function as the state "
                                           "dict post hook"):
        m._register_state_dict_hook(add_key)


def test_private_state_dict_hook_replacement_reaches_the_caller_only_from_the_root():
    net = _net(jitgrad)
    net[1]._register_state_dict_hook(lambda mod, sd, prefix, md: {"ignored": 1})
    assert list(net.state_dict()) == ["0.weight", "0.bias", "1.0.weight", "1.0.bias"]
    seen = []
    net._register_state_dict_hook(lambda mod, sd, prefix, md: {"new": len(sd)})
    net._register_state_dict_hook(lambda mod, sd, prefix, md: seen.append(dict(sd)))
    assert net.state_dict() == {"new": 4}
    assert seen == [{"new": 4}]  # later hooks see the replacement


def test_hooks_run_in_registration_order_and_handles_remove_them():
    m, log = jnn.Linear(1, 1), []
    h1 = m.register_state_dict_pre_hook(lambda *a: log.append(1))
    h2 = m.register_state_dict_pre_hook(lambda *a: log.append(2))
    m.state_dict()
    assert log == [1, 2]
    h1.remove()
    h1.remove()  # a second remove is a no-op
    log.clear()
    m.state_dict()
    assert log == [2]
    with h2:
        pass  # leaving the block removes it
    log.clear()
    m.state_dict()
    assert log == [] and not m._state_dict_pre_hooks
    for name in ("register_state_dict_pre_hook", "register_state_dict_post_hook",
                 "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook"):
        with pytest.raises(TypeError):  # no ``prepend`` in PyTorch 2.13 either
            getattr(m, name)(lambda *a: None, prepend=True)


# -------------------------------------------------------------- load_state_dict hooks
def test_load_hook_order_prefixes_and_what_they_see():
    net, log = _net(jitgrad), []
    sd = net.state_dict()
    _instrument(net, log)
    sd = copy.copy(sd)
    del sd["1.0.bias"]
    sd["zzz"] = sd["0.bias"]
    r = net.load_state_dict(sd, strict=False)
    assert r == (["1.0.bias"], ["zzz"])
    v = {"version": 1}
    all_keys = ["0.bias", "0.weight", "1.0.weight", "zzz"]
    assert log == [
        ("load_pre", "", "", v, True, all_keys, [], [], []),
        ("load_pre", "0", "0.", v, True, ["0.bias", "0.weight"], [], ["zzz"], []),
        ("load_post", "0", "_IncompatibleKeys", [], ["zzz"]),
        ("load_pre", "1", "1.", v, True, ["1.0.weight"], [], ["zzz"], []),
        ("load_pre", "1.0", "1.0.", v, True, ["1.0.weight"], [], ["zzz"], []),
        ("load_post", "1.0", "_IncompatibleKeys", ["1.0.bias"], ["zzz"]),
        ("load_post", "1", "_IncompatibleKeys", ["1.0.bias"], ["zzz"]),
        ("load_post", "", "_IncompatibleKeys", ["1.0.bias"], ["zzz"]),
    ]
    plain = dict(net.state_dict())  # no _metadata: empty local_metadata
    log.clear()
    net.load_state_dict(plain)
    assert log[0][:5] == ("load_pre", "", "", {}, True)
    sd = net.state_dict()
    log.clear()
    net.load_state_dict(sd, assign=True)
    assert log[0][3] == {"version": 1, "assign_to_params_buffers": True}
    assert sd._metadata[""] == log[0][3]  # PyTorch writes the flag into the metadata too


def test_load_pre_hook_rewrites_the_incoming_state_dict():
    old = {"0.w": jitgrad.ones(3, 2), "0.b": jitgrad.zeros(3),
           "1.0.w": jitgrad.ones(1, 3), "1.0.b": jitgrad.zeros(1)}

    def rename(mod, sd, prefix, md, strict, mk, uk, em):
        for k in [k for k in sd if k.startswith(prefix)]:
            stem, _, leaf = k.rpartition(".")
            sd[stem + "." + {"w": "weight", "b": "bias"}[leaf]] = sd.pop(k)

    net = _net(jitgrad)
    net.register_load_state_dict_pre_hook(rename)  # on the root: children see the result
    assert repr(net.load_state_dict(old)) == "<All keys matched successfully>"
    assert set(old) == {"0.w", "0.b", "1.0.w", "1.0.b"}  # the caller's dict is untouched
    assert net[0].weight.tolist() == [[1.0, 1.0]] * 3 and net[1][0].bias.tolist() == [0.0]


def test_private_load_pre_hook_with_and_without_module():
    m, seen = jnn.Linear(1, 1), []
    m._register_load_state_dict_pre_hook(lambda *a: seen.append(("plain", len(a))))
    m._register_load_state_dict_pre_hook(lambda *a: seen.append(("mod", a[0] is m, len(a))),
                                         with_module=True)
    m.load_state_dict(m.state_dict())
    assert seen == [("plain", 7), ("mod", True, 8)]


def test_load_pre_hook_error_msgs_are_raised():
    m = jnn.Linear(1, 1)
    m.register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, md, strict, mk, uk, em: em.append("custom problem"))
    with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict for Linear:\n"
                                           "\tcustom problem"):
        m.load_state_dict(m.state_dict(), strict=False)


def test_post_hook_editing_incompatible_keys_decides_strictness():
    m = jnn.Linear(2, 2)
    partial = {"weight": jitgrad.ones(2, 2)}
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        m.load_state_dict(partial)

    def forgive(mod, ik):
        ik.missing_keys.clear()
        ik.unexpected_keys.clear()

    h = m.register_load_state_dict_post_hook(forgive)
    r = m.load_state_dict({**partial, "junk": jitgrad.ones(1)})
    assert repr(r) == "<All keys matched successfully>" and m.weight.tolist() == [[1.0] * 2] * 2
    h.remove()
    m.register_load_state_dict_post_hook(lambda mod, ik: ik.unexpected_keys.append("made.up"))
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(m.state_dict())
    assert str(e.value) == ('Error(s) in loading state_dict for Linear:\n\tUnexpected key(s) '
                            'in state_dict: "made.up". ')
    assert m.load_state_dict(m.state_dict(), strict=False) == ([], ["made.up"])


def test_load_post_hook_must_return_none():
    m = jnn.Linear(1, 1)
    m.register_load_state_dict_post_hook(lambda mod, ik: ik)
    with pytest.raises(AssertionError, match="are not expected to return new values"):
        m.load_state_dict(m.state_dict())


def test_batchnorm_upgrade_still_runs_before_the_pre_hooks():
    bn, seen = jnn.BatchNorm1d(2), []
    bn.register_load_state_dict_pre_hook(lambda mod, sd, *a: seen.append(sorted(sd)))
    sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    assert repr(bn.load_state_dict(sd)) == "<All keys matched successfully>"
    assert seen == [["bias", "num_batches_tracked", "running_mean", "running_var", "weight"]]


# ------------------------------------------------------------ copies, pickles, misc
def _module_level_pre_hook(module, sd, prefix, md, strict, mk, uk, em):
    module.loads_seen = getattr(module, "loads_seen", 0) + 1


def test_deepcopy_and_pickle_keep_the_hooks_bound_to_the_copy():
    m = jnn.Linear(1, 1)
    m.register_load_state_dict_pre_hook(_module_level_pre_hook)
    for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        c.load_state_dict(c.state_dict())
        assert c.loads_seen == 1 and not hasattr(m, "loads_seen")


def test_unpickling_a_module_without_the_hook_dicts():
    m = jnn.Linear(1, 1)
    state = m.__getstate__()
    for name in ("_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                 "_load_state_dict_post_hooks"):
        del state[name]
    old = jnn.Linear.__new__(jnn.Linear)
    old.__setstate__(state)
    assert list(old.state_dict()) == ["weight", "bias"]
    old.register_load_state_dict_post_hook(lambda mod, ik: None)
    assert repr(old.load_state_dict(m.state_dict())) == "<All keys matched successfully>"


def test_share_memory_returns_self_and_keeps_the_tensors():
    net = _net(jitgrad)
    params = list(net.parameters())
    values = [p.tolist() for p in params]
    assert net.share_memory() is net
    assert all(a is b for a, b in zip(net.parameters(), params))
    assert [p.tolist() for p in net.parameters()] == values


def test_existing_round_trip_and_error_messages_unchanged():
    a, b = _net(jitgrad), _net(jitgrad)
    with jitgrad.no_grad():
        for p in b.parameters():
            p.zero_()
    assert b.load_state_dict(a.state_dict()) == ([], [])
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=k)
    with pytest.raises(RuntimeError) as e:
        b.load_state_dict({"0.weight": jitgrad.ones(2, 2), "q": jitgrad.ones(1)})
    assert str(e.value) == (
        'Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in state_dict: '
        '"0.bias", "1.0.weight", "1.0.bias". \n\tUnexpected key(s) in state_dict: "q". \n\t'
        "size mismatch for 0.weight: copying a param with shape jitgrad.Size([2, 2]) from "
        "checkpoint, the shape in current model is jitgrad.Size([3, 2]).")
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        b.load_state_dict([1])


# ------------------------------------------------------------------ against PyTorch
def _script(M) -> list:
    """Run the hook scenarios on library ``M``; returns everything the hooks saw."""
    log: list = []
    net = _net(M)
    handles = _instrument(net, log)
    sd = net.state_dict()
    log.append(("metadata", dict(sd._metadata), list(sd)))
    sd2 = copy.copy(sd)
    del sd2["1.0.bias"]
    sd2["zzz"] = sd2["0.bias"]
    r = net.load_state_dict(sd2, strict=False)
    log.append(("result", type(r).__name__, repr(r)))
    r = net.load_state_dict(sd, assign=True)
    log.append(("result", type(r).__name__, repr(r)))
    net.state_dict(prefix="p.", keep_vars=True)
    for h in handles[::2]:
        h.remove()
    net.state_dict()
    net.load_state_dict(dict(net.state_dict()))

    def forgive(mod, ik):
        log.append(("forgive", list(ik.missing_keys), list(ik.unexpected_keys)))
        ik.missing_keys.clear()
        ik.unexpected_keys.clear()

    net[1].register_load_state_dict_post_hook(forgive)
    r = net.load_state_dict({"0.weight": sd["0.weight"], "1.extra": sd["0.bias"]})
    log.append(("result", repr(r)))
    net[1].register_load_state_dict_post_hook(
        lambda mod, ik: ik.unexpected_keys.append("added"))
    try:
        net.load_state_dict(sd)
    except RuntimeError as e:
        log.append(("error", str(e)))
    net._register_state_dict_hook(lambda mod, d, prefix, md: {"replaced": len(d)})
    log.append(("private", dict(net.state_dict())))
    return log


def test_hooks_see_what_pytorch_hooks_see():
    torch = pytest.importorskip("torch")
    assert _script(jitgrad) == _script(torch)


def test_same_signatures_as_pytorch():
    torch = pytest.importorskip("torch")
    for name in ("register_state_dict_pre_hook", "register_state_dict_post_hook",
                 "_register_state_dict_hook", "register_load_state_dict_pre_hook",
                 "_register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
                 "share_memory", "state_dict", "load_state_dict", "_save_to_state_dict",
                 "_load_from_state_dict"):
        ours = inspect.signature(getattr(jnn.Module, name)).parameters
        theirs = inspect.signature(getattr(torch.nn.Module, name)).parameters
        ours = [(p.name, p.kind, p.default) for p in ours.values()]
        theirs = [(p.name, p.kind, p.default) for p in theirs.values()
                  if p.kind is not p.VAR_POSITIONAL]  # state_dict's deprecated *args
        assert ours == theirs, name


def test_errors_match_pytorch():
    torch = pytest.importorskip("torch")

    def run(M) -> list:
        out = []
        m = M.nn.Linear(1, 1)
        m.register_state_dict_post_hook(lambda mod, sd, prefix, md: 1)
        try:
            m.state_dict()
        except RuntimeError as e:
            out.append(str(e))

        def hook(mod, sd, prefix, md):
            return None

        m.register_state_dict_post_hook(hook)
        try:
            m._register_state_dict_hook(hook)
        except RuntimeError as e:
            out.append(str(e))
        m = M.nn.Linear(1, 1)
        m.register_load_state_dict_post_hook(lambda mod, ik: ik)
        try:
            m.load_state_dict(m.state_dict())
        except AssertionError as e:
            out.append(str(e))
        return out

    ours, theirs = run(jitgrad), run(torch)
    assert len(ours) == 3 and ours == theirs


def test_pytorch_metadata_reaches_the_hooks_and_deepcopy_binds_to_the_copy():
    torch = pytest.importorskip("torch")

    def run(M, sd) -> list:
        seen: list = []
        net = _net(M)
        for name, m in net.named_modules():
            m.register_load_state_dict_pre_hook(
                lambda mod, d, prefix, md, *a, name=name: seen.append((name, dict(md))))
        net[0].register_load_state_dict_post_hook(
            lambda mod, ik: seen.append(("post", type(mod).__name__)))
        c = copy.deepcopy(net)
        c[1]._load_state_dict_pre_hooks.clear()
        c.load_state_dict(sd)
        seen.append(("net untouched", net[0].weight.sum().item() != 7.0))
        return seen

    tsd = _net(torch).state_dict()
    tsd._metadata[""]["custom"] = "x"
    jsd = _to_jitgrad(tsd)
    assert run(jitgrad, jsd) == run(torch, tsd)


def test_share_memory_matches_pytorch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        net = _net(M)
        ids = [id(p) for p in net.parameters()]
        assert net.share_memory() is net and [id(p) for p in net.parameters()] == ids
