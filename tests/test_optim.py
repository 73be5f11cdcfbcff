"""LeanAdam is torch's Adam on a shorter path: same numbers, same state, same checkpoints."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

from super_sac.nets.mlps import MLP, mlp
from super_sac.optim import LeanAdam


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))


def _loss(net: nn.Module, step: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(16, 3, generator=gen)
    return net(x).pow(2).mean()


def _train(net: nn.Module, opt: torch.optim.Optimizer, steps: range) -> None:
    for t in steps:
        opt.zero_grad()
        _loss(net, t).backward()
        opt.step()


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_lean_adam_matches_torch_adam(weight_decay: float) -> None:
    ref, lean = _net(), _net()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2, weight_decay=weight_decay)
    lean_opt = LeanAdam(lean.parameters(), lr=1e-2, weight_decay=weight_decay)
    _train(ref, ref_opt, range(5))
    _train(lean, lean_opt, range(5))
    assert lean_opt._cache is not None  # the later steps took the short path
    # a learning-rate change (a schedule) is read at every step
    for opt in (ref_opt, lean_opt):
        opt.param_groups[0]["lr"] = 3e-3
    _train(ref, ref_opt, range(5, 10))
    _train(lean, lean_opt, range(5, 10))
    for p, q in zip(ref.parameters(), lean.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)
    for p, q in zip(ref.parameters(), lean.parameters()):
        assert float(lean_opt.state[q]["step"]) == float(ref_opt.state[p]["step"]) == 10.0
        torch.testing.assert_close(lean_opt.state[q]["exp_avg_sq"], ref_opt.state[p]["exp_avg_sq"])


def test_lean_adam_first_step_by_hand() -> None:
    """One step from zero moments moves every weight by ``lr * g / (|g| + eps)``."""
    w = nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = LeanAdam([w], lr=0.1, eps=1e-8)
    w.grad = torch.tensor([0.5, -4.0, 0.0])
    opt.step()
    torch.testing.assert_close(w.detach(), torch.tensor([0.9, -1.9, 0.5]))
    # second step, by hand: m = 0.1 g2 + 0.09 g1, v = 0.001 g2^2 + 0.000999 g1^2
    g1, g2 = torch.tensor([0.5, -4.0, 0.0]), torch.tensor([1.0, 1.0, 1.0])
    w.grad = g2.clone()
    opt.step()
    m = 0.1 * g2 + 0.9 * 0.1 * g1
    v = 0.001 * g2**2 + 0.999 * 0.001 * g1**2
    m_hat, v_hat = m / (1 - 0.9**2), v / (1 - 0.999**2)
    expected = torch.tensor([0.9, -1.9, 0.5]) - 0.1 * m_hat / (v_hat.sqrt() + 1e-8)
    torch.testing.assert_close(w.detach(), expected)


def test_lean_adam_state_dict_round_trip_continues_exactly() -> None:
    a, b = _net(), _net()
    opt_a = LeanAdam(a.parameters(), lr=1e-2)
    _train(a, opt_a, range(4))
    saved_state = opt_a.state_dict()["state"]
    # the live parameters share one step counter; a checkpoint gets one tensor per parameter
    assert len({id(s["step"]) for s in opt_a.state.values()}) == 1
    assert len({id(s["step"]) for s in saved_state.values()}) == len(saved_state) == 4
    buf = io.BytesIO()
    torch.save({"net": a.state_dict(), "opt": opt_a.state_dict()}, buf)

    def load() -> dict:  # a fresh copy each time: loaded optimizers must not share tensors
        buf.seek(0)
        return torch.load(buf)

    saved = load()
    b.load_state_dict(saved["net"])
    opt_b = LeanAdam(b.parameters(), lr=1e-2)
    opt_b.load_state_dict(saved["opt"])
    assert opt_b._cache is not None  # rebuilt from the loaded state
    # torch's own Adam reads the same checkpoint
    c = _net()
    saved = load()
    c.load_state_dict(saved["net"])
    opt_c = torch.optim.Adam(c.parameters(), lr=1e-2)
    opt_c.load_state_dict(saved["opt"])
    for net, opt in ((a, opt_a), (b, opt_b), (c, opt_c)):
        _train(net, opt, range(4, 8))
    for p, q, r in zip(a.parameters(), b.parameters(), c.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)
        torch.testing.assert_close(r, p, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_lean_adam_copied_with_its_network_continues_exactly(how: str) -> None:
    net = _net()
    opt = LeanAdam(net.parameters(), lr=1e-2)
    _train(net, opt, range(4))
    pair = (net, opt)
    net2, opt2 = pickle.loads(pickle.dumps(pair)) if how == "pickle" else copy.deepcopy(pair)
    assert opt2._cache is not None  # the short path is rebuilt over the copied tensors
    assert set(opt2.state) == set(net2.parameters())
    _train(net, opt, range(4, 8))
    _train(net2, opt2, range(4, 8))
    for p, q in zip(net.parameters(), net2.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)
        assert float(opt2.state[q]["step"]) == 8.0  # one count per step, not one per parameter


def test_lean_adam_skips_parameters_without_gradient_like_torch() -> None:
    ref, lean = _net(), _net()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    lean_opt = LeanAdam(lean.parameters(), lr=1e-2)
    _train(ref, ref_opt, range(3))
    _train(lean, lean_opt, range(3))
    for net, opt in ((ref, ref_opt), (lean, lean_opt)):
        opt.zero_grad()
        _loss(net, 3).backward()
        net[2].bias.grad = None  # e.g. a head unused by this loss
        opt.step()
    for p, q in zip(ref.parameters(), lean.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)
    assert float(lean_opt.state[lean[2].bias]["step"]) == 3.0
    assert float(lean_opt.state[lean[0].weight]["step"]) == 4.0


def test_lean_adam_zero_grad() -> None:
    net = _net()
    opt = LeanAdam(net.parameters(), lr=1e-2)
    _loss(net, 0).backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in net.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_mlp_forward_and_names_match_sequential() -> None:
    torch.manual_seed(0)
    net = mlp(5, 3, 16)
    assert isinstance(net, MLP)
    seq = nn.Sequential(*net)
    x = torch.randn(7, 5, requires_grad=True)
    torch.testing.assert_close(net(x), seq(x), rtol=0, atol=0)
    assert list(net.state_dict()) == [
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
        "4.weight",
        "4.bias",
    ]
    grad_a = torch.autograd.grad(net(x).sum(), x)[0]
    grad_b = torch.autograd.grad(seq(x).sum(), x)[0]
    torch.testing.assert_close(grad_a, grad_b)


def test_lean_adam_mixed_dtypes_take_torch_path_with_the_same_result() -> None:
    torch.manual_seed(0)
    a32, a64 = torch.randn(4, requires_grad=True), torch.randn(3, dtype=torch.float64)
    a64.requires_grad_(True)
    b32, b64 = (t.detach().clone().requires_grad_(True) for t in (a32, a64))
    ref = torch.optim.Adam([a32, a64], lr=0.1)
    lean = LeanAdam([b32, b64], lr=0.1)
    for step in range(3):
        for opt, (x, y) in ((ref, (a32, a64)), (lean, (b32, b64))):
            opt.zero_grad()
            (x.pow(2).sum() + y.pow(3).sum() * (step + 1)).backward()
            opt.step()
    assert lean._cache is None  # one fused call cannot take two dtypes
    torch.testing.assert_close(b32, a32)
    torch.testing.assert_close(b64, a64)


def test_mlp_runs_other_modules_as_usual() -> None:
    torch.manual_seed(0)
    net = MLP(nn.Linear(4, 6), nn.Tanh(), nn.ReLU(), nn.Linear(6, 2), nn.ReLU(), nn.Linear(2, 1))
    x = torch.randn(5, 4, requires_grad=True)
    torch.testing.assert_close(net(x), nn.Sequential(*net)(x), rtol=0, atol=0)
    # a ReLU after Tanh must not overwrite the output Tanh's backward needs
    grad = torch.autograd.grad(net(x).sum(), x)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(nn.Sequential(*net)(x).sum(), x)[0])


def test_lean_adam_second_group_ineligible_keeps_first_groups_counts_right() -> None:
    """A fine first group must not be left with a shared step counter when a later group keeps
    the optimizer on torch's path (torch would add 1 to it once per parameter)."""
    torch.manual_seed(0)
    ref_net, lean_net = _net(), _net()
    odd = torch.randn(3, dtype=torch.float64)
    extra = [torch.randn(2).requires_grad_(True), odd.clone().requires_grad_(True)]
    ref_extra = [t.detach().clone().requires_grad_(True) for t in extra]
    ref = torch.optim.Adam([{"params": ref_net.parameters()}, {"params": ref_extra}], lr=1e-2)
    lean = LeanAdam([{"params": lean_net.parameters()}, {"params": extra}], lr=1e-2)
    for t in range(4):
        for net, opt, tensors in ((ref_net, ref, ref_extra), (lean_net, lean, extra)):
            opt.zero_grad()
            (_loss(net, t) + sum(x.pow(2).sum() for x in tensors)).backward()
            opt.step()
    assert lean._cache is None
    for p, q in zip(ref_net.parameters(), lean_net.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-7)
    assert [float(lean.state[q]["step"]) for q in lean_net.parameters()] == [4.0] * 4
