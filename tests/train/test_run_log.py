"""The run log (train/run_log.py): a killed launch listed as running, run.json written at start."""

from __future__ import annotations

import json

import pytest
from helpers import kill_in_second_epoch, make_image_folder, pretrain_args, run_entry

from mvssl_plugin.runs import RUN_LOG, read_json

pytestmark = pytest.mark.usefixtures("one_thread")


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
def test_run_json_is_written_at_start(finished_tiny_run):
    (launch,) = json.loads((finished_tiny_run / RUN_LOG).read_text())["launches"]
    assert launch["status"] == "finished" and launch["command"]
