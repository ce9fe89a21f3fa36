"""MMCR as a method (methods/mmcr.py) through the flows the other methods run (the contract, fuzz
and recipe tests cover it through the registry)."""

from __future__ import annotations

import json

import pytest
from helpers import NEEDS_DALI, run_entry, tiny_overrides


def pretrain(data: dict, out, recipe: str = "mmcr_cifar.yaml", **extra):
    args = ["--config-name", recipe, *tiny_overrides(data, out, **extra)]
    return run_entry("main_pretrain.py", args, out)


@pytest.fixture(scope="module")
def mmcr_run(tiny_cifar, tmp_path_factory):
    """A 1-epoch mmcr run with wandb offline: the folder the evaluations read."""
    out = tmp_path_factory.mktemp("mmcr")
    result = pretrain(tiny_cifar, out, **{"wandb.enabled": True, "wandb.offline": True})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mmcr").iterdir()
    return out, run_dir, result.stdout


@pytest.mark.slow
def test_mmcr_pretrains_through_the_entry_point_with_its_tags(mmcr_run):
    out, run_dir, stdout = mmcr_run
    assert "mmcr (projector solo)" in stdout and "orthogonality  -" in stdout
    args = json.loads((run_dir / "args.json").read_text())
    assert args["method"] == "mmcr" and args["data"]["num_large_crops"] == 4
    assert "objective" not in args["method_kwargs"] and "lamb" not in args["method_kwargs"]
    assert "train_mmcr_loss" in (run_dir / "metrics.csv").read_text()
    (wandb_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    assert b"method:mmcr" in wandb_file.read_bytes() and b"views:4" in wandb_file.read_bytes()


@pytest.mark.slow
def test_knn_probe_and_compare_read_an_mmcr_run(mmcr_run, tiny_cifar, tmp_path):
    out, run_dir, _ = mmcr_run
    knn = ["--pretrained_checkpoint_dir", str(run_dir), "--dataset", "cifar10", "--num_workers", "0", "--k", "3"]
    knn += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"], "--batch_size", "8"]
    result = run_entry("main_knn.py", knn, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "knn.csv").is_file()
    probe = tiny_overrides(tiny_cifar, tmp_path, pretrained_feature_extractor=str(run_dir), **{"probe.epochs": 2})
    probe = [o for o in probe if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *probe], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run_dir / "probe.json").read_text())["test_images"] == 12
    result = run_entry("main_compare.py", [str(out), "--out", str(tmp_path / "cmp")], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mmcr" in (tmp_path / "cmp" / "comparison.csv").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("data_format", ["memory", pytest.param("dali", marks=NEEDS_DALI)])
def test_mmcr_trains_on_the_other_data_formats(data_format, tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, **{"data.format": data_format})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


@pytest.mark.slow
def test_mmcr_view_parallel_on_two_cpu_processes(tiny_cifar, tmp_path):
    extra = {"strategy": "ddp", "devices": 2, "method_kwargs.view_parallel": True, "data.format": "memory"}
    result = pretrain(tiny_cifar, tmp_path, **extra)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "mmcr").iterdir()
    assert json.loads((run_dir / "args.json").read_text())["devices"] == [0, 1]
