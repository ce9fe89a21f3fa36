"""``auto`` betas resolved into a config (config/beta.py): the rule with each objective's
multi-view factor, and an explicit factor."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf

from mvssl_plugin import beta_rule as beta
from mvssl_plugin.config.beta import BARLOW_SLOT, VICREG_SLOT, resolve_beta


def _cfg(**method_kwargs) -> DictConfig:
    return OmegaConf.create(
        {"method_kwargs": {"proj_output_dim": 256, **method_kwargs}, "data": {"num_large_crops": 4}}
    )


def test_auto_resolves_with_the_objectives_factor():
    cfg = _cfg(lamb="auto")
    assert resolve_beta(cfg, BARLOW_SLOT, "fastssl") == pytest.approx(3.3 / 256 * 0.5)
    assert cfg.method_kwargs.beta_rule == "auto: 3.3/256 x 0.5"
    cfg = _cfg(lamb="auto")
    assert resolve_beta(cfg, BARLOW_SLOT, "leave_one_out") == pytest.approx(3.3 / 256 * 8 / 9)
    cfg = _cfg(cov_loss_weight="auto")
    assert resolve_beta(cfg, VICREG_SLOT, "leave_one_out") == pytest.approx(25.0 * beta.VICREG_C / 256)
    cfg = _cfg(lamb="auto", beta_multiview_factor=0.5)
    assert resolve_beta(cfg, BARLOW_SLOT, "leave_one_out") == pytest.approx(3.3 / 256 * 0.5)
