"""Each pick's loss both ways (benchmarks/leaderboard_precision.py): the pairs' plan lines differ
only in ``performance.loss_fp32``, are collected per CPU kind, and are read against the record
seeds' spread after the same epoch."""

from __future__ import annotations

import leaderboard
import leaderboard_precision as precision

from mvssl_plugin.files import write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, RUN_LOG

PICKS = [
    {"tag": "barlow-adam-5e-4", "method": "barlow_twins", "holdout_knn": "45.5", "train_minutes": "5.0"},
    {"tag": "barlow-lars-0.3", "method": "barlow_twins", "holdout_knn": "30.0", "train_minutes": "5.0"},
    {"tag": "mabt-adam-4e-3", "method": "mabt", "holdout_knn": "47.0", "train_minutes": "4.7"},
]


def test_each_pick_runs_its_record_recipe_on_the_split_with_its_loss_in_bf16_then_float32():
    lines = precision.precision_lines(PICKS, seed=2)
    tags = [line.split("|")[0] for line in lines]
    assert tags == [
        "precision-barlow-bf16-s2",
        "precision-barlow-fp32-s2",
        "precision-mabt-bf16-s2",
        "precision-mabt-fp32-s2",
    ]
    bf16, fp32 = (set(line.split("|")[1].split()) for line in lines[:2])
    assert bf16 - fp32 == {"++performance.loss_fp32=false"} and fp32 - bf16 == {"++performance.loss_fp32=true"}
    assert {"solo_barlow_adam_cifar_cpu.yaml", "data.holdout=5000", "data.val_path=null", "max_epochs=3"} <= bf16
    assert [precision.precision_of(t) for t in tags[:2]] == [("barlow", "bf16", "2"), ("barlow", "fp32", "2")]
    assert precision.precision_of("precision-barlow-fp16-s1") is None
    assert precision.precision_of("record-barlow-adam-5e-4-s1") is None


def _run(root, tag, curve, seconds_per_epoch, column="knn_holdout_acc1", collected=False):
    """A finished run's folder below ``root`` (as the entry point leaves it, or ``collected``: flat)."""
    folder = root / tag if collected else root / tag / "method" / "offline-p"
    folder.mkdir(parents=True)
    write_json(folder / "args.json", {"name": tag})
    write_json(folder / RUN_LOG, {"launches": [{"finished": True}]})
    rows = [{"epoch": i, "train_seconds": seconds_per_epoch * (i + 1), column: v} for i, v in enumerate(curve)]
    write_csv(folder / EPOCH_KNN, rows)
    return folder


def test_a_pair_is_read_against_the_record_seeds_spread_after_the_same_epoch(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    _run(runs, "precision-barlow-bf16-s1", [36.0, 41.0, 45.0], 200.0)
    _run(runs, "precision-barlow-fp32-s1", [37.0, 43.0, 47.5], 230.0)
    _run(runs, "precision-mabt-bf16-s1", [40.0, 44.0], 100.0)  # no float32 twin, and short: no row
    copied = leaderboard.collect(runs, out=out)
    assert sorted(p.name for p in copied) == [
        "precision-barlow-bf16-s1",
        "precision-barlow-fp32-s1",
        "precision-mabt-bf16-s1",
    ]
    assert all(p.parent.parent.name == "precision" for p in copied)  # per CPU kind, beside the records
    for kind, seed, third in (("kind-a", 1, 44.0), ("kind-b", 2, 45.5)):
        _run(
            out / "records" / kind,
            f"record-barlow-adam-5e-4-s{seed}",
            [40.0, 43.0, third, 50.0],
            120.0,
            "knn_val_acc1",
            True,
        )
    table = precision.report_precision(out, PICKS)
    assert (out / "precision.md").read_text() == table  # the report writes its page
    (row,) = [line for line in table.splitlines() if line.startswith("| barlow")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["barlow", "barlow-adam-5e-4", "1", "36.00 41.00 45.00", "37.00 43.00 47.50"]
    # +2.50 after epoch 3, beyond the seeds' 1.50 and the 0.50 between two runs of the shipped (bf16) arm
    assert cells[5:] == ["+2.50", "44.00 to 45.50 (1.50 apart)", "45.50 (bf16; +0.50)", "1.15x"]
    assert not any(line.startswith("| mabt") for line in table.splitlines())
