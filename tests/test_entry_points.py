"""main_pretrain.py / main_linear.py as a user runs them, on a tiny generated ImageFolder."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import run_entry, tiny_overrides

from mvssl_plugin.cli.common import compose_recipe, find_recipe_dir, list_recipes
from mvssl_plugin.cli.pretrain import pretrain

PRETRAIN_RECIPES = list_recipes("pretrain")
LINEAR_RECIPES = list_recipes("linear")


@pytest.fixture(scope="module")
def pretrained(tiny_cifar, tmp_path_factory) -> Path:
    """One CLI pretraining run of the paper's recipe, shared by the checks below."""
    out = tmp_path_factory.mktemp("pretrain")
    result = run_entry(
        "main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, out)], cwd=out
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mabt").iterdir()
    return run_dir


def test_pretrain_writes_solo_learns_layout(pretrained):
    (ckpt,) = pretrained.glob("*.ckpt")
    assert ckpt.name.startswith("mabt-cifar10-4views-d16-offline-") and ckpt.name.endswith("-ep=0.ckpt")
    args = json.loads((pretrained / "args.json").read_text())
    assert args["method"] == "mabt" and args["data"]["num_large_crops"] == 4
    assert args["method_kwargs"]["lamb"] == pytest.approx(3.3 / 16 * 0.5)  # 'auto' resolved, recorded
    assert args["method_kwargs"]["proj_hidden_dim"] == 16  # interpolation resolved
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    assert "projector.6.weight" in state and state["projector.6.weight"].shape == (16, 16)


def test_linear_evaluation_loads_the_checkpoint(pretrained, tiny_cifar, tmp_path):
    args = [
        "--config-name",
        "linear_cifar.yaml",
        f"pretrained_feature_extractor={pretrained}",
        *[o for o in tiny_overrides(tiny_cifar, tmp_path) if not o.startswith(("method_kwargs", "auto_resume"))],
    ]
    result = run_entry("main_linear.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Loaded backbone weights from" in result.stdout and "val_acc1=" in result.stdout
    (run_dir,) = (tmp_path / "linear").iterdir()
    (linear_ckpt,) = run_dir.glob("*.ckpt")
    pre = torch.load(next(pretrained.glob("*.ckpt")), map_location="cpu", weights_only=False)["state_dict"]
    lin = torch.load(linear_ckpt, map_location="cpu", weights_only=False)["state_dict"]
    # the frozen backbone solo-learn's LinearModel trained on is the pretrained one
    for key in ("backbone.conv1.weight", "backbone.layer4.1.conv2.weight"):
        torch.testing.assert_close(lin[key], pre[key])


def test_linear_rejects_a_mismatched_backbone(pretrained, tiny_cifar, tmp_path):
    overrides = [o for o in tiny_overrides(tiny_cifar, tmp_path) if o.startswith("data.")]
    cfg = compose_recipe(
        "linear_cifar.yaml", "linear", [f"pretrained_feature_extractor={pretrained}", "accelerator=cpu", *overrides]
    )
    from mvssl_plugin.cli.linear import linear
    from mvssl_plugin.errors import ConfigError

    with pytest.raises(ConfigError, match="does not hold this backbone"):
        linear(cfg)  # the recipe's resnet18 is not the width-4 network that was pretrained


@pytest.mark.parametrize("method", ["barlow_twins", "vicreg"])
def test_builtin_methods_run_through_the_same_recipe(method, tiny_cifar, tmp_path):
    """Side by side: solo-learn's two-view method on the plugin's 2-view/d=8192 recipe."""
    recipe = "mabt_cifar_2views_d8192.yaml" if method == "barlow_twins" else "mavicreg_cifar_2views_d8192.yaml"
    cfg = compose_recipe(recipe, "pretrain", tiny_overrides(tiny_cifar, tmp_path, method=method))
    trainer = pretrain(cfg)
    assert type(trainer.lightning_module).__name__ in ("BarlowTwins", "VICReg")
    assert (tmp_path / method).is_dir() and list((tmp_path / method).glob("*/*.ckpt"))
    assert "train_barlow_loss" in trainer.callback_metrics or "train_vicreg_loss" in trainer.callback_metrics


def test_mavicreg_multicrop_fraction_knn_and_wandb_offline(tiny_cifar, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    cfg = compose_recipe(
        "mabt_cifar_multicrop.yaml",
        "pretrain",
        tiny_overrides(
            tiny_cifar,
            tmp_path,
            method="mavicreg",
            **{
                "data.fraction": 0.7,
                "wandb.enabled": True,
                "wandb.offline": True,
                "method_kwargs.lamb": 0.0,
                "knn_eval.enabled": True,
                "knn_eval.k": 3,
            },
        ),
    )
    trainer = pretrain(cfg)
    # 70% of 24 images, stratified over 3 classes, batch 8 with drop_last: 16 images, 2 steps
    assert trainer.num_training_batches == 2
    assert 0 <= float(trainer.callback_metrics["val_knn_acc1"]) <= 100  # solo-learn's online kNN ran
    assert list((tmp_path / "wandb").glob("offline-run-*"))
    args = json.loads(next((tmp_path / "mavicreg").glob("*/args.json")).read_text())
    assert args["method_kwargs"]["cov_loss_weight"] == pytest.approx(25 * 2048 / 25 / 16 * 0.5)


@pytest.mark.parametrize("command", ["main_pretrain.py", "mvssl-pretrain"])
def test_config_name_resolves_without_config_path(command, tmp_path):
    """From any folder, through the script or the installed console command."""
    args = ["--config-name", "mabt_cifar.yaml", "--cfg", "job", "--resolve"]
    if command.endswith(".py"):
        result = run_entry(command, args, cwd=tmp_path)
    else:
        executable = shutil.which(command)
        assert executable, f"{command} is not installed: pip install -e ."
        result = subprocess.run([executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "method: mabt" in result.stdout and "num_crops: 4" in result.stdout


def test_solo_style_relative_config_path_works(tmp_path):
    """solo-learn's habit, ``--config-path`` relative to the current folder, still works."""
    args = ["--config-path", "scripts/pretrain/cifar100", "--config-name", "mavicreg_cifar100.yaml", "--cfg", "job"]
    result = run_entry("main_pretrain.py", args, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dataset: cifar100" in result.stdout and "method: mavicreg" in result.stdout


@pytest.mark.parametrize("recipe", PRETRAIN_RECIPES)
def test_every_pretrain_recipe_composes_and_resolves_beta(recipe):
    from mvssl_plugin.config import count_views, resolve_beta

    cfg = compose_recipe(recipe, "pretrain")
    resolve_beta(cfg)
    assert cfg.method in ("mabt", "mavicreg") and count_views(cfg) >= 2
    weight = cfg.method_kwargs.lamb if cfg.method == "mabt" else cfg.method_kwargs.cov_loss_weight
    assert isinstance(weight, float) and weight > 0
    assert find_recipe_dir(recipe, "pretrain").name == cfg.data.dataset


@pytest.mark.parametrize("recipe", LINEAR_RECIPES)
def test_every_linear_recipe_composes(recipe):
    cfg = compose_recipe(recipe, "linear", ["pretrained_feature_extractor=x.ckpt"])
    assert cfg.data.val_path and cfg.backbone.name and cfg.optimizer.name == "sgd"
