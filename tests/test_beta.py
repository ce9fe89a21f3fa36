"""The beta rule, and ``auto`` resolved from the recipes' YAML into a number."""

from __future__ import annotations

import pytest

from mvssl_plugin import beta
from mvssl_plugin.cli.common import compose_recipe
from mvssl_plugin.config import resolve_beta
from mvssl_plugin.errors import ConfigError


def test_default_c_is_the_fit_to_the_authors_sweep():
    assert beta.geometric_mean_c(beta.AUTHORS_CIFAR10_BEST_LAMBDA) == pytest.approx(beta.BARLOW_TWINS_C, abs=0.05)


def test_rule_lands_within_the_sweeps_spread():
    """beta(d) stays within a factor 2.5 of the authors' best lambda at every swept d."""
    for d, best in beta.AUTHORS_CIFAR10_BEST_LAMBDA.items():
        assert 1 / 2.5 < beta.beta_for_projector(d, beta.BARLOW_TWINS_C) / best < 2.5


def test_rule_scales_as_one_over_d_and_halves_with_more_views():
    assert beta.beta_for_projector(256, 3.3) == pytest.approx(3.3 / 256)
    assert beta.beta_for_projector(512, 3.3) == pytest.approx(beta.beta_for_projector(256, 3.3) / 2)
    for m in (3, 4, 8, 16):
        assert beta.beta_for_projector(256, 3.3, num_views=m) == pytest.approx(3.3 / 256 / 2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(proj_output_dim=0, c=3.3), "proj_output_dim"),
        (dict(proj_output_dim=2.5, c=3.3), "proj_output_dim"),
        (dict(proj_output_dim=256, c=0.0), "c must be"),
        (dict(proj_output_dim=256, c=3.3, num_views=1), "num_views"),
        (dict(proj_output_dim=256, c=3.3, multiview_factor=2.0), "multiview_factor"),
    ],
)
def test_rule_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        beta.beta_for_projector(**kwargs)


def test_auto_lamb_resolves_from_the_recipe():
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", ["method_kwargs.proj_output_dim=128"])
    assert cfg.method_kwargs.lamb == "auto"
    resolved = resolve_beta(cfg)
    assert cfg.method_kwargs.lamb == pytest.approx(3.3 / 128 * 0.5) == resolved
    assert cfg.method_kwargs.beta_c == 3.3 and cfg.method_kwargs.beta_multiview_factor == 0.5


def test_auto_lamb_for_two_views_has_no_halving():
    cfg = compose_recipe("mabt_cifar_2views_d8192.yaml", "pretrain")
    resolve_beta(cfg)
    assert cfg.method_kwargs.lamb == pytest.approx(3.3 / 8192)


def test_auto_vicreg_covariance_weight_is_beta_times_invariance_weight():
    cfg = compose_recipe("mavicreg_cifar.yaml", "pretrain", ["+method_kwargs.beta_c=100"])
    resolve_beta(cfg)
    assert cfg.method_kwargs.cov_loss_weight == pytest.approx(25.0 * 100 / 256 * 0.5)


def test_auto_also_serves_solo_learns_builtin_barlow_twins():
    cfg = compose_recipe("mabt_cifar_2views_d8192.yaml", "pretrain", ["method=barlow_twins"])
    resolve_beta(cfg)
    assert cfg.method_kwargs.lamb == pytest.approx(3.3 / 8192)


def test_explicit_number_is_kept():
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", ["method_kwargs.lamb=0.005"])
    assert resolve_beta(cfg) is None
    assert cfg.method_kwargs.lamb == 0.005


@pytest.mark.parametrize("value", ["-0.1", "often"])
def test_bad_lamb_names_the_key(value):
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", [f"method_kwargs.lamb={value}"])
    with pytest.raises(ConfigError, match="method_kwargs.lamb"):
        resolve_beta(cfg)
