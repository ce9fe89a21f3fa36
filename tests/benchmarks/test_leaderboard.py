"""solo-learn's methods and ours tuned alike (benchmarks/leaderboard.py, plans.py): the same screens for
every method, none reading the test set, each training as a user runs it; the pick per method
by the holdout kNN."""

from __future__ import annotations

import shutil
from collections import Counter

import leaderboard
import leaderboard_plan as plans
import leaderboard_records
import pytest

from mvssl_plugin.files import read_csv, write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, METRICS, RUN_LOG


def test_every_method_gets_the_same_six_screens_on_the_split_and_none_reads_the_test_set():
    screens = plans.screens()
    assert len({s.tag for s in screens}) == len(screens)
    per_method = Counter((s.method.key, s.optimizer) for s in screens)
    assert set(per_method.values()) == {3} and len(per_method) == 2 * len(plans.METHODS)
    for s in screens:
        args = s.arguments()
        assert "data.val_path=null" in args and "data.holdout=5000" in args and "max_epochs=3" in args
        assert args[:2] == ["--config-name", s.method.recipe] and args[-1] == f"optimizer.lr={s.lr}"
    byol = {s.lr for s in screens if s.method.key == "byol" and s.optimizer == "lars"}
    assert byol == {"0.5", "1", "2"}  # 0.5x, 1x, 2x what solo-learn ships
    first = plans.screens("A")
    assert [s.tag for s in first] == [s.tag for s in screens[: len(first)]] and len(first) == 14
    assert {(s.method.key, s.lr) for s in first} >= {("barlow", "0.3"), ("byol", "1"), ("mabt", "2e-3")}
    ours = {m.key: m.recipe for m in plans.METHODS if m.ours}
    assert ours == {
        "mabt": "speedrun_mabt_cpu.yaml",
        "mavicreg": "speedrun_mavicreg_cpu.yaml",
        "mmcr": "speedrun_mmcr_cpu.yaml",
    }
    # a peer's Adam drops its LARS arguments; ours takes LARS's
    peer_adam = next(s for s in screens if s.tag == "simclr-adam-2e-3").arguments()
    assert "~optimizer.kwargs" in peer_adam and "scheduler.name=none" in peer_adam
    ours_lars = next(s for s in screens if s.tag == "mabt-lars-0.3").arguments()
    assert "optimizer.name=lars" in ours_lars and "~optimizer.kwargs" not in ours_lars


def _screen(root, tag, method, curve, finished=True, loss="1.5"):
    folder = root / tag / method / "offline-x"
    folder.mkdir(parents=True)
    write_json(folder / "args.json", {"name": tag, "method": method, "optimizer": {"batch_size": 256}})
    write_json(folder / RUN_LOG, {"launches": [{"finished": finished}]})
    rows = [{"epoch": i, "train_seconds": 120.0 * (i + 1), "knn_holdout_acc1": v} for i, v in enumerate(curve)]
    write_csv(folder / EPOCH_KNN, rows)
    write_csv(folder / METRICS, [{**r, "train_vicreg_loss": loss} for r in rows])
    (root / f"{tag}.log").write_text("console\n")


def test_the_report_picks_each_methods_best_screen_by_its_last_holdout_knn(tmp_path):
    runs = tmp_path / "runs"
    _screen(runs, "barlow-lars-0.3", "barlow_twins", [30.0, 38.0, 41.5])
    _screen(runs, "barlow-adam-2e-3", "barlow_twins", [35.0, 44.0, 43.0])  # best at its last epoch
    _screen(runs, "byol-lars-1", "byol", [20.0, 25.0, 47.0])
    _screen(runs, "byol-adam-2e-3", "byol", [40.0], finished=False)  # still running: left out
    _screen(runs, "not-a-screen", "byol", [60.0])  # not in the plan: left out
    _screen(runs, "vicreg-lars-0.3", "vicreg", [10.0], finished=False, loss="nan")  # stopped once it diverged
    # stopped by the entry point in its first epoch (exit 3): no kNN, no metrics.csv
    early = runs / "simclr-lars-0.8" / "simclr" / "offline-y"
    early.mkdir(parents=True)
    write_json(early / "args.json", {"name": "simclr-lars-0.8", "method": "simclr", "optimizer": {"batch_size": 256}})
    launch = {"finished": False, "status": "failed: FloatingPointError", "epochs_completed": 0, "train_seconds": 30.0}
    write_json(early / RUN_LOG, {"launches": [launch]})
    copied = leaderboard.collect(runs, out=tmp_path / "out")
    assert sorted(p.name for p in copied) == [
        "barlow-adam-2e-3",
        "barlow-lars-0.3",
        "byol-lars-1",
        "simclr-lars-0.8",
        "vicreg-lars-0.3",
    ]
    assert (tmp_path / "out" / "screens" / "byol-lars-1" / "console.log").is_file()
    page = tmp_path / "speedrun.md"
    page.write_text(f"# x\n{leaderboard.START}\nstale table\n{leaderboard.END}\n")
    table = leaderboard.report(out=tmp_path / "out", pages=[page])
    assert "stale" not in page.read_text() and table in page.read_text()
    assert "| barlow_twins | adam | 2e-3 | 256 | **43.00** | 35.00 44.00 43.00 | 6.0 | 2 of 6 |" in table
    assert "| barlow_twins | lars | 0.3 | 256 | 41.50 |" in table and "**47.00**" in table
    assert "| vicreg | lars | 0.3 | 256 | **10.00** (non-finite loss in epoch 0: stopped) |" in table
    assert "| simclr | lars | 0.8 | 256 | - (non-finite loss in epoch 0: stopped) | " in table  # and no pick
    rows = read_csv(tmp_path / "out" / "screens.csv")
    assert {r["tag"]: r["round"] for r in rows} == {
        "barlow-adam-2e-3": "A",
        "barlow-lars-0.3": "A",
        "byol-lars-1": "A",
        "simclr-lars-0.8": "B",
        "vicreg-lars-0.3": "A",
    }
    assert {m: r["tag"] for m, r in plans.picks(rows).items()} == {
        "barlow_twins": "barlow-adam-2e-3",
        "byol": "byol-lars-1",
        "vicreg": "vicreg-lars-0.3",
    }


def _rows(method, knn_by_lr, lars=(30.0, 30.0, 30.0)):
    m = next(m for m in plans.METHODS if m.key == method)
    rows = [
        {"tag": f"{method}-adam-{lr}", "optimizer": "adam", "lr": lr, "holdout_knn": k} for lr, k in knn_by_lr.items()
    ]
    lrs = [f"{m.lars_lr * f:g}" for f in plans.LARS_FACTORS]
    return rows + [
        {"tag": f"{method}-lars-{lr}", "optimizer": "lars", "lr": lr, "holdout_knn": k} for lr, k in zip(lrs, lars)
    ]


def test_a_best_adam_screen_at_the_grids_edge_gets_the_next_lr_out_alike_for_every_method():
    rows = _rows("vicreg", {"1e-3": 45.0, "2e-3": 34.0, "4e-3": 31.0})  # best at the lowest lr: half it
    rows += _rows("mabt", {"1e-3": 46.5, "2e-3": 46.3, "4e-3": 47.4})  # at the highest: twice it
    rows += _rows("simclr", {"1e-3": 38.0, "2e-3": 43.0, "4e-3": 39.0})  # inside the grid: nothing
    rows += _rows("byol", {"1e-3": 40.0, "2e-3": 37.0})  # six not all run: nothing yet
    rows += _rows("barlow", {"5e-4": 44.0, "1e-3": 41.5, "2e-3": 31.0, "4e-3": 24.0})  # still at the edge
    rows += _rows("mmcr", {"1e-3": 40.0, "2e-3": 37.0, "4e-3": 35.0}, lars=(30.0, 41.0, ""))  # LARS best: Adam's edge
    edges = plans.edge_screens(rows)
    assert [(s.tag, s.round) for s in edges] == [
        ("barlow-adam-2.5e-4", "C"), ("vicreg-adam-5e-4", "C"), ("mabt-adam-8e-3", "C"), ("mmcr-adam-5e-4", "C"),
    ]  # fmt: skip
    # once screened, the edge is no longer planned, and its tag reads back as the screen it is
    assert "vicreg-adam-5e-4" not in {s.tag for s in plans.edge_screens(rows + _rows("vicreg", {"5e-4": 40.0}))}
    assert plans.screen_of("vicreg-adam-5e-4").arguments()[-1] == "optimizer.lr=5e-4"
    assert plans.screen_of("mabt-adam-2e-3-compiled") is None and plans.screen_of("split-m4") is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "tag",
    ["vicreg-lars-0.3", "simclr-adam-2e-3", "byol-lars-1", "mabt-lars-0.3", "mavicreg-adam-2e-3", "mmcr-lars-0.3"],
)
def test_a_screen_trains_as_its_plan_line_says(tag, tiny_cifar, tmp_path, one_thread):
    """The plan's arguments for the new peer recipes and for a change of optimizer family, on tiny
    data (8 images a class, 2 of them held out) with the plan's own split and null test set."""
    from helpers import run_entry, tiny_overrides

    (screen,) = [s for s in plans.screens() if s.tag == tag]
    args = [a if a != "data.holdout=5000" else "data.holdout=6" for a in screen.arguments()]
    args = [a for a in args if not a.startswith("max_epochs")]
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    tiny = [o for o in tiny if not o.startswith("data.val_path")]
    result = run_entry("main_pretrain.py", [*args, *tiny, f"name={tag}"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (knn,) = tmp_path.rglob(EPOCH_KNN)
    (row,) = read_csv(knn)
    assert 0.0 <= float(row["knn_holdout_acc1"]) <= 100.0 and "knn_val_acc1" not in row


def test_a_picks_record_is_the_recipe_that_is_its_setting_on_two_seeds():
    rows = [
        {"tag": "vicreg-lars-0.3", "method": "vicreg", "holdout_knn": "47.0", "train_minutes": "7.5"},
        {"tag": "vicreg-adam-5e-4", "method": "vicreg", "holdout_knn": "52.0", "train_minutes": "6.0"},
        {
            "tag": "vicreg-lars-0.6",
            "method": "vicreg",
            "holdout_knn": "10.0",
            "train_minutes": "1.0",
            "diverged_in_epoch": 0,
        },  # fmt: skip
        {"tag": "mabt-adam-4e-3", "method": "mabt", "holdout_knn": "52.0", "train_minutes": "4.2"},
    ]
    lines = dict(line.split("|") for line in plans.record_lines(rows))
    assert sorted(lines) == ["record-mabt-adam-4e-3-s1", "record-mabt-adam-4e-3-s2", "record-vicreg-adam-5e-4-s1",
                             "record-vicreg-adam-5e-4-s2"]  # fmt: skip
    vicreg = lines["record-vicreg-adam-5e-4-s2"].split()
    # the recipe holds the lr, the data and the budget: the line adds only the seed and wandb
    assert vicreg[:2] == ["--config-name", "solo_vicreg_adam_cifar_cpu.yaml"] and "seed=2" in vicreg
    assert not any(a.startswith(("optimizer", "max_epochs", "data.", "epoch_knn")) for a in vicreg)
    assert {"wandb.offline=true", "wandb.project=mvssl-leaderboard", "+wandb.tags=[leaderboard]"} <= set(vicreg)
    # 60 minutes: the constant lr trains on (1.56 min an epoch: 39 epochs, doubled), read at 30
    longer = dict(line.split("|") for line in plans.record_lines(rows, minutes=60))
    assert {"epoch_knn.stop_after_minutes=60", "max_epochs=78"} <= set(longer["record-mabt-adam-4e-3-s2"].split())
    # a peer's loss in float32 as ours compute theirs: the peers' lines only, tagged
    fp32 = dict(line.split("|") for line in plans.record_lines(rows, fp32=True))
    assert sorted(fp32) == ["record-vicreg-adam-5e-4-fp32-s1", "record-vicreg-adam-5e-4-fp32-s2"]
    assert (
        fp32["record-vicreg-adam-5e-4-fp32-s1"] == lines["record-vicreg-adam-5e-4-s1"] + " +performance.loss_fp32=true"
    )
    assert plans.record_of("record-vicreg-adam-5e-4-fp32-s1").tag == "vicreg-adam-5e-4"


def test_a_pick_no_recipe_holds_stops_the_plan_naming_the_fix():
    rows = [{"tag": "byol-lars-1", "method": "byol", "holdout_knn": "47.0", "train_minutes": "7.5"}]
    with pytest.raises(SystemExit, match="no recipe is the setting byol-lars-1: write scripts/pretrain/cifar10/"):
        plans.record_lines(rows)


def _record(root, tag, method, curve, minutes_per_epoch, stop=None, loss_fp32=None):
    folder = root / tag / method / "offline-r"
    folder.mkdir(parents=True)
    args = {"name": tag, "method": method, "seed": int(tag[-1]), "precision": "bf16-mixed"}
    args["performance"] = {} if loss_fp32 is None else {"loss_fp32": loss_fp32}
    write_json(folder / "args.json", {**args, "epoch_knn": {"stop_after_minutes": stop}})
    launch = {"finished": True, "plugin_commit": "abc", "command": f"python main_pretrain.py name={tag}"}
    write_json(folder / RUN_LOG, {"launches": [launch]})
    rows = [
        {"epoch": i, "train_seconds": 60.0 * minutes_per_epoch * (i + 1), "knn_val_acc1": v, "eval_seconds": 15.0}
        for i, v in enumerate(curve)
    ]
    write_csv(folder / EPOCH_KNN, rows)
    write_csv(folder / METRICS, rows)


def test_the_records_table_sets_each_of_ours_against_the_best_peers_accuracy_at_its_end(tmp_path):
    runs = tmp_path / "runs"
    _record(runs, "record-simclr-lars-0.2-s1", "simclr", [40.0, 50.0, 54.0], 10.0)
    _record(runs, "record-simclr-lars-0.2-s2", "simclr", [41.0, 49.0, 56.0], 10.0)  # mean 55.0 after 30 min
    _record(runs, "record-byol-adam-2e-3-s1", "byol", [30.0, 40.0, 45.0], 10.0)
    # ours: 56 at 10 min, dips to 54.5 at 15, then stays: 55.0 is reached for good at 20 minutes
    _record(runs, "record-mabt-adam-4e-3-s1", "mabt", [50.0, 56.0, 54.5, 57.0, 60.0, 61.0], 5.0)
    _record(runs, "record-mabt-adam-4e-3-s2", "mabt", [40.0, 45.0, 50.0], 10.0)  # never reaches it
    _record(runs, "record-mabt-adam-9e-3-s1", "mabt", [60.0], 10.0)  # not a pick of any plan: left out
    copied = leaderboard.collect(runs, out=tmp_path / "out")
    here = leaderboard.machine_key(leaderboard.machine())
    assert sorted((p.parent.parent.name, p.parent.name) for p in copied) == [("records", here)] * 5
    page = tmp_path / "speedrun.md"
    page.write_text(f"{leaderboard_records.RECORDS_START}\nstale table\n{leaderboard_records.RECORDS_END}\n")
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n{leaderboard_records.VERSUS_START}\nstale\n{leaderboard_records.VERSUS_END}\nkept\n")
    table = leaderboard_records.report_records(out=tmp_path / "out", pages=[page], headline_pages=[readme])
    assert "stale table" not in page.read_text() and table.rstrip() in page.read_text()
    # the README gets the comparison in short, a row per recipe with its seeds side by side,
    # not the table, and keeps its other lines
    assert readme.read_text().startswith("# top\n") and readme.read_text().endswith("\nkept\n")
    assert "stale" not in readme.read_text() and "| mabt |" not in readme.read_text()
    short = (f"| `speedrun_mabt_cpu.yaml` | {here} | fp32 | 25.0 / - | - / - | - / - | 61.00 / 50.00 "
             "| 1.50x / never sooner than simclr-lars-0.2 (bf16 loss, 55.00%) |")  # fmt: skip
    assert short in readme.read_text().splitlines()
    assert "simclr-lars-0.2, 55.00% test kNN after 30.0 training minutes and 3 epochs (mean of 2 record(s))" in table
    # 1.5x less time in more epochs (4 of 5 minutes against 3 of 10): the method's epochs are cheaper
    assert (
        "- record-mabt-adam-4e-3-s1: stays at or above 55.00% from 20.0 training minutes: 1.50x less time; "
        "from its epoch 4, against the peer's 3" in table
    )
    assert "- record-mabt-adam-4e-3-s2: does not stay at or above 55.00% within its 30.0 minutes" in table
    assert "| mabt | mabt-adam-4e-3 | fp32 | 1 | 6 | 30.0 | 61.00 | 5.0 | 20.0 | 25.0 |" in table
    rows = read_csv(tmp_path / "out" / "records.csv")
    assert {r["setting"] for r in rows} == {"simclr-lars-0.2", "byol-adam-2e-3", "mabt-adam-4e-3"}
    assert (tmp_path / "out" / f"records_{here}.png").stat().st_size > 0


def test_records_are_compared_only_with_peers_recorded_on_the_same_cpu_kind(tmp_path):
    runs = tmp_path / "runs"
    _record(runs, "record-simclr-lars-0.2-s1", "simclr", [40.0, 50.0, 54.0], 10.0)
    _record(runs, "record-mabt-adam-4e-3-s1", "mabt", [50.0, 56.0, 57.0], 10.0)
    out = tmp_path / "out"
    leaderboard.collect(runs, out=out)
    (here,) = [p.name for p in (out / "records").iterdir()]
    # the same two settings on another kind, with other curves: there the peer ends higher
    other = out / "records" / "slow-cpu-1-2"
    for tag, curve in (
        ("record-simclr-lars-0.2-s1", [50.0, 58.0, 60.0]),
        ("record-mabt-adam-4e-3-s1", [30.0, 50.0, 59.0]),
    ):
        shutil.copytree(out / "records" / here / tag, other / tag)
        rows = read_csv(other / tag / EPOCH_KNN)
        write_csv(other / tag / EPOCH_KNN, [{**r, "knn_val_acc1": v} for r, v in zip(rows, curve)])
        write_json(other / tag / "machine.json", {"model": "Slow CPU", "family": 1, "model_number": 2, "cores": 2,
                                                  "isa": "avx2"})  # fmt: skip
    readme = tmp_path / "README.md"
    readme.write_text(f"{leaderboard_records.VERSUS_START}\n{leaderboard_records.VERSUS_END}\n")
    table = leaderboard_records.report_records(out=out, pages=[], headline_pages=[readme])
    # here: the peer's 54.00, ours from its second epoch (20 minutes); there: that kind's peer's 60.00,
    # which ours never reaches
    assert "- record-mabt-adam-4e-3-s1: stays at or above 54.00% from 20.0 training minutes: 1.50x" in table
    assert "On Slow CPU (family 1 model 2), 2 cores, avx2, against the best of solo-learn's methods recorded on it: " \
           "simclr-lars-0.2, 60.00%" in table  # fmt: skip
    assert (
        "| `speedrun_mabt_cpu.yaml` | slow-cpu-1-2 | fp32 | - | - | - | 59.00 "
        "| never sooner than simclr-lars-0.2 (bf16 loss, 60.00%) |" in readme.read_text()
    )
    assert (
        f"| `speedrun_mabt_cpu.yaml` | {here} | fp32 | - | - | - | 57.00 "
        "| 1.50x sooner than simclr-lars-0.2 (bf16 loss, 54.00%) |" in readme.read_text()
    )
    assert "- record-mabt-adam-4e-3-s1: does not stay at or above 60.00% within its 30.0 minutes" in table
    rows = read_csv(out / "records.csv")
    assert sorted(r["machine"] for r in rows) == sorted([here, here, "slow-cpu-1-2", "slow-cpu-1-2"])
    assert {p.name for p in out.glob("records_*.png")} == {f"records_{here}.png", "records_slow-cpu-1-2.png"}


def test_ours_are_set_against_the_peer_recorded_at_ours_loss_precision_where_there_is_one(tmp_path):
    """A peer's loss inside bf16 autocast and in float32 are two settings; where the kind has the
    float32 one, ours (float32) meet it, even where the bf16 one ended higher."""
    runs = tmp_path / "runs"
    _record(runs, "record-vicreg-adam-5e-4-s1", "vicreg", [40.0, 50.0, 58.0], 10.0)
    _record(runs, "record-vicreg-adam-5e-4-fp32-s1", "vicreg", [40.0, 50.0, 56.0], 10.0, loss_fp32=True)
    _record(runs, "record-mabt-adam-4e-3-s1", "mabt", [50.0, 56.0, 57.0, 59.0], 7.5)
    out = tmp_path / "out"
    (out / "screens" / "vicreg-adam-5e-4").mkdir(parents=True)  # the pick was screened (round C)
    leaderboard.collect(runs, out=out)
    readme = tmp_path / "README.md"
    readme.write_text(f"{leaderboard_records.VERSUS_START}\n{leaderboard_records.VERSUS_END}\n")
    table = leaderboard_records.report_records(out=out, pages=[], headline_pages=[readme])
    here = leaderboard.machine_key(leaderboard.machine())
    rows = readme.read_text().splitlines()
    assert (
        f"| `speedrun_mabt_cpu.yaml` | {here} | fp32 | - | - | - | 59.00 "
        "| 2.00x sooner than vicreg-adam-5e-4-fp32 (fp32 loss, 56.00%) |" in rows
    )
    # each precision a row of its own: the bf16 one no longer the peer ours are set against
    fp32 = "`solo_vicreg_adam_cifar_cpu.yaml` `+performance.loss_fp32=true`"
    assert f"| {fp32} | {here} | fp32 | - | - | - | 56.00 | (the best peer) |" in rows
    assert f"| `solo_vicreg_adam_cifar_cpu.yaml` | {here} | bf16 | - | - | - | 58.00 | - |" in rows
    assert "| vicreg | vicreg-adam-5e-4 | bf16 | 1 | 3 |" in table
    assert "| vicreg | vicreg-adam-5e-4-fp32 | fp32 | 1 | 3 |" in table
    assert {r["run"]: r["loss"] for r in read_csv(out / "records.csv")}["record-vicreg-adam-5e-4-s1"] == "bf16"


def test_a_record_trained_on_past_30_minutes_is_read_at_30_and_in_full_beside(tmp_path):
    runs = tmp_path / "runs"
    _record(runs, "record-vicreg-adam-1e-3-s1", "vicreg", [50.0, 55.0, 60.0], 10.0, stop=30)
    # ours at a constant lr, stopped by 60 minutes: 5 minutes an epoch, 61 from 20 minutes, 70 from 55
    curve = [50.0, 55.0, 58.0, 61.0, 62.0, 63.0, 64.0, 66.0, 65.5, 67.0, 70.0, 71.0]
    _record(runs, "record-mavicreg-adam-4e-3-s2", "mavicreg", curve, 5.0, stop=60)
    leaderboard.collect(runs, out=tmp_path / "out")
    readme = tmp_path / "README.md"
    readme.write_text(f"{leaderboard_records.VERSUS_START}\n{leaderboard_records.VERSUS_END}\n")
    table = leaderboard_records.report_records(out=tmp_path / "out", pages=[], headline_pages=[readme])
    # its row is the run as a 30-minute stop would have ended it: 6 epochs, 63.00
    assert "| mavicreg | mavicreg-adam-4e-3 | fp32 | 2 | 6 | 30.0 | 63.00 | 5.0 | 10.0 | 20.0 |" in table
    assert "- record-mavicreg-adam-4e-3-s2: stays at or above 60.00% from 20.0 training minutes: 1.50x" in table
    (beyond,) = read_csv(tmp_path / "out" / "beyond.csv")
    assert (beyond["epochs"], beyond["final_knn"], beyond["min_to_70"]) == ("12", "71.0", "55.0")
    assert (
        "- record-mavicreg-adam-4e-3-s2: 71.00% test kNN after 60.0 training minutes and 12 epochs; stays at "
        "or above 65% from 40.0 minutes, 70% from 55.0 minutes; 71.00% at 60 minutes" in table
    )
    assert "71.00%" not in readme.read_text()  # the headline keeps the 30-minute comparison alone
    rows = {r["run"]: r for r in read_csv(tmp_path / "out" / "records.csv")}
    assert rows["record-vicreg-adam-1e-3-s1"]["epochs"] == "3"  # a run stopped at 30 is read whole


def test_a_record_with_the_lrs_tail_is_the_recipe_holding_it_and_is_collected_as_a_record(tmp_path):
    rows = [
        {"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"},
        {"tag": "vicreg-adam-5e-4", "method": "vicreg", "holdout_knn": "47.0", "train_minutes": "7.5"},
    ]
    tailed = dict(line.split("|") for line in plans.record_lines(rows, minutes=60, tail=20))
    # the tail where a recipe holds it: mmcr's (kept on the split) and the best peer's (given the same
    # tail: the trainer's lr, not a method's), each its own recipe
    assert sorted(tailed) == ["record-mmcr-adam-8e-3-tail20-s1", "record-mmcr-adam-8e-3-tail20-s2",
                              "record-vicreg-adam-5e-4-tail20-s1", "record-vicreg-adam-5e-4-tail20-s2"]  # fmt: skip
    assert tailed["record-mmcr-adam-8e-3-tail20-s2"].split()[:2] == ["--config-name", "speedrun_mmcr_60min_cpu.yaml"]
    assert "solo_vicreg_adam_60min_cpu.yaml" == tailed["record-vicreg-adam-5e-4-tail20-s1"].split()[1]
    # a tail that starts before minute 30 would spoil the records' comparison there
    with pytest.raises(SystemExit, match="give --minutes at least 50 or a shorter --tail"):
        plans.record_lines(rows, minutes=40, tail=20)
    assert plans.record_of("record-mmcr-adam-8e-3-tail20-s2").tag == "mmcr-adam-8e-3"
    assert plans.record_of("record-mmcr-adam-8e-3-s1").tag == "mmcr-adam-8e-3"
    assert plans.record_of("split60-mmcr-adam-8e-3-tail20-s2") is None
    assert plans.record_of("record-mmcr-adam-8e-3-tail20") is None
    runs = tmp_path / "runs"  # a record of a setting on the screens' grid (out/ has no screens here)
    _record(runs, "record-mmcr-adam-4e-3-tail20-s1", "mmcr", [50.0, 58.0, 63.0, 66.0, 68.0, 70.5], 10.0, stop=60)
    (copied,) = leaderboard.collect(runs, out=tmp_path / "out")
    assert copied.parent.parent.name == "records"
    readme = tmp_path / "README.md"
    readme.write_text(f"{leaderboard_records.VERSUS_START}\n{leaderboard_records.VERSUS_END}\n")
    leaderboard_records.report_records(out=tmp_path / "out", pages=[], headline_pages=[readme])
    assert "No record of a peer yet." in readme.read_text()  # ours alone: nothing to set it against
    ((_, row),) = {r["run"]: r for r in read_csv(tmp_path / "out" / "records.csv")}.items()
    # its setting names the tail; its record row reads the first 30 minutes, before the tail starts at 40
    assert (row["setting"], row["epochs"], row["final_knn"]) == ("mmcr-adam-4e-3-tail20", "3", "63.0")
    (beyond,) = read_csv(tmp_path / "out" / "beyond.csv")
    assert (beyond["final_knn"], beyond["min_to_70"]) == ("70.5", "60.0")


def test_records_with_the_lrs_tail_meet_the_peer_given_the_same_tail_over_their_whole_budget(tmp_path):
    runs = tmp_path / "runs"
    # the peer with the tail: 10 minutes an epoch, 61.00 at 30 minutes, 67.00 at 60
    _record(runs, "record-vicreg-adam-5e-4-tail20-s1", "vicreg", [50.0, 56.0, 61.0, 63.0, 64.5, 67.0], 10.0, stop=60)
    # ours with the tail: 5 minutes an epoch, at or above 61 from 15 minutes and above 67 from 35
    curve = [55.0, 60.0, 62.0, 63.0, 64.0, 66.5, 67.0, 68.0, 68.5, 69.0, 70.0, 70.5]
    _record(runs, "record-mmcr-adam-8e-3-tail20-s1", "mmcr", curve, 5.0, stop=60)
    out = tmp_path / "out"
    for pick in ("vicreg-adam-5e-4", "mmcr-adam-8e-3"):  # the picks were screened (round C)
        (out / "screens" / pick).mkdir(parents=True)
    leaderboard.collect(runs, out=out)
    readme = tmp_path / "README.md"
    readme.write_text(f"{leaderboard_records.VERSUS_START}\n{leaderboard_records.VERSUS_END}\n")
    table = leaderboard_records.report_records(out=out, pages=[], headline_pages=[readme])
    here = leaderboard.machine_key(leaderboard.machine())
    # the first 30 minutes, before either tail starts, against the peer's first 30
    assert "- record-mmcr-adam-8e-3-tail20-s1: stays at or above 61.00% from 15.0 training minutes: 2.00x" in table
    # the whole budget against the peer's whole budget, not its 30-minute reading
    assert (
        "over the whole budget with the lr's tail, against the best of solo-learn's methods recorded on it: "
        "vicreg-adam-5e-4-tail20, 67.00% test kNN after 60.0 training minutes and 6 epochs (mean of 1 record(s))"
        in table
    )
    assert (
        "- record-mmcr-adam-8e-3-tail20-s1: stays at or above 67.00% from 35.0 training minutes: 1.71x less time; "
        "from its epoch 7, against the peer's 6" in table
    )
    rows = readme.read_text().splitlines()
    assert (
        f"| `speedrun_mmcr_60min_cpu.yaml` | {here} | fp32 | 10.0 | 30.0 | 55.0 | 70.50 "
        "| 1.71x sooner than vicreg-adam-5e-4-tail20 (bf16 loss, 67.00%) |" in rows
    )
    assert f"| `solo_vicreg_adam_60min_cpu.yaml` | {here} | bf16 | 30.0 | 60.0 | - | 67.00 | (the best peer) |" in rows


def test_a_lever_at_a_records_length_is_the_picks_record_line_on_the_split_with_and_without_it():
    rows = [
        {"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"},
        {"tag": "mmcr-lars-0.3", "method": "mmcr", "holdout_knn": "40.0", "train_minutes": "4.5"},
        {"tag": "byol-lars-1", "method": "byol", "holdout_knn": "47.0", "train_minutes": "7.5"},
    ]
    const, tail = plans.split_lines(rows, "mmcr", minutes=60, tail=20, seed=2)
    mmcr = [r for r in rows if r["method"] == "mmcr"]
    (record,) = [x for x in plans.record_lines(mmcr, minutes=60) if x.startswith("record-mmcr-adam-8e-3-s2|")]
    assert const.split("|")[0] == "split60-mmcr-adam-8e-3-const-s2"
    assert tail.split("|")[0] == "split60-mmcr-adam-8e-3-tail20-s2"
    # the record's arguments, the split held out (the test set still read), the tail the one difference
    extra = set(const.split("|")[1].split()) - set(record.split("|")[1].split())
    assert extra == {"data.holdout=5000", "+wandb.tags=[leaderboard,split60]"}
    assert tail.split("|")[1] == const.split("|")[1] + " ++scheduler.tail_minutes=20"
    assert plans.split_of("split60-mmcr-adam-8e-3-tail20-s2")[1:] == ("tail20", "2")
    assert plans.split_of("record-mmcr-adam-8e-3-s2") is None
    with pytest.raises(SystemExit, match="has a schedule"):
        plans.split_lines(rows, "byol", minutes=60, tail=20, seed=1)


def test_a_lever_at_a_records_length_is_read_on_the_holdout_against_its_constant_twin(tmp_path):
    runs = tmp_path / "runs"
    for tag, holdout, test in (
        ("split60-mmcr-adam-8e-3-const-s1", [60.0, 66.0, 67.5], [59.0, 65.0, 66.0]),
        ("split60-mmcr-adam-8e-3-tail20-s1", [60.0, 66.5, 69.0], [59.0, 65.5, 70.0]),
        ("split60-mavicreg-adam-4e-3-tail20-s1", [60.0, 66.0, 69.5], [59.0, 65.0, 69.0]),
    ):
        _record(runs, tag, tag.split("-")[1], test, 20.0, stop=60)
        (knn,) = (runs / tag).rglob(EPOCH_KNN)
        write_csv(knn, [{**r, "knn_holdout_acc1": h} for r, h in zip(read_csv(knn), holdout)])
    copied = leaderboard.collect(runs, out=tmp_path / "out")
    assert {p.parent.parent.name for p in copied} == {"split"}
    page = tmp_path / "speedrun.md"
    page.write_text(f"{leaderboard.SPLIT_START}\nstale\n{leaderboard.SPLIT_END}\n")
    table = leaderboard.report_split(out=tmp_path / "out", pages=[page])
    assert "stale" not in page.read_text() and table.rstrip() in page.read_text()
    # the holdout decides (+1.50); the test set's 70.00 is shown beside it, not used
    assert "| mmcr-adam-8e-3 | tail20 | 1 | 3 | 60.0 | 69.00 | 20.0 | 40.0 | - | 70.00 |" in table
    assert "- mmcr-adam-8e-3, seed 1: tail20 against the constant lr, at the end on the holdout: +1.50 points" in table
    assert "- tail20 on mmcr-adam-8e-3: 1 of 2 seeds run: not decided" in table
    # a lever run without its twin is listed as such, not read against another method's run
    assert "- mavicreg-adam-4e-3, seed 1: tail20 has no const run of its seed to be read against yet" in table
    assert "tail20 on mavicreg-adam-4e-3" not in table


def test_a_lever_is_kept_only_where_it_helps_on_every_one_of_two_seeds():
    assert leaderboard.keep_verdict([1.5]) == "1 of 2 seeds run: not decided"
    # one seed that does not help decides it: the rule needs every seed
    lost = "not kept: it does not help on 1 of 1 seeds run so far, and must help on all 2"
    assert leaderboard.keep_verdict([-1.08]) == lost
    assert leaderboard.keep_verdict([1.5, 0.25]) == "kept: it helps on all 2 seeds (mean +0.88 points)"
    assert leaderboard.keep_verdict([1.5, -0.5]) == "not kept: it helps on 1 of 2 seeds (mean +0.50 points)"
    assert leaderboard.keep_verdict([0.0, 0.0]).startswith("not kept: it helps on 0 of 2")


def test_a_warm_up_to_a_higher_peak_is_the_picks_tailed_split_line_at_that_lr_with_the_warm_up():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    _, tail = plans.split_lines(rows, "mmcr", minutes=60, tail=20, seed=2)
    warm = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=2, warmup=3, peak="1.6e-2")
    assert warm.split("|")[0] == "split60-mmcr-adam-1.6e-2-warm3-tail20-s2"
    words, base = warm.split("|")[1].split(), tail.split("|")[1].split()
    # the lr and the warm-up are the two differences from the run it is read against
    assert set(words) - set(base) == {"optimizer.lr=1.6e-2", "++scheduler.warmup_minutes=3"}
    assert set(base) <= set(words)  # the recipe holds 8e-3; the peak overrides it
    screen, lever, seed = plans.split_of("split60-mmcr-adam-1.6e-2-warm3-tail20-s2")
    assert (screen.tag, lever, seed) == ("mmcr-adam-1.6e-2", "warm3-tail20", "2")
    assert [plans.lever_base(x) for x in ("warm3-tail20", "tail20")] == ["tail20", "const"]
    with pytest.raises(SystemExit, match="either --warmup minutes with a --peak lr above zero, or --ramp"):
        plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=2, warmup=0, peak="1.6e-2")


def test_the_resolution_ramp_at_a_records_length_is_the_picks_tailed_split_line_with_the_ramp():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    _, tail = plans.split_lines(rows, "mmcr", minutes=60, tail=20, seed=1)
    ramp = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=1, ramp=(16, 0.2))
    assert ramp.split("|")[0] == "split60-mmcr-adam-8e-3-ramp16by0.2-tail20-s1"
    words, base = ramp.split("|")[1].split(), tail.split("|")[1].split()
    # the ramp is the one difference from the run it is read against: the same lr, tail and budget
    assert set(words) - set(base) == {"+memory.resolution.start=16", "+memory.resolution.ramp_end=0.2"}
    assert set(base) <= set(words)
    screen, lever, seed = plans.split_of("split60-mmcr-adam-8e-3-ramp16by0.2-tail20-s1")
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "ramp16by0.2-tail20", "1")
    assert plans.lever_base(lever) == "tail20"
    with pytest.raises(SystemExit, match="or --tail minutes and"):
        plans.lever_line(rows, "mmcr", minutes=60, tail=0, seed=1, ramp=(16, 0.2))


def test_the_augmentations_ramp_is_read_against_the_resolution_ramp_alone():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    ramp = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=1, ramp=(16, 0.2))
    both = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=1, ramp=(16, 0.2), strength=0.5)
    assert both.split("|")[0] == "split60-mmcr-adam-8e-3-aug0.5-ramp16by0.2-tail20-s1"
    words, base = both.split("|")[1].split(), ramp.split("|")[1].split()
    assert set(words) - set(base) == {"+memory.resolution.strength_start=0.5"} and set(base) <= set(words)
    screen, lever, seed = plans.split_of(both.split("|")[0])
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "aug0.5-ramp16by0.2-tail20", "1")
    assert plans.lever_base(lever) == "ramp16by0.2-tail20"  # the ramp's own split run
    for strength, ramp_ in ((0.5, None), (1.0, (16, 0.2))):
        with pytest.raises(SystemExit, match="a fraction in \\[0, 1\\), with --ramp px"):
            plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=1, ramp=ramp_, strength=strength)


def test_the_cyclic_lr_is_the_picks_tailed_split_line_with_the_tail_in_every_cycle():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    _, tail = plans.split_lines(rows, "mmcr", minutes=60, tail=20, seed=1)
    cyclic = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=1, cycle=20)
    assert cyclic.split("|")[0] == "split60-mmcr-adam-8e-3-cycle20-tail20-s1"
    words, base = cyclic.split("|")[1].split(), tail.split("|")[1].split()
    # the cycle is the one difference from the run it is read against: the same lr, tail and budget
    assert set(words) - set(base) == {"++scheduler.cycle_minutes=20"} and set(base) <= set(words)
    screen, lever, seed = plans.split_of(cyclic.split("|")[0])
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "cycle20-tail20", "1")
    assert plans.lever_base(lever) == "tail20"
    for minutes, tail_, cycle in ((60, 20, 25), (60, 0, 20), (60, 30, 20)):  # not dividing; no tail; tail > cycle
        with pytest.raises(SystemExit, match="--cycle .*: the tail's cycle, minutes that divide --minutes"):
            plans.lever_line(rows, "mmcr", minutes=minutes, tail=tail_, seed=1, cycle=cycle)


def test_hard_views_are_the_picks_tailed_split_line_cutting_more_views_and_training_on_the_hardest():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    _, tail = plans.split_lines(rows, "mmcr", minutes=60, tail=20, seed=2)
    hard = plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=2, hard=(2, 4, 16))
    assert hard.split("|")[0] == "split60-mmcr-adam-8e-3-hard2of4at16-tail20-s2"
    words, base = hard.split("|")[1].split(), tail.split("|")[1].split()
    added = {"data.num_views=4", "++method_kwargs.hard_views=2", "++method_kwargs.hard_views_side=16"}
    assert set(words) - set(base) == added and set(base) <= set(words)
    screen, lever, seed = plans.split_of(hard.split("|")[0])
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "hard2of4at16-tail20", "2")
    assert plans.lever_base(lever) == "tail20"
    for bad in ((2, 2, 16), (1, 4, 16), (2, 4, 4)):
        with pytest.raises(SystemExit, match="--hard-views .*: keep k of m views"):
            plans.lever_line(rows, "mmcr", minutes=60, tail=20, seed=2, hard=bad)


def test_compile_at_a_records_length_is_the_picks_constant_lr_split_line_compiled():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    const, _ = plans.split_lines(rows, "mmcr", minutes=30, tail=0, seed=2)
    compiled = plans.lever_line(rows, "mmcr", minutes=30, tail=0, seed=2, compiled=True)
    assert compiled.split("|")[0] == "split30-mmcr-adam-8e-3-compile-const-s2"
    words, base = compiled.split("|")[1].split(), const.split("|")[1].split()
    assert set(words) - set(base) == {"++performance.compile=true"} and set(base) <= set(words)
    screen, lever, seed = plans.split_of("split30-mmcr-adam-8e-3-compile-const-s2")
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "compile-const", "2")
    assert plans.lever_base(lever) == "const"  # read against the constant lr's run of its seed


def test_a_wider_first_stage_is_the_picks_constant_lr_split_line_with_the_backbone_key():
    rows = [{"tag": "mmcr-adam-8e-3", "method": "mmcr", "holdout_knn": "55.0", "train_minutes": "4.5"}]
    const, _ = plans.split_lines(rows, "mmcr", minutes=30, tail=0, seed=1)
    wide = plans.lever_line(rows, "mmcr", minutes=30, tail=0, seed=1, first_stage=32)
    assert wide.split("|")[0] == "split30-mmcr-adam-8e-3-first32-const-s1"
    words, base = wide.split("|")[1].split(), const.split("|")[1].split()
    assert set(words) - set(base) == {"++backbone.kwargs.first_stage_width=32"} and set(base) <= set(words)
    screen, lever, seed = plans.split_of(wide.split("|")[0])
    assert (screen.tag, lever, seed) == ("mmcr-adam-8e-3", "first32-const", "1")
    assert plans.lever_base(lever) == "const"
    with pytest.raises(SystemExit, match="an integer >= 1"):
        plans.lever_line(rows, "mmcr", minutes=30, tail=0, seed=1, first_stage=0)


def test_a_levers_seeds_sit_together_in_the_split_table_whatever_their_vm_scaled_tags(tmp_path):
    runs = tmp_path / "runs"
    # folder order: ramp s10, ramp s2 (x1.13), warm-up s1 (x1.152), ramp s1 (x1.16); the table groups by
    # what the tag names, its seeds in number order
    for tag in (
        "split60-mmcr-adam-8e-3-ramp16by0.2-tail20-s10",
        "split60x1.13-mmcr-adam-8e-3-ramp16by0.2-tail20-s2",
        "split60x1.152-mmcr-adam-1.6e-2-warm3-tail20-s1",
        "split60x1.16-mmcr-adam-8e-3-ramp16by0.2-tail20-s1",
    ):
        _record(runs, tag, "mmcr", [60.0, 66.0, 67.5], 20.0, stop=60)
        (knn,) = (runs / tag).rglob(EPOCH_KNN)
        write_csv(knn, [{**r, "knn_holdout_acc1": 67.5} for r in read_csv(knn)])
    leaderboard.collect(runs, out=tmp_path / "out")
    table = leaderboard.report_split(out=tmp_path / "out", pages=[])
    rows = [line.split(" | ")[:3] for line in table.splitlines() if line.startswith("| mmcr")]
    assert rows == [
        ["| mmcr-adam-1.6e-2", "warm3-tail20", "1"],
        ["| mmcr-adam-8e-3", "ramp16by0.2-tail20", "1"],
        ["| mmcr-adam-8e-3", "ramp16by0.2-tail20", "2"],
        ["| mmcr-adam-8e-3", "ramp16by0.2-tail20", "10"],
    ]
    assert table.splitlines()[2].startswith("| setting | lever | seed |")


def test_a_warm_up_to_a_higher_peak_is_read_against_the_picks_run_with_the_tail(tmp_path):
    runs = tmp_path / "runs"
    for tag, holdout in (
        ("split60-mmcr-adam-8e-3-const-s1", [60.0, 66.0, 67.5]),
        ("split60-mmcr-adam-8e-3-tail20-s1", [60.0, 66.5, 69.0]),
        ("split60-mmcr-adam-1.6e-2-warm3-tail20-s1", [58.0, 67.0, 69.75]),
    ):
        _record(runs, tag, "mmcr", holdout, 20.0, stop=60)
        (knn,) = (runs / tag).rglob(EPOCH_KNN)
        write_csv(knn, [{**r, "knn_holdout_acc1": h} for r, h in zip(read_csv(knn), holdout)])
    leaderboard.collect(runs, out=tmp_path / "out")
    table = leaderboard.report_split(out=tmp_path / "out", pages=[])
    assert "- mmcr-adam-8e-3, seed 1: tail20 against the constant lr, at the end on the holdout: +1.50 points" in table
    assert (
        "- mmcr-adam-1.6e-2, seed 1: warm3-tail20 against mmcr-adam-8e-3 with tail20, at the end on the holdout: "
        "+0.75 points" in table
    )
    assert "- warm3-tail20 on mmcr-adam-1.6e-2: 1 of 2 seeds run: not decided" in table
