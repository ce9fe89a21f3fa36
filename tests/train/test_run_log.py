"""The run log (train/run_log.py): a killed launch listed as running, run.json written at start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    kill_in_second_epoch,
    make_image_folder,
    run_entry,
    tiny_overrides,
)

from mvssl_plugin.runs import RUN_LOG, read_json


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """The entry points run here with one torch thread: on a shared 2-core machine two
    OpenMP threads wait on each other, and a width-4 network's batch norm took 24 ms
    instead of 0.06 ms."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def pretrain_args(data: dict, out: Path, **extra) -> list[str]:
    return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **extra)]


@pytest.fixture(scope="module")
def pretrained(tiny_cifar, tmp_path_factory) -> Path:
    """One finished 1-epoch tiny run (its folder is copied, never changed, by the tests)."""
    out = tmp_path_factory.mktemp("pretrained")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        result = run_entry("main_pretrain.py", pretrain_args(tiny_cifar, out), out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mabt").iterdir()
    return run_dir


@pytest.mark.slow
def test_killed_launch_is_listed_as_running_and_the_resume_is_a_second_entry(tmp_path):
    root = tmp_path / "data"
    data = {
        "train": str(make_image_folder(root / "train", per_class=24)),
        "test": str(make_image_folder(root / "test")),
    }
    args = pretrain_args(data, tmp_path, max_epochs=3, **{"auto_resume.enabled": True})
    kill_in_second_epoch(args, tmp_path)
    (run_dir,) = (tmp_path / "mabt").iterdir()
    (launch,) = read_json(run_dir / RUN_LOG)["launches"]
    # killed after epoch 0's checkpoint: epoch 1 (or, on a fast machine, 2) was running
    assert launch["status"] == "running" and launch["epochs_completed"] in (1, 2) and not launch["finished"]

    second = run_entry("main_pretrain.py", args, tmp_path)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    killed, resumed = read_json(run_dir / RUN_LOG)["launches"]
    assert killed == launch  # the killed launch's entry is kept as it was
    assert resumed["status"] == "finished" and resumed["epochs_completed"] == 3
    assert [p.name.split("-ep=")[1] for p in run_dir.glob("*.ckpt")] == ["2.ckpt"]


@pytest.mark.slow
def test_run_json_is_written_at_start(pretrained):
    (launch,) = json.loads((pretrained / RUN_LOG).read_text())["launches"]
    assert launch["status"] == "finished" and launch["command"]
