"""The beta rule against the authors' released numbers, its multi-view factors, the VICReg
weight mapping (checked against solo-learn). ``auto`` in a config: tests/config/test_beta.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from solo.losses.vicreg import vicreg_loss_func

from mvssl_plugin import beta_rule as beta
from mvssl_plugin.losses import multiview_vicreg_loss
from mvssl_plugin.losses.objectives import OBJECTIVES

# ----------------------------------------------------------------------------- constants vs release


def test_module_imports_no_framework():
    source = open(beta.__file__).read()
    assert "import torch" not in source and "omegaconf" not in source


def test_barlow_c_is_the_fit_to_the_authors_sweep():
    assert beta.geometric_mean_c(beta.AUTHORS_CIFAR10_BEST_LAMBDA) == pytest.approx(beta.BARLOW_TWINS_C, abs=0.05)


def test_barlow_rule_lands_within_the_sweeps_spread():
    """beta(d) stays within a factor 2.5 of the authors' best lambda at every swept d."""
    for d, best in beta.AUTHORS_CIFAR10_BEST_LAMBDA.items():
        assert 1 / 2.5 < beta.beta_for_projector(d, beta.BARLOW_TWINS_C) / best < 2.5


def test_barlow_release_tables_agree():
    for (d, m), lam in beta.RELEASED_MULTIVIEW_BARLOW_LAMBDA.items():
        if m == 2:
            assert lam == beta.AUTHORS_CIFAR10_BEST_LAMBDA[d]


def test_fastssl_factor_reproduces_the_released_multiview_lambdas():
    for (d, m), lam in beta.RELEASED_MULTIVIEW_BARLOW_LAMBDA.items():
        two_view = beta.RELEASED_MULTIVIEW_BARLOW_LAMBDA[(d, 2)]
        assert two_view * beta.barlow_multiview_factor("fastssl", m) == pytest.approx(lam)


def test_vicreg_c_is_the_fit_to_the_released_weights():
    released = beta.released_vicreg_betas()
    two_view = {d: b for (d, m), b in released.items() if m == 2}
    assert two_view == {256: pytest.approx(1 / 25), 8192: pytest.approx(1 / 750)}
    assert beta.geometric_mean_c(two_view) == pytest.approx(beta.VICREG_C, abs=0.05)
    for (d, m), released_beta in released.items():
        ratio = beta.beta_for_projector(d, beta.VICREG_C, num_views=m, loss="vicreg") / released_beta
        assert 1 / 1.5 < ratio < 1.5, (d, m, ratio)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_vicreg_has_no_multiview_factor(objective):
    assert beta.released_vicreg_betas()[(256, 4)] == beta.released_vicreg_betas()[(256, 2)]
    for m in (2, 3, 4, 8, 16):
        assert beta.multiview_factor("vicreg", objective, m) == 1.0


# ----------------------------------------------------------------------------- multi-view factors


def test_barlow_factors():
    for objective in OBJECTIVES:
        assert beta.barlow_multiview_factor(objective, 2) == 1.0
    for m in (3, 4, 8, 16):
        assert beta.barlow_multiview_factor("fastssl", m) == 0.5
        assert beta.barlow_multiview_factor("leave_one_out", m) == pytest.approx(0.5 * (m / (m - 1)) ** 2)
    assert beta.barlow_multiview_factor("leave_one_out", 4) == pytest.approx(8 / 9)
    assert beta.multiview_factor("barlow_twins", "leave_one_out", 8) == beta.barlow_multiview_factor("leave_one_out", 8)


def _diagonal_and_off_diagonal(s: torch.Tensor) -> dict[str, torch.Tensor]:
    """For standardized views s (m, N, D): both objectives' diagonal terms and off-diagonal sums."""
    m, n, _ = s.shape
    zbar = s.mean(0)
    loo_target = (s.sum(0) - s) / (m - 1)
    corr = torch.einsum("mni,mnj->mij", s, loo_target) / n
    auto = zbar.T @ zbar / n

    def off(x: torch.Tensor) -> torch.Tensor:
        return x.pow(2).sum((-2, -1)) - torch.diagonal(x, dim1=-2, dim2=-1).pow(2).sum(-1)

    return {
        "fastssl_diag": ((s * zbar).mean(1) - 1).pow(2).sum() / m,
        "loo_diag": (torch.diagonal(corr, dim1=-2, dim2=-1) - 1).pow(2).sum() / m,
        "fastssl_off": off(auto),
        "loo_off": off(corr).mean(),
    }


def _correlated(m: int, noise: float, n: int = 128, d: int = 64, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    mixing = torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(d, d, generator=gen, dtype=torch.float64)
    base = torch.randn(n, d, generator=gen, dtype=torch.float64) @ mixing
    return torch.stack([base + noise * torch.randn(n, d, generator=gen, dtype=torch.float64) for _ in range(m)])


@pytest.mark.parametrize("m", [3, 4, 8])
def test_fastssl_diagonal_is_shrunk_by_the_own_view(m):
    """Per-view unit second moments: fastssl's diagonal term = ((m-1)/m)^2 x leave-one-out's, exactly."""
    z = _correlated(m, noise=1.0)
    s = (z - z.mean(1, keepdim=True)) / z.std(1, unbiased=False, keepdim=True)
    terms = _diagonal_and_off_diagonal(s)
    assert terms["fastssl_diag"] / terms["loo_diag"] == pytest.approx(((m - 1) / m) ** 2, rel=1e-10)


def _jointly_standardized(m: int, noise: float) -> torch.Tensor:
    """The release's normalization: L2 per row, then one standardization of all m x N rows."""
    z = F.normalize(_correlated(m, noise, seed=m), dim=-1)
    rows = z.reshape(-1, z.shape[-1])
    return ((rows - rows.mean(0)) / rows.std(0)).reshape(z.shape)


@pytest.mark.parametrize("m", [3, 4, 8])
@pytest.mark.parametrize("noise", [0.25, 1.0, 2.0])
def test_fastssl_diagonal_decomposes_exactly_under_joint_standardization(m, noise):
    """mean_n s_i zbar - 1 = (m-1)/m (C_i[k,k] - 1) + (q_ik - 1)/m with q_ik = mean_n s_i[n,k]^2, for any s."""
    s = _jointly_standardized(m, noise)
    loo_target = (s.sum(0) - s) / (m - 1)
    c_diag = (s * loo_target).mean(1)  # (m, D)
    q = s.pow(2).mean(1)  # (m, D), only near 1 under joint standardization
    predicted = (((m - 1) / m * (c_diag - 1) + (q - 1) / m) ** 2).sum() / m
    assert _diagonal_and_off_diagonal(s)["fastssl_diag"] == pytest.approx(predicted.item(), rel=1e-10)


@pytest.mark.parametrize("m", [3, 4, 8])
@pytest.mark.parametrize("noise", [1.0, 2.0])
def test_shrinkage_holds_approximately_under_joint_standardization(m, noise):
    """While the views still disagree (1 - C_kk of 0.14 and more), the (q - 1)/m residual is small: within 10 %."""
    terms = _diagonal_and_off_diagonal(_jointly_standardized(m, noise))
    assert terms["fastssl_diag"] / terms["loo_diag"] == pytest.approx(((m - 1) / m) ** 2, rel=0.1)
    # the off-diagonal sums are comparable (and equal for identical views, see below)
    assert 0.75 < terms["fastssl_off"] / terms["loo_off"] <= 1.0 + 1e-9


@pytest.mark.parametrize("m", [3, 4, 8])
def test_off_diagonal_terms_agree_for_identical_views(m):
    z = _correlated(m, noise=0.0)
    s = (z - z.mean(1, keepdim=True)) / z.std(1, unbiased=False, keepdim=True)
    terms = _diagonal_and_off_diagonal(s)
    assert terms["fastssl_off"] == pytest.approx(terms["loo_off"].item(), rel=1e-10)


# ----------------------------------------------------------------------------- the rule


def test_rule_scales_as_one_over_d():
    assert beta.beta_for_projector(256, 3.3) == pytest.approx(3.3 / 256)
    assert beta.beta_for_projector(512, 3.3) == pytest.approx(beta.beta_for_projector(256, 3.3) / 2)


def test_rule_applies_the_derived_factor_for_more_views():
    for m in (3, 4, 8, 16):
        assert beta.beta_for_projector(256, 3.3, num_views=m, objective="fastssl") == pytest.approx(3.3 / 256 / 2)
        loo = beta.beta_for_projector(256, 3.3, num_views=m)
        assert loo == pytest.approx(3.3 / 256 * beta.barlow_multiview_factor("leave_one_out", m))
        assert beta.beta_for_projector(256, 10.6, num_views=m, loss="vicreg") == pytest.approx(10.6 / 256)


def test_explicit_factor_overrides_for_more_views_only():
    assert beta.beta_for_projector(256, 3.3, num_views=4, multiview_factor=0.25) == pytest.approx(3.3 / 256 / 4)
    assert beta.beta_for_projector(256, 3.3, num_views=4, multiview_factor=0.25, loss="vicreg") == pytest.approx(
        3.3 / 256 / 4
    )
    assert beta.beta_for_projector(256, 3.3, num_views=2, multiview_factor=0.25) == pytest.approx(3.3 / 256)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(proj_output_dim=0, c=3.3), "proj_output_dim"),
        (dict(proj_output_dim=2.5, c=3.3), "proj_output_dim"),
        (dict(proj_output_dim=256, c=0.0), "c must be"),
        (dict(proj_output_dim=256, c=3.3, num_views=1), "num_views"),
        (dict(proj_output_dim=256, c=3.3, num_views=4, multiview_factor=0.0), "multiview_factor"),
        (dict(proj_output_dim=256, c=3.3, num_views=4, multiview_factor=math.inf), "multiview_factor"),
        (dict(proj_output_dim=256, c=3.3, objective="pairs"), "objective"),
        (dict(proj_output_dim=256, c=3.3, loss="simclr"), "loss"),
        (dict(proj_output_dim=256, c=3.3, multiview_factor=0.5, loss="simclr"), "loss"),
    ],
)
def test_rule_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        beta.beta_for_projector(**kwargs)
    with pytest.raises(ValueError, match=message):
        beta.describe_beta(**kwargs)


def test_describe_beta():
    assert beta.describe_beta(256, 3.3) == "auto: 3.3/256"
    assert beta.describe_beta(256, 3.3, 4, objective="fastssl") == "auto: 3.3/256 x 0.5"
    assert beta.describe_beta(256, 3.3, 4, 0.5) == "auto: 3.3/256 x 0.5"
    assert beta.describe_beta(256, 3.3, 4) == "auto: 3.3/256 x 0.8889"
    assert beta.describe_beta(8192, 10.6, 4, loss="vicreg") == "auto: 10.6/8192"


# ----------------------------------------------------------------------------- VICReg weights


def test_solo_vicreg_weights():
    assert beta.solo_vicreg_weights(25.0, 25.0) == (25.0, 12.5, 1.0)
    assert beta.solo_vicreg_weights(750.0, 750.0, 2.0) == (750.0, 375.0, 2.0)


def _two_views(std: float, n: int = 64, d: int = 32, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=gen, dtype=torch.float64)
    mixing = torch.eye(d, dtype=torch.float64) + 0.2 * torch.randn(d, d, generator=gen, dtype=torch.float64)
    views = [(base + 0.5 * torch.randn(n, d, generator=gen, dtype=torch.float64)) @ mixing for _ in range(2)]
    return [(std * v / v.std(0)).requires_grad_() for v in views]


@pytest.mark.parametrize("lam,mu,cov", [(25.0, 25.0, 1.0), (750.0, 750.0, 1.0), (10.0, 4.0, 0.5)])
def test_release_weights_through_the_mapping_equal_solo_learn_without_the_hinge(lam, mu, cov):
    """std 3 in every dimension: the hinge is off in both forms, so eps cannot matter; exact match."""
    z = _two_views(std=3.0)
    ours = multiview_vicreg_loss(z, lam, mu, cov, objective="fastssl")
    solo = vicreg_loss_func(*z, *beta.solo_vicreg_weights(lam, mu, cov))
    torch.testing.assert_close(ours, solo, rtol=1e-10, atol=1e-12)
    for g_ours, g_solo in zip(torch.autograd.grad(ours, z), torch.autograd.grad(solo, z)):
        torch.testing.assert_close(g_ours, g_solo, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lam,mu,cov", [(25.0, 25.0, 1.0), (10.0, 4.0, 0.5)])
def test_release_weights_through_the_mapping_equal_solo_learn_up_to_eps(lam, mu, cov):
    """std 0.3 in every dimension: the hinge is on in both forms and differs only by solo-learn's eps = 1e-4."""
    z = _two_views(std=0.3)
    ours = multiview_vicreg_loss(z, lam, mu, cov, objective="fastssl")
    sim, var, cov_solo = beta.solo_vicreg_weights(lam, mu, cov)
    solo = vicreg_loss_func(*z, sim, var, cov_solo)
    # sqrt(0.09 + 1e-4) - 0.3 = 1.67e-4 per dimension and view, weighted by var for both views
    eps_gap = 2 * var * (math.sqrt(0.3**2 + 1e-4) - 0.3)
    torch.testing.assert_close(ours - solo, torch.tensor(eps_gap, dtype=torch.float64), rtol=1e-3, atol=1e-9)
    torch.testing.assert_close(ours, solo, rtol=1e-3, atol=0)
    # the unmapped weights (var = mu) are off by mu / 2 x the summed hinges, far more than eps
    unmapped = vicreg_loss_func(*z, lam, mu, cov)
    assert (unmapped - ours).item() > 100 * eps_gap
