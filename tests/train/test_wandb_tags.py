"""wandb tags (train/trainer.py ``run_tags``): what they say, and that an offline run carries them."""

from __future__ import annotations

import pytest
from helpers import tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.config import VICREG_SLOT, resolve_beta
from mvssl_plugin.train.trainer import run_tags


def test_wandb_tags_name_method_views_pdim_beta_fraction(tiny_cifar, tmp_path):
    cfg = compose_recipe(
        "mavicreg_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, **{"data.fraction": 0.5})
    )
    resolve_beta(cfg, VICREG_SLOT)
    beta = cfg.method_kwargs.cov_loss_weight / cfg.method_kwargs.sim_loss_weight
    assert run_tags(cfg) == [
        "method:mavicreg",
        "views:4",
        "pdim:16",
        "fraction:0.5",
        f"beta:{beta:.4g}",
        "optimizer:adam",
    ]


def test_the_users_wandb_tags_follow_the_runs_own(tiny_cifar, tmp_path):
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path)]  # the CPU recipes have a width
    overrides = [*tiny, "+wandb.tags=[leaderboard,record]"]
    cfg = compose_recipe("solo_byol_cifar_cpu.yaml", "pretrain", overrides)
    assert run_tags(cfg)[0] == "method:byol" and run_tags(cfg)[-3:] == ["optimizer:lars", "leaderboard", "record"]


@pytest.mark.slow
def test_wandb_offline_run_carries_the_tags(two_finished_runs):
    (wandb_file,) = (two_finished_runs["root"] / "a").glob("wandb/offline-run-*/run-*.wandb")
    content = wandb_file.read_bytes()
    for tag in (b"method:mabt", b"views:4", b"pdim:16", b"fraction:1"):
        assert tag in content
