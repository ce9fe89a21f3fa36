"""``main_compare.py`` (eval/compare.py): the side-by-side table and plots of local runs,
the Pareto front, and what is missing named."""

from __future__ import annotations

import pytest
from helpers import run_entry

from mvssl_plugin.eval.compare import pareto_front
from mvssl_plugin.files import read_csv


def test_pareto_front_keeps_runs_nothing_beats():
    points = [(10, 50), (20, 60), (15, 40), (30, 55), (40, 70)]
    assert pareto_front(points) == [(10, 50), (20, 60), (40, 70)]


@pytest.mark.slow
def test_compare_writes_table_and_plots_from_local_logs(two_finished_runs, tmp_path):
    out = tmp_path / "cmp"
    result = run_entry(
        "main_compare.py", [str(two_finished_runs["root"]), "--out", str(out), "--targets", "10", "100"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = read_csv(out / "comparison.csv")
    assert sorted(r["method"] for r in table) == ["barlow_twins", "mabt"]
    by_method = {r["method"]: r for r in table}
    assert by_method["mabt"]["views"] == "4" and by_method["barlow_twins"]["views"] == "2"
    assert by_method["mabt"]["epochs"] == "2"
    final = float(read_csv(two_finished_runs["mabt"] / "metrics.csv")[-1]["val_acc1"])
    assert float(by_method["mabt"]["final val_acc1"]) == pytest.approx(final, abs=0.01)
    assert "| run |" in (out / "comparison.md").read_text()
    for name in ("accuracy_vs_epoch.png", "accuracy_vs_time.png", "pareto.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_compare_names_what_is_missing(two_finished_runs, tmp_path):
    empty = run_entry("main_compare.py", [str(tmp_path)], cwd=tmp_path)
    assert empty.returncode == 2 and "no pretraining run folders" in empty.stderr
    metric = run_entry(
        "main_compare.py", [str(two_finished_runs["root"]), "--metric", "val_top1", "--out", str(tmp_path)], tmp_path
    )
    assert metric.returncode == 2 and "--metric val_top1: no run logged it" in metric.stderr
