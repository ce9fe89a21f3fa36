"""Offline kNN (eval/knn_grid.py, eval/knn_run.py) through ``main_knn.py`` with solo-learn's flags."""

from __future__ import annotations

import re

import pytest
from helpers import run_entry

from mvssl_plugin.files import read_csv


@pytest.mark.slow
def test_offline_knn_on_the_cpu_with_solo_learns_flags(two_finished_runs, tiny_cifar, tmp_path):
    args = [
        "--pretrained_checkpoint_dir", str(two_finished_runs["mabt"]),
        "--dataset", "cifar10",
        "--train_data_path", tiny_cifar["train"],
        "--val_data_path", tiny_cifar["train"],  # the bank holds every query: k=1 must find itself
        "--k", "1", "3",
        "--temperature", "0.07",
        "--num_workers", "0",
        "--batch_size", "8",
    ]  # fmt: skip
    result = run_entry("main_knn.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "scheduler_interval" not in result.stderr, "solo-learn's resume caution: an evaluation resumes nothing"
    # no terminal here: whole progress lines, not tqdm's carriage-return redraws on one line
    assert "\r" not in result.stderr and re.search(r"^train features \d+/\d+ \(100%\), \d+ s$", result.stderr, re.M)
    rows = read_csv(two_finished_runs["mabt"] / "knn.csv")
    assert len(rows) == 2 * 2 * 2  # feature x k x (cosine with one T, euclidean)
    assert {(r["feature"], r["distance"]) for r in rows} == {
        (f, d) for f in ("backbone", "projector") for d in ("cosine", "euclidean")
    }
    for row in rows:
        if row["k"] == "1":
            assert float(row["acc1"]) == 100.0, row


@pytest.mark.slow
def test_knn_reports_bad_input_in_one_line(two_finished_runs, tmp_path):
    result = run_entry(
        "main_knn.py",
        ["--pretrained_checkpoint_dir", str(tmp_path), "--dataset", "cifar10", "--train_data_path", str(tmp_path),
         "--val_data_path", str(tmp_path)],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "holds no complete .ckpt" in result.stderr
