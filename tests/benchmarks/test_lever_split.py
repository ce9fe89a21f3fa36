"""The speedrun's levers re-read on the validation split (benchmarks/lever_split.py): each lever's
screens as levers.csv ran them but held out of training and read on the split, the gain worked out
by the same arithmetic as levers.csv's."""

from __future__ import annotations

import lever_split
import pytest
from speedrun_settings import SETTINGS

from mvssl_plugin.files import read_csv, write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, RUN_LOG


def test_every_lever_setting_gets_its_screen_on_the_split_and_none_reads_the_test_set():
    lines = dict(line.split("|") for line in lever_split.plan(seed=2))
    assert len(lines) == len(lever_split.TAGS) and "split-peer-e3-s2" not in lines
    for tag, words in lines.items():
        args = words.split()
        assert "data.val_path=null" in args and "data.holdout=5000" in args and "epoch_knn.enabled=true" in args
        assert not any(a.startswith(("checkpoint.dir", "auto_resume", "epoch_knn.enabled=false")) for a in args)
        assert "seed=2" in args and tag.endswith("-s2") and "data.train_path=../shared/data/cifar10/train" in args
    ramp = lines["split-ramp-e4-s2"].split()  # its screen is 4 epochs at 16, 24, 32, 32 px
    assert "max_epochs=4" in ramp and "+memory.resolution.start=16" in ramp
    assert "data.num_views=8" in lines["split-m8-e3-s2"].split()
    cos = lines["split-cos-lr1e-3-e3-s2"].split()  # the schedule fitted to the screen's 3 epochs
    assert "scheduler.name=warmup_cosine" in cos and "++scheduler.warmup_epochs=0.3" in cos


def _screen(root, setting, seed, curve):
    tag = lever_split.tag_of(setting, seed)
    folder = root / tag / "mabt" / "offline-x"
    folder.mkdir(parents=True)
    write_json(folder / "args.json", {"name": tag, "method": "mabt"})
    write_json(folder / RUN_LOG, {"launches": [{"finished": True}]})
    rows = [{"epoch": i, "step": 351 * (i + 1), "train_seconds": 60.0 * (i + 1), "knn_holdout_acc1": v,
             "eval_seconds": 9.0} for i, v in enumerate(curve)]  # fmt: skip
    write_csv(folder / EPOCH_KNN, rows)


def test_the_split_gain_is_levers_csvs_arithmetic_on_the_split_and_a_flipped_sign_is_named(tmp_path):
    runs = tmp_path / "runs"
    _screen(runs, "lr5e-4", 1, [40.0, 43.0, 45.0])
    _screen(runs, "lr1e-3", 1, [41.0, 44.0, 46.5])  # the same step (the claims grid's): +1.5 at equal seconds
    _screen(runs, "cos-lr5e-4", 1, [38.0, 44.0, 46.0])  # +1.0 here, -5.00 on the test set
    unfinished = runs / "split-d64-e3-s1"
    unfinished.mkdir(parents=True)
    write_json(unfinished / "args.json", {"name": "split-d64-e3-s1"})
    assert sorted(p.name for p in lever_split.collect(runs, out=tmp_path / "split")) == [
        "split-cos-lr5e-4-e3-s1",
        "split-lr1e-3-e3-s1",
        "split-lr5e-4-e3-s1",
    ]
    on_test = tmp_path / "levers.csv"
    target, other = lever_split.TARGET_MACHINE, "Intel(R) Xeon(R) Processor, 2 cores, bf16 native"
    write_csv(on_test, [  # a row per machine: the split's gains are read beside the target machine's
        {"changed": "lr1e-3", "reference": "lr5e-4", "gain_points_equal_seconds": "2.11", "timed_on": target},
        {"changed": "lr1e-3", "reference": "lr5e-4", "gain_points_equal_seconds": "-0.5", "timed_on": other},
        {"changed": "cos-lr5e-4", "reference": "lr5e-4", "gain_points_equal_seconds": "-5.0", "timed_on": target},
    ])  # fmt: skip
    page = tmp_path / "speedrun.md"
    page.write_text(f"{lever_split.START}\nstale table\n{lever_split.END}\n")
    table = lever_split.report(out=tmp_path / "split", pages=[page], test_levers=on_test)
    assert "stale table" not in page.read_text() and table.rstrip() in page.read_text()
    rows = {r["changed"]: r for r in read_csv(tmp_path / "split" / "levers_split.csv")}
    assert set(rows) == {"lr1e-3", "cos-lr5e-4"}  # a lever with a side not screened has no row
    assert float(rows["lr1e-3"]["gain_points_equal_seconds"]) == pytest.approx(1.5)
    assert rows["lr1e-3"]["sign_changed"] == "no" and rows["cos-lr5e-4"]["sign_changed"] == "yes"
    assert "| +1.50 | +2.11 | no |" in table and "| +1.00 | -5.00 | yes |" in table


@pytest.mark.slow
def test_a_split_screen_trains_as_its_plan_line_says(tiny_cifar, tmp_path, one_thread):
    """The ramp's line (a 4-epoch screen, views growing from 16 px) on tiny data with 6 images held out."""
    from helpers import run_entry, tiny_overrides

    tag = lever_split.tag_of("ramp", 1)
    words = dict(line.split("|") for line in lever_split.plan())[tag].split()
    keep = ("max_epochs", "method_kwargs.proj_output_dim", "data.holdout", "data.train_path", "data.num_workers")
    args = [a for a in words if not a.startswith(keep)] + ["data.holdout=6", "max_epochs=2"]
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    tiny = [o for o in tiny if not o.startswith(("data.val_path", "max_epochs"))]
    result = run_entry("main_pretrain.py", [*args, *tiny, f"name={tag}"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (knn,) = tmp_path.rglob(EPOCH_KNN)
    rows = read_csv(knn)
    assert len(rows) == 2 and "knn_val_acc1" not in rows[0] and 0.0 <= float(rows[-1]["knn_holdout_acc1"]) <= 100.0
    assert SETTINGS["ramp"].resolution_start == 16
