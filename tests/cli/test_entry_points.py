"""main_pretrain.py / main_linear.py as a user runs them, on a tiny generated ImageFolder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import REPO, run_entry, tiny_overrides

from mvssl_plugin.cli.config_name import PACKAGE_RECIPES, compose_recipe, find_recipe_dir, list_recipes
from mvssl_plugin.train.pretrain import pretrain

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
    (out / "stdout.txt").write_text(result.stdout)
    (run_dir,) = (p for p in (out / "mabt").iterdir() if p.is_dir())
    return run_dir


def linear_args(pretrained: Path, data: dict, out: Path, **extra) -> list[str]:
    """``main_linear.py`` arguments of a tiny linear evaluation of ``pretrained``."""
    tiny = tiny_overrides(data, out, **extra)
    kept = [o for o in tiny if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={pretrained}", *kept]


@pytest.mark.slow
def test_pretrain_prints_the_start_block_once(pretrained):
    stdout = (pretrained.parents[1] / "stdout.txt").read_text()
    assert stdout.count("mvssl run:") == 1
    block = stdout[stdout.index("mvssl run:") :].splitlines()[1:10]
    facts = dict(line.strip().split("  ", 1) for line in block)
    assert facts["method"].strip() == "mabt (objective leave_one_out, projector solo)"
    assert facts["views"].strip() == "4 x 32 px" and facts["projector d"].strip() == "16"
    assert facts["orthogonality"].strip().startswith("lamb = ") and "auto: 3.3/16 x 0.8889" in facts["orthogonality"]
    assert "24 images of" in facts["data"] and "3 steps per epoch; 1 epochs" in facts["batch"]
    assert facts["run folder"].strip().endswith(pretrained.name)
    args = json.loads((pretrained / "args.json").read_text())
    assert args["run_summary"]["views"] == "4 x 32 px"  # the same facts stay in args.json


@pytest.mark.slow
def test_pretrain_writes_solo_learns_layout(pretrained):
    (ckpt,) = pretrained.glob("*.ckpt")
    assert ckpt.name.startswith("mabt-cifar10-4views-d16-offline-") and ckpt.name.endswith("-ep=0.ckpt")
    args = json.loads((pretrained / "args.json").read_text())
    assert args["method"] == "mabt" and args["data"]["num_large_crops"] == 4
    # 'auto' resolved and recorded: 3.3 / d times the leave-one-out factor 0.5 (4/3)^2 at m = 4
    assert args["method_kwargs"]["lamb"] == pytest.approx(3.3 / 16 * 0.5 * (4 / 3) ** 2)
    assert args["method_kwargs"]["beta_rule"] == "auto: 3.3/16 x 0.8889"
    assert args["method_kwargs"]["proj_hidden_dim"] == 16  # interpolation resolved
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    assert "projector.6.weight" in state and state["projector.6.weight"].shape == (16, 16)


@pytest.mark.slow
def test_linear_evaluation_loads_the_checkpoint(pretrained, tiny_cifar, tmp_path):
    result = run_entry("main_linear.py", linear_args(pretrained, tiny_cifar, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "mvssl: backbone weights from" in result.stdout and "val_acc1=" in result.stdout
    (run_dir,) = (tmp_path / "linear").iterdir()
    (linear_ckpt,) = run_dir.glob("*.ckpt")
    pre = torch.load(next(pretrained.glob("*.ckpt")), map_location="cpu", weights_only=False)["state_dict"]
    lin = torch.load(linear_ckpt, map_location="cpu", weights_only=False)["state_dict"]
    # the frozen backbone solo-learn's LinearModel trained on is the pretrained one
    for key in ("backbone.conv1.weight", "backbone.layer4.1.conv2.weight"):
        torch.testing.assert_close(lin[key], pre[key])


def test_hydra_entry_points_import_no_torch_before_the_openmp_wait_is_set():
    """OpenMP reads OMP_WAIT_POLICY once, when torch loads: ``cli.exits.with_openmp_wait`` can set
    it only if importing the entry point has not loaded torch already."""
    code = "import sys, mvssl_plugin.cli.pretrain, mvssl_plugin.cli.linear; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.slow
def test_linear_sleeps_openmp_threads_beside_loader_workers(pretrained, tiny_cifar, tmp_path):
    args = linear_args(pretrained, tiny_cifar, tmp_path, **{"data.num_workers": 1})
    result = run_entry("main_linear.py", args, cwd=tmp_path, env={"OMP_WAIT_POLICY": None}, fresh=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (hardware,) = [line for line in result.stdout.splitlines() if line.startswith("mvssl: hardware")]
    assert hardware.startswith("mvssl: hardware cpu;") and "(OpenMP wait PASSIVE), 1 loader worker(s)" in hardware


@pytest.mark.slow
def test_linear_rejects_a_mismatched_backbone(pretrained, tiny_cifar, tmp_path):
    import shutil

    from mvssl_plugin.errors import ConfigError
    from mvssl_plugin.train.linear import linear

    overrides = [o for o in tiny_overrides(tiny_cifar, tmp_path) if o.startswith("data.")]

    def linear_on(source, *extra):
        cfg = compose_recipe(
            "linear_cifar.yaml",
            "linear",
            [f"pretrained_feature_extractor={source}", "accelerator=cpu", *overrides, *extra],
        )
        return linear(cfg)

    # the run's args.json names its backbone: the recipe's resnet18 is refused with the value to set
    with pytest.raises(ConfigError, match="pretraining run used narrow_resnet18: set backbone.name=narrow_resnet18"):
        linear_on(pretrained)
    # a checkpoint alone (no args.json): the weights themselves are checked against the network
    alone = tmp_path / "alone"
    alone.mkdir()
    ckpt = shutil.copy(next(pretrained.glob("*.ckpt")), alone / "copied.ckpt")
    with pytest.raises(ConfigError, match="does not hold this backbone"):
        linear_on(ckpt)  # the recipe's resnet18 is not the width-8 network that was pretrained


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
    # VICReg's rule: sim_loss_weight x c / d with c = 10.6, no multi-view factor
    assert args["method_kwargs"]["cov_loss_weight"] == pytest.approx(25 * 10.6 / 16)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["main_pretrain.py", "mvssl-pretrain"])
def test_config_name_resolves_without_config_path(command, tmp_path):
    """From any folder, through the script or the installed console command."""
    args = ["--config-name", "mabt_cifar.yaml", "--cfg", "job", "--resolve"]
    if command.endswith(".py"):
        result = run_entry(command, args, cwd=tmp_path)
    else:
        # beside this interpreter first: a venv's python run without activating the venv
        search = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        executable = shutil.which(command, path=search)
        assert executable, f"{command} is not installed: pip install -e ."
        result = subprocess.run([executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "method: mabt" in result.stdout and "num_crops: 4" in result.stdout


@pytest.mark.slow
def test_solo_style_relative_config_path_works(tmp_path):
    """solo-learn's habit, ``--config-path`` relative to the current folder, still works."""
    args = [
        "--config-path",
        "scripts/pretrain/cifar100",
        "--config-name",
        "mavicreg_cifar100.yaml",
        "--cfg",
        "job",
    ]
    result = run_entry("main_pretrain.py", args, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dataset: cifar100" in result.stdout and "method: mavicreg" in result.stdout


@pytest.mark.parametrize("recipe", PRETRAIN_RECIPES)
def test_every_pretrain_recipe_composes_and_resolves_beta(recipe):
    from mvssl_plugin.config import SOLO_BETA_SLOTS, resolve_beta, views_of
    from mvssl_plugin.registry import PLUGIN_METHODS, beta_slot

    cfg = compose_recipe(recipe, "pretrain")
    # the plugin's methods, or solo-learn's own run side by side with them (the leaderboard's peers)
    peers = (*SOLO_BETA_SLOTS, "simclr", "byol")
    assert (cfg.method in PLUGIN_METHODS or cfg.method in peers) and views_of(cfg).m >= 2
    slot = beta_slot(cfg.method) or SOLO_BETA_SLOTS.get(cfg.method)
    if slot is not None:
        resolve_beta(cfg, slot, cfg.method_kwargs.get("objective", "leave_one_out"))
        weight = cfg.method_kwargs[slot.key]
        assert isinstance(weight, float) and weight > 0
    assert cfg.data.dataset in find_recipe_dir(recipe, "pretrain").relative_to(PACKAGE_RECIPES / "pretrain").parts


@pytest.mark.parametrize("recipe", LINEAR_RECIPES)
def test_every_linear_recipe_composes(recipe):
    cfg = compose_recipe(recipe, "linear", ["pretrained_feature_extractor=x.ckpt"])
    assert cfg.data.val_path and cfg.backbone.name and cfg.optimizer.name == "sgd"


@pytest.mark.slow
def test_a_two_view_builtin_on_a_multi_view_recipe_stops_before_building(tiny_cifar, tmp_path):
    args = ["--config-name", "mabt_cifar.yaml", "method=barlow_twins", *tiny_overrides(tiny_cifar, tmp_path / "runs")]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "method=barlow_twins is solo-learn's two-view method" in result.stderr
    assert "set data.num_views=2" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_builtin_method_gets_none_of_the_plugins_keys(tiny_cifar, tmp_path):
    cfg = compose_recipe(
        "mabt_cifar.yaml",
        "pretrain",
        ["method=barlow_twins", "data.num_views=2", *tiny_overrides(tiny_cifar, tmp_path)],
    )
    pretrain(cfg)
    (args_file,) = (tmp_path / "barlow_twins").glob("*/args.json")
    kwargs = json.loads(args_file.read_text())["method_kwargs"]
    assert not {"objective", "projector", "redundancy", "fused_forward", "view_parallel"} & set(kwargs)
    assert kwargs["lamb"] == pytest.approx(3.3 / 16) and kwargs["beta_rule"] == "auto: 3.3/16"


@pytest.mark.slow
def test_run_json_re_runs_a_multirun_job_exactly(tiny_cifar, tmp_path):
    """Each multirun job records its own command; running it again gives the same config."""
    args = ["--config-name", "mabt_cifar.yaml", "-m", "method_kwargs.proj_output_dim=8,12"]
    args += [o for o in tiny_overrides(tiny_cifar, tmp_path / "runs") if not o.startswith("method_kwargs.proj_")]
    args += ["hydra.sweep.dir=" + str(tmp_path / "multirun")]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    def runs() -> dict:
        out = {}
        for run_json in (tmp_path / "runs" / "mabt").glob("*/run.json"):
            args_json = json.loads((run_json.parent / "args.json").read_text())
            out[run_json.parent] = (json.loads(run_json.read_text())["launches"][0], args_json)
        return out

    before = runs()
    by_dim = {a["method_kwargs"]["proj_output_dim"]: (launch, a) for launch, a in before.values()}
    assert sorted(by_dim) == [8, 12]
    for dim, (launch, _) in by_dim.items():
        assert f"method_kwargs.proj_output_dim={dim}" in launch["command"] and " -m" not in launch["command"]
    launch, original = by_dim[12]
    python, script, *rest = launch["command"].split()
    assert python == "python"
    again = run_entry(str(Path(script).relative_to(REPO)), rest, cwd=Path(launch["cwd"]), timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    (new,) = set(runs()) - set(before)
    rerun = runs()[new][1]
    for key in ("method_kwargs", "data", "optimizer", "augmentations", "max_epochs", "seed", "backbone"):
        assert rerun[key] == original[key], key
