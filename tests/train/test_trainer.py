"""Kill and resume: a run killed mid-epoch continues from its newest complete checkpoint,
in the same run folder, and a truncated checkpoint is never the one resumed from."""

from __future__ import annotations

import csv
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from helpers import NEEDS_DALI, kill_in_second_epoch, make_image_folder, run_entry, tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.runs import is_complete_checkpoint
from mvssl_plugin.train.resume import find_resumable

#: every test here starts a subprocess (an entry point, solo-learn's script, DDP workers)
pytestmark = pytest.mark.slow

MAX_EPOCHS = 3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume_data")
    return {
        "train": str(make_image_folder(root / "train", per_class=40)),
        "test": str(make_image_folder(root / "test")),
    }


def command(data, out: Path, data_format: str = "image_folder") -> list[str]:
    overrides = tiny_overrides(
        data,
        out,
        max_epochs=MAX_EPOCHS,
        **{"auto_resume.enabled": True, "optimizer.lr": 0.05, "precision": 32, "data.format": data_format},
    )
    return ["--config-name", "mabt_cifar.yaml", *overrides]


@pytest.mark.parametrize("data_format", ["image_folder", pytest.param("dali", marks=NEEDS_DALI), "memory"])
def test_killed_run_resumes_in_the_same_folder_and_continues(data_format, data, tmp_path):
    args = command(data, tmp_path, data_format)
    kill_in_second_epoch(args, tmp_path)
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert not list(run_dir.glob(f"*-ep={MAX_EPOCHS - 1}.ckpt"))

    second = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    resumed = re.search(
        r"mvssl: resuming from the newest complete checkpoint that matches this config: (.*ep=(\d+)\.ckpt)",
        second.stdout,
    )
    assert resumed, second.stdout[-3000:]
    start = int(resumed.group(2)) + 1
    assert Path(resumed.group(1)).parent == run_dir
    # one run folder, one final checkpoint, no partial files: the same run, continued
    assert list((tmp_path / "mabt").iterdir()) == [run_dir]
    assert [p.name.split("-ep=")[1] for p in run_dir.glob("*.ckpt*")] == [f"{MAX_EPOCHS - 1}.ckpt"]
    # metrics.csv: one row per epoch, clocks carried over the kill (re-run epochs replaced)
    with open(run_dir / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["epoch"]) for r in rows] == list(range(MAX_EPOCHS))
    seconds = [float(r["train_seconds"]) for r in rows]
    assert all(a < b for a, b in zip(seconds, seconds[1:])), seconds
    validated = sorted({int(e) for e in re.findall(r"mvssl: epoch (\d+) val_", second.stdout)})
    assert validated == list(range(start, MAX_EPOCHS)), "the resumed run must not repeat finished epochs"

    # the same curve: epoch by epoch, the loss of an uninterrupted run of the same command
    reference = run_entry("main_pretrain.py", command(data, tmp_path / "reference", data_format), cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr[-2000:]
    resumed_curve, reference_curve = epoch_losses(second.stdout), epoch_losses(reference.stdout)
    assert sorted(resumed_curve) == list(range(start, MAX_EPOCHS))
    for epoch, loss in resumed_curve.items():
        assert loss == pytest.approx(reference_curve[epoch], rel=1e-3), (epoch, resumed_curve, reference_curve)
    if data_format == "memory":  # the training and the validation images, each decoded once, cached
        assert len(list((Path(data["train"]).parent / ".mvssl_cache").glob("*.npy"))) == 2


def epoch_losses(stdout: str) -> dict[int, float]:
    found = re.findall(r"mvssl: epoch (\d+) train_\S+ .*?train_barlow_loss=([0-9.e+-]+)", stdout.replace("\r", "\n"))
    return {int(epoch): float(loss) for epoch, loss in found}


def test_truncated_newest_checkpoint_is_skipped(data, tmp_path):
    run = run_entry("main_pretrain.py", command(data, tmp_path), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    (good,) = (tmp_path / "mabt").glob("*/*.ckpt")
    truncated = good.with_name(good.name.replace(f"ep={MAX_EPOCHS - 1}", f"ep={MAX_EPOCHS}"))
    shutil.copy(good, truncated)
    with open(truncated, "r+b") as f:
        f.truncate(os.path.getsize(good) // 2)
    os.utime(truncated, (time.time() + 5, time.time() + 5))  # the newest file
    assert is_complete_checkpoint(good) and not is_complete_checkpoint(truncated)
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", command(data, tmp_path)[2:])
    cfg.auto_resume.max_hours = 36
    from mvssl_plugin.train.pretrain import build_pretrain_model

    cfg, _ = build_pretrain_model(cfg)  # completes the config as a real resume would see it
    found = find_resumable(cfg, str(tmp_path / "mabt"))
    assert found.checkpoint == good and found.skipped == [truncated] and found.differences == []
