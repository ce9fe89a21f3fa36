"""Records from the runs' own clocks (benchmarks/own_clock.py), on a made-up finished run."""

from __future__ import annotations

import own_clock
import pytest

from mvssl_plugin.files import read_csv, write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, METRICS, RUN_LOG


def _run(folder, curve, finished=True):
    folder.mkdir(parents=True)
    write_json(folder / "args.json", {"name": folder.name, "method": "mabt", "seed": 1, "precision": "bf16-mixed"})
    launch = {"command": "python main_pretrain.py --config-name speedrun_cpu.yaml seed=1", "finished": finished}
    write_json(folder / RUN_LOG, {"launches": [{**launch, "plugin_commit": "abc1234"}]})
    rows = [
        {"epoch": i, "step": 390 * (i + 1), "train_seconds": 600.0 * (i + 1), "knn_val_acc1": v, "eval_seconds": 12.0}
        for i, v in enumerate(curve)
    ]
    write_csv(folder / EPOCH_KNN, rows)
    write_csv(folder / METRICS, [{"epoch": r["epoch"], "train_seconds": r["train_seconds"]} for r in rows])
    return folder


def test_a_record_reads_the_stays_above_minutes_off_the_runs_clock(tmp_path):
    # 10 training minutes an epoch; 60% first at epoch 2 (30 min), then a dip, then above from epoch 4 (50 min)
    run = _run(tmp_path / "runs" / "speedrun-cpu-s1", [48.0, 55.5, 60.2, 59.9, 61.0, 62.0])
    own_clock.collect(run, None, out=tmp_path / "out")
    page = tmp_path / "README.md"
    page.write_text(f"# x\n{own_clock.START}\nold\n{own_clock.END}\ntail\n")
    (row,) = own_clock.report(out=tmp_path / "out", pages=[page])
    assert "old" not in page.read_text() and "| speedrun-cpu-s1 | 1 | 6 |" in page.read_text()
    assert row["min_to_50"] == "20.0" and row["min_to_60"] == "50.0" and row["first_min_to_60"] == "30.0"
    assert row["min_to_65"] == "" and row["final_knn"] == 62.0 and row["train_minutes"] == 60.0
    assert row["knn_at_30_min"] == 60.2 and row["knn_at_20_min"] == 55.5 and row["knn_at_60_min"] == 62.0
    short = _run(tmp_path / "runs" / "short", [48.0, 55.5])  # 20 training minutes: nothing said of 30
    own_clock.collect(short, None, out=tmp_path / "out")
    rows = {r["run"]: r for r in own_clock.report(out=tmp_path / "out", pages=[])}
    assert rows["short"]["knn_at_20_min"] == 55.5 and rows["short"]["knn_at_30_min"] == ""
    assert row["commit"] == "abc1234" and "cores" in row["cpu"]
    assert {r["run"]: r["min_to_60"] for r in read_csv(tmp_path / "out" / "records.csv")}["speedrun-cpu-s1"] == "50.0"
    assert (
        "| speedrun-cpu-s1 | 1 | 6 | 62.0 | 20.0 | 20.0 | 50.0 | - | - | 55.5 |"
        in (tmp_path / "out" / "records.md").read_text()
    )


def test_an_unfinished_run_is_not_collected(tmp_path):
    run = _run(tmp_path / "runs" / "half", [40.0], finished=False)
    with pytest.raises(SystemExit, match="not finished"):
        own_clock.collect(run, None, out=tmp_path / "out")
