"""The pure losses: m = 2 parity with solo-learn, the O(m) rewrite, gradients, errors (fastssl: its own file)."""

from __future__ import annotations

import inspect

import pytest
import torch
from solo.losses.barlow import barlow_loss_func
from solo.losses.vicreg import vicreg_loss_func
from torch.utils.flop_counter import FlopCounterMode

from mvssl_plugin.losses import leave_one_out_means, multiview_barlow_loss, multiview_vicreg_loss
from mvssl_plugin.losses.objectives import LOSS_SCALE, METHOD_SCALE, OBJECTIVES

#: (objective, redundancy) pairs that are valid together
MODES = [("leave_one_out", "per_view"), ("leave_one_out", "mean_embedding"), ("fastssl", "per_view")]


def views(m: int, n: int = 32, d: int = 16, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=gen)
    return [(base + 0.5 * torch.randn(n, d, generator=gen)).requires_grad_() for _ in range(m)]


def grads(loss: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, inputs))


@pytest.mark.parametrize("lamb,scale", [(5.1e-3, 0.025), (0.02, 1.0), (0.0, 0.1)])
def test_barlow_two_views_equal_solo_learn(lamb, scale):
    z = views(2)
    ours = multiview_barlow_loss(z, lamb=lamb, scale_loss=scale)
    solo = barlow_loss_func(*z, lamb=lamb, scale_loss=scale)
    torch.testing.assert_close(ours, solo, rtol=1e-5, atol=1e-6)
    for g_ours, g_solo in zip(grads(ours, z), grads(solo, z)):
        torch.testing.assert_close(g_ours, g_solo, rtol=1e-4, atol=1e-7)


def test_scale_loss_defaults_are_solo_learns_own():
    """solo-learn's loss function and its method default to different factors; ours follow each."""
    from omegaconf import OmegaConf
    from solo.methods import BarlowTwins

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.methods import MultiAugBarlowTwins

    z = views(2)
    torch.testing.assert_close(multiview_barlow_loss(z, lamb=5e-3), barlow_loss_func(*z, lamb=5e-3))
    assert LOSS_SCALE["leave_one_out"] == inspect.signature(barlow_loss_func).parameters["scale_loss"].default
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain")
    del cfg.method_kwargs["scale_loss"]  # both methods fill in their own default
    solo_cfg = OmegaConf.create(OmegaConf.to_container(cfg))
    solo_cfg.method_kwargs = {"lamb": 0.005, "proj_hidden_dim": 64, "proj_output_dim": 64}
    ours = MultiAugBarlowTwins.add_and_assert_specific_cfg(cfg).method_kwargs.scale_loss
    solo = BarlowTwins.add_and_assert_specific_cfg(solo_cfg).method_kwargs.scale_loss
    assert ours == METHOD_SCALE["leave_one_out"] == solo


@pytest.mark.parametrize("weights", [(25.0, 25.0, 1.0), (10.0, 5.0, 0.3)])
def test_vicreg_two_views_equal_solo_learn(weights):
    z = views(2)
    ours = multiview_vicreg_loss(z, *weights)
    solo = vicreg_loss_func(*z, *weights)
    torch.testing.assert_close(ours, solo, rtol=1e-5, atol=1e-6)
    for g_ours, g_solo in zip(grads(ours, z), grads(solo, z)):
        torch.testing.assert_close(g_ours, g_solo, rtol=1e-4, atol=1e-7)


def naive_barlow(z: list[torch.Tensor], lamb: float, scale: float) -> torch.Tensor:
    """The definition, view by view, with solo-learn's two-view function on (view, mean of others)."""
    bn = torch.nn.BatchNorm1d(z[0].shape[1], affine=False)
    s = [bn(v) for v in z]
    losses = []
    for i in range(len(z)):
        others = torch.stack([s[j] for j in range(len(z)) if j != i]).mean(0)
        corr = s[i].T @ others / s[i].shape[0]
        diag = torch.eye(corr.shape[0])
        cdif = (corr - diag).pow(2)
        losses.append(scale * (cdif * diag + lamb * cdif * (1 - diag)).sum())
    return torch.stack(losses).mean()


def naive_vicreg(z: list[torch.Tensor], sim: float, var: float, cov: float) -> torch.Tensor:
    """The definition view by view; solo-learn's pair terms on (z_i, z_i) are 2x one view's, the scale kept."""
    from solo.losses.vicreg import covariance_loss, variance_loss

    total = []
    for i in range(len(z)):
        others = torch.stack([z[j] for j in range(len(z)) if j != i]).mean(0)
        mse = torch.nn.functional.mse_loss(z[i], others)
        total.append(sim * mse + var * variance_loss(z[i], z[i]) + cov * covariance_loss(z[i], z[i]))
    return torch.stack(total).mean()


@pytest.mark.parametrize("m", [3, 4, 8])
def test_barlow_matches_its_definition(m):
    z = views(m, seed=m)
    ours = multiview_barlow_loss(z, lamb=0.01, scale_loss=0.5)
    torch.testing.assert_close(ours, naive_barlow(z, 0.01, 0.5), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m", [3, 4, 8])
def test_vicreg_matches_its_definition(m):
    z = views(m, seed=m)
    ours = multiview_vicreg_loss(z, 25.0, 25.0, 0.5)
    torch.testing.assert_close(ours, naive_vicreg(z, 25.0, 25.0, 0.5), rtol=1e-5, atol=1e-6)


def test_leave_one_out_means():
    z = torch.arange(24.0).reshape(4, 3, 2)
    expected = torch.stack([torch.cat([z[:i], z[i + 1 :]]).mean(0) for i in range(4)])
    torch.testing.assert_close(leave_one_out_means(z), expected)


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
@pytest.mark.parametrize("objective,redundancy", MODES)
@pytest.mark.parametrize("m", [2, 4, 8])
def test_every_view_gets_a_finite_nonzero_gradient(loss_fn, objective, redundancy, m):
    z = views(m)
    loss = loss_fn(z, redundancy=redundancy, objective=objective)
    assert torch.isfinite(loss)
    for g in grads(loss, z):
        assert torch.isfinite(g).all() and g.abs().sum() > 0


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_agreeing_views_cost_less(loss_fn, objective):
    """The invariance term rewards views that agree: identical views beat noisy ones."""
    noisy = [v.detach() for v in views(4)]
    same = [noisy[0]] * 4
    assert loss_fn(same, objective=objective) < loss_fn(noisy, objective=objective)


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
@pytest.mark.parametrize("objective,redundancy", MODES)
def test_cost_is_linear_in_views(loss_fn, objective, redundancy):
    """FLOPs per view are constant across m: the rewrite never forms m^2 view pairs."""
    per_view = []
    for m in (2, 4, 8, 16):
        z = views(m, n=64, d=32)
        with FlopCounterMode(display=False) as counter:
            loss_fn(z, redundancy=redundancy, objective=objective).backward()
        per_view.append(counter.get_total_flops() / m)
    if objective == "fastssl":  # the release has a separate, cheaper m = 2 form: compare m >= 4
        per_view = per_view[1:]
    if redundancy == "per_view" and not (objective == "fastssl" and loss_fn is multiview_barlow_loss):
        assert max(per_view) == pytest.approx(min(per_view), rel=1e-9)
    else:  # one shared D x D matrix on top of linear per-view work: FLOPs/m must not grow
        assert all(later <= earlier for earlier, later in zip(per_view, per_view[1:]))


def test_mean_redundancy_is_cheaper_per_view():
    z = views(8, n=64, d=128)
    flops = {}
    for mode in ("per_view", "mean_embedding"):
        with FlopCounterMode(display=False) as counter:
            multiview_barlow_loss(z, redundancy=mode)
        flops[mode] = counter.get_total_flops()
    assert flops["mean_embedding"] < flops["per_view"] / 4


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
def test_mean_is_a_deprecated_alias_of_mean_embedding(loss_fn):
    z = views(4)
    with pytest.warns(FutureWarning, match="mean_embedding"):
        old = loss_fn(z, redundancy="mean")
    assert torch.equal(old, loss_fn(z, redundancy="mean_embedding"))


@pytest.mark.parametrize("loss_fn", [multiview_barlow_loss, multiview_vicreg_loss])
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_float64_stays_float64_and_half_precision_becomes_float32(loss_fn, objective):
    z = torch.stack([v.detach() for v in views(3)])
    assert loss_fn(z.double(), objective=objective).dtype == torch.float64
    assert loss_fn(z.bfloat16(), objective=objective).dtype == torch.float32


@pytest.mark.parametrize(
    "bad,message",
    [
        ([torch.randn(8, 4)], "at least 2 views"),
        ([torch.randn(8, 4), torch.randn(8, 5)], "same shape"),
        ([torch.randn(1, 4), torch.randn(1, 4)], "at least 2 images"),
        (torch.randn(8, 4), r"\(m, N, D\)"),
    ],
)
def test_bad_views_are_rejected(bad, message):
    for loss_fn in (multiview_barlow_loss, multiview_vicreg_loss):
        with pytest.raises(ValueError, match=message):
            loss_fn(bad)


def test_bad_weights_are_rejected():
    z = views(2)
    with pytest.raises(ValueError, match="lamb"):
        multiview_barlow_loss(z, lamb=-0.1)
    with pytest.raises(ValueError, match="cov_loss_weight"):
        multiview_vicreg_loss(z, cov_loss_weight=-1.0)
    with pytest.raises(ValueError, match="redundancy"):
        multiview_barlow_loss(z, redundancy="pairs")
    with pytest.raises(ValueError, match="objective"):
        multiview_vicreg_loss(z, objective="pairs")
