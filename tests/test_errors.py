"""Bad input: a clear error naming the key, before training starts and before any output."""

from __future__ import annotations

import pytest
import torch
from helpers import NEEDS_DALI, run_entry, tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.train.pretrain import pretrain

CASES = [
    ("mabt_cifar.yaml", {"data.num_views": 1}, "needs at least 2 views"),
    ("mabt_cifar_multicrop.yaml", {"data.num_small_views": -1}, r"data.num_small_views=-1: must be an integer >= 0"),
    ("mabt_cifar_multicrop.yaml", {"data.num_views": 2}, r"data.num_views=2 counts all views.*set data.num_views=6"),
    ("mabt_cifar.yaml", {"+data.num_small_views": 2}, "no small pipeline: use augmentations with a small pipeline"),
    ("mavicreg_cifar.yaml", {"data.num_views": 0}, r"data.num_views=0: must be an integer >= 1"),
    ("mabt_cifar.yaml", {"method_kwargs.proj_output_dim": 0}, "method_kwargs.proj_output_dim=0"),
    ("mabt_cifar.yaml", {"method_kwargs.lamb": -0.5}, "method_kwargs.lamb=-0.5"),
    ("mavicreg_cifar.yaml", {"method_kwargs.cov_loss_weight": -1}, "method_kwargs.cov_loss_weight=-1"),
    ("mabt_cifar.yaml", {"method": "mabtt"}, "method='mabtt' is not registered"),
    ("mabt_cifar.yaml", {"backbone.name": "resnet9"}, "backbone.name='resnet9'"),
    (
        "mabt_cifar.yaml",
        {"data.train_path": "/no/such/folder"},
        "data.train_path=./no/such/folder. does not exist.*ImageFolder",
    ),
    ("mabt_cifar.yaml", {"data.val_path": "/no/such/folder"}, "data.val_path='/no/such/folder'"),
    ("mabt_cifar.yaml", {"data.fraction": 1.5}, "data.fraction=1.5"),
    ("mabt_cifar.yaml", {"data.format": "lmdb"}, "data.format='lmdb'"),
    ("mabt_cifar.yaml", {"data.format": "dali", "dali.device": "tpu"}, "dali.device='tpu'"),
    ("mabt_cifar.yaml", {"data.format": "dali", "dali.num_threads": 0}, "dali.num_threads=0"),
    ("mabt_cifar.yaml", {"data.format": "memory", "memory.size": 0}, "memory.size=0"),
    ("mabt_cifar.yaml", {"data.format": "memory", "+memory.resolution.start": 48}, r"start=48.*from 1 to.*\(32\)"),
    (
        "mabt_cifar.yaml",
        {"data.format": "memory", "+memory.resolution.start": 16, "+memory.resolution.ramp_end": 0},
        "ramp_start < ramp_end",
    ),
    (
        "mabt_cifar.yaml",
        {"data.format": "memory", "+memory.resolution.start": 16, "+memory.resolution.strength_start": 2},
        r"strength_start=2: .*a fraction from 0 to 1",
    ),
    ("mabt_cifar.yaml", {"+memory.resolution.start": 16}, "memory.resolution is set, but data.format=image_folder"),
    ("mabt_cifar.yaml", {"optimizer.batch_size": 1}, "optimizer.batch_size=1"),
    ("mabt_cifar.yaml", {"optimizer.batch_size": 64}, "fewer than optimizer.batch_size=64"),
    ("mabt_cifar.yaml", {"method_kwargs.redundancy": "pairs"}, "method_kwargs.redundancy='pairs'"),
    ("mabt_cifar.yaml", {"method_kwargs.fused_forward": "yes"}, "method_kwargs.fused_forward='yes'"),
    ("mabt_cifar.yaml", {"method_kwargs.view_parallel": True}, "spreads 4 views over 1 process"),
    ("mabt_cifar.yaml", {"method_kwargs.view_parallel": True, "devices": 3}, "spreads 4 views over 3 process"),
    (
        "mabt_cifar_multicrop.yaml",
        {"method_kwargs.view_parallel": True, "devices": 2},
        "view_parallel=true needs views of one resolution",
    ),
]


PARAMS = [
    pytest.param(*case, id="+".join(case[1]), marks=NEEDS_DALI if case[1].get("data.format") == "dali" else ())
    for case in CASES
]


@pytest.mark.parametrize("recipe,override,message", PARAMS)
def test_bad_config_is_named_before_any_output(recipe, override, message, tiny_cifar, tmp_path):
    cfg = compose_recipe(recipe, "pretrain", tiny_overrides(tiny_cifar, tmp_path / "runs", **override))
    with pytest.raises(ConfigError, match=message):
        pretrain(cfg)
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_gpu_requested_without_one(tiny_cifar, tmp_path):
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, accelerator="gpu"))
    with pytest.raises(ConfigError, match="accelerator=gpu but no CUDA device"):
        pretrain(cfg)


@pytest.mark.slow
def test_cli_prints_one_line_and_keeps_earlier_runs(tiny_cifar, tmp_path):
    """A bad second run exits 2 with the key and fix, no traceback, and the first run's
    checkpoint is left exactly as it was."""
    ok = run_entry(
        "main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, tmp_path)], tmp_path
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    (ckpt,) = (tmp_path / "mabt").glob("*/*.ckpt")
    before = ckpt.read_bytes()
    bad = run_entry(
        "main_pretrain.py",
        ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, tmp_path, **{"data.num_views": 1})],
        tmp_path,
    )
    assert bad.returncode == 2
    assert "mvssl config error: method=mabt needs at least 2 views" in bad.stderr
    assert "Traceback" not in bad.stderr + bad.stdout
    assert list((tmp_path / "mabt").glob("*/*.ckpt")) == [ckpt] and ckpt.read_bytes() == before


@pytest.mark.slow
def test_unknown_recipe_lists_the_available_ones(tmp_path):
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar10.yaml"], tmp_path)
    assert result.returncode == 2
    assert "no recipe named 'mabt_cifar10.yaml'" in result.stderr and "mabt_cifar.yaml" in result.stderr


def test_linear_without_a_checkpoint(tiny_cifar, tmp_path):
    from mvssl_plugin.train.linear import linear

    data = [o for o in tiny_overrides(tiny_cifar, tmp_path) if o.startswith("data.")]
    cfg = compose_recipe("linear_cifar.yaml", "linear", ["pretrained_feature_extractor=/no/run.ckpt", *data])
    with pytest.raises(ConfigError, match="pretrained_feature_extractor='/no/run.ckpt' is not a file"):
        linear(cfg)


def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tiny_cifar, tmp_path, monkeypatch):
    """Epoch 0 trains and is saved; the loss turns NaN in epoch 1: the run stops with the
    message, the epoch-0 checkpoint is intact and no later one is written."""
    from mvssl_plugin.methods import MultiAugBarlowTwins

    real_loss = MultiAugBarlowTwins.multiview_loss

    def loss_turning_nan(self, z):
        loss = real_loss(self, z)
        return loss * float("nan") if self.current_epoch == 1 else loss

    monkeypatch.setattr(MultiAugBarlowTwins, "multiview_loss", loss_turning_nan)
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, max_epochs=2))
    with pytest.raises(FloatingPointError, match="train_barlow_loss is nan at epoch 1.*Lower optimizer.lr"):
        pretrain(cfg)
    (ckpt,) = (tmp_path / "mabt").glob("*/*.ckpt")
    assert ckpt.name.endswith("-ep=0.ckpt")
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] == 0 and all(torch.isfinite(v).all() for v in state["state_dict"].values())


def test_entry_point_reports_a_non_finite_loss_in_one_line(capsys):
    from mvssl_plugin.cli.exits import report_errors

    def diverging(cfg):
        raise FloatingPointError("train_barlow_loss is nan at epoch 3, step 40: ...")

    with pytest.raises(SystemExit) as stop:
        report_errors(diverging)(None)
    assert stop.value.code == 3
    assert capsys.readouterr().err == "mvssl training stopped: train_barlow_loss is nan at epoch 3, step 40: ...\n"
