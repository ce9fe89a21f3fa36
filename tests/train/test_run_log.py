"""The run log (train/run_log.py): a killed launch listed as running, run.json written at
start, progress as whole lines, metrics.csv every epoch, time to accuracy."""

from __future__ import annotations

import json
import re

import pytest
from helpers import kill_in_second_epoch, make_image_folder, pretrain_args, run_entry

from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.runs import RUN_LOG

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


@pytest.mark.slow
def test_a_run_logged_to_a_file_prints_progress_lines_not_redraws(two_finished_runs):
    """stdout is a pipe here, as under nohup, CI or SLURM: each epoch's progress is whole lines."""
    stdout = two_finished_runs["mabt_stdout"]
    assert "\r" not in stdout
    for epoch in (0, 1):
        assert re.search(rf"^mvssl: epoch {epoch}, training step (\d+)/\1 \(100%\), \d+ s$", stdout, re.M), stdout[
            -2000:
        ]


@pytest.mark.slow
def test_metrics_csv_holds_every_epoch_with_clock_and_effective_rank(two_finished_runs):
    rows = read_csv(two_finished_runs["mabt"] / "metrics.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert 0 < float(rows[0]["train_seconds"]) < float(rows[1]["train_seconds"])
    assert float(rows[1]["train_seconds"]) <= float(rows[1]["wall_seconds"])
    for row in rows:  # the loop waits on the loader for part of each epoch, never all of it
        assert 0 < float(row["data_wait_seconds"]) and 0 < float(row["data_wait_fraction"]) < 1
    # a CPU run: the process's peak resident set, at least torch's own (well over 100 MiB), never falling
    peaks = [float(r["peak_memory_mib"]) for r in rows]
    assert 100 < peaks[0] <= peaks[1] < 64 * 1024
    for row in rows:
        assert 1 <= float(row["rank_backbone"]) <= 64  # width-8 ResNet-18: 64 features
        assert 1 <= float(row["rank_projector"]) <= 16
        assert float(row["train_barlow_loss"]) > 0 and "val_acc1" in row
    summary = [line for line in two_finished_runs["mabt_stdout"].splitlines() if "mvssl: epoch 1 train" in line]
    assert summary and f"train_barlow_loss={float(rows[1]['train_barlow_loss']):.4g}" in summary[0]


@pytest.mark.slow
def test_time_to_accuracy_records_the_first_epoch_past_each_target(two_finished_runs):
    rows = read_csv(two_finished_runs["mabt"] / "time_to_accuracy.csv")
    reached_10 = [r for r in rows if r["metric"] == "val_acc5" and float(r["target"]) == 10]
    assert len(reached_10) == 1 and int(reached_10[0]["epoch"]) == 0  # 3 classes: top-5 is 100%
    assert float(reached_10[0]["value"]) >= 10
    metrics = read_csv(two_finished_runs["mabt"] / "metrics.csv")
    assert 0 < float(reached_10[0]["train_seconds"]) <= float(metrics[0]["train_seconds"]) + 1e-6
    assert "mvssl: val_acc5 reached 10 at epoch 0" in two_finished_runs["mabt_stdout"]
