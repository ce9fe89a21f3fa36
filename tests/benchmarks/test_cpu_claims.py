"""The CPU claims benchmark (benchmarks/cpu_claims.py): its grid, its pause accounting and its
report's verdicts, on made-up CSV rows (the runs themselves take CPU-hours)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path

import cpu_claims
import pytest
from claims import clocks, epoch_eval, plots, runner, verdicts
from claims import grid as claims_grid
from claims import report as claims_report
from claims.epoch_eval import EpochEval
from doc_blocks import replace_between
from helpers import REPO, make_image_folder

#: the CPU grid with its committed results (read-only in these tests)
CPU = claims_grid.SCALES["cpu"]
#: the command line each run of the grid is a child of
SCRIPT = REPO / "benchmarks" / "cpu_claims.py"


def data_at(monkeypatch, root: Path) -> None:
    """The CIFAR-10 root the grid's overrides and the per-epoch evaluation read, set to ``root``."""
    monkeypatch.setattr(claims_grid, "cifar_root", lambda: root)
    monkeypatch.setattr(epoch_eval, "cifar_root", lambda: root)


def test_every_run_of_the_grid_has_its_own_name_and_is_found_by_it():
    runs = claims_grid.schedule(CPU, (1, 2))
    names = [point.name(seed) for point, seed in runs]
    assert len(names) == len(set(names))
    for point, seed in runs:
        assert claims_grid.find_point(CPU, point.name(seed)) == (point, seed)
    with pytest.raises(SystemExit, match="not a run of the grid"):
        claims_grid.find_point(CPU, "mabt-m3-d1-rule-f1-e1-s1")


def test_the_report_judges_the_projector_at_every_d_the_grid_runs():
    ds = {(p.d, p.beta) for p in claims_grid.grid(CPU) if "projector" in p.parts and p.m == 2}
    assert ds == {(d, beta) for d in claims_report.PROJECTOR_DS for beta in ("rule", "fixed")}


def test_every_setting_of_the_grid_has_a_place_in_the_report_and_the_report_no_other():
    """The report names its settings itself (it imports nothing of the grid): a setting run
    under another epoch budget than the report shows would be run and never reported."""
    grid = {
        (p.method, p.m, p.d, p.beta, p.fraction, p.epochs)
        for p in claims_grid.grid(CPU)
        if not {"precision", "width"} & set(p.parts)
    }
    shown = {key for _, _, keys, _ in claims_report.sections(claims_grid.BASE_EPOCHS) for key in keys}
    assert shown == grid


def test_the_claims_table_judges_only_settings_the_report_shows_and_every_claim():
    """The table names its comparisons apart from the sections: a setting renamed in one and not
    the other would be judged "not run yet" forever."""
    e = claims_grid.BASE_EPOCHS
    shown = {key for _, _, keys, _ in claims_report.sections(e) for key in keys}
    rows = claims_report.claims(e)
    assert {key for c in rows for key in (c.a, c.b)} <= shown
    assert {c.claim for c in rows} == set(claims_report.PAPER)
    assert {c.how for c in rows} <= {"reach", "beats", "matches"}
    # a verdict on final kNN names its setting; the time verdicts name both sides' seeds instead
    assert all(c.label for c in rows if c.how != "reach")


def test_the_data_claim_compares_equal_views_and_more_views_run_to_twice_the_baselines():
    """Views processed per epoch = images x m: the budgets in epochs set them."""
    e = claims_grid.BASE_EPOCHS
    data = [p for p in claims_grid.grid(CPU) if "data" in p.parts]
    assert {p.epochs * p.m * p.fraction for p in data} == {2 * e}
    views = {
        p.m: p.epochs * p.m * p.fraction for p in claims_grid.grid(CPU) if "views" in p.parts and p.method == "mabt"
    }
    assert views == {2: 2 * e, 4: 4 * e, 8: 4 * e}  # 4 and 8 views: whether and when they reach the baseline
    vicreg = {p.m: p.epochs * p.m * p.fraction for p in claims_grid.grid(CPU) if "vicreg" in p.parts}
    assert vicreg == {2: 2 * e, 4: 4 * e}  # VICReg's pair the same way


def test_a_longer_run_goes_on_from_a_finished_shorter_run_of_its_setting(monkeypatch, tmp_path):
    """Without a learning-rate schedule a shorter run is a prefix of a longer one: the longer one
    takes its curve rows and resumes its checkpoint, accepting the one change, max_epochs, until
    it has a checkpoint of its own."""
    from mvssl_plugin.files import read_csv, write_csv

    scale = claims_grid.scale_named("cpu", tmp_path)
    data_at(monkeypatch, tmp_path)
    (point,) = [p for p in claims_grid.grid(CPU) if p.parts == ("views",) and p.m == 4]
    short = replace(point, epochs=10)
    results, curves = rows("mabt", 4, 256, "rule", 1.0, 10, (54.0,))
    for r in results + curves:
        r["run"] = short.name(1)
    write_csv(tmp_path / "results.csv", results)
    write_csv(tmp_path / "curves.csv", curves)
    assert runner.prefix_run(scale, point, 1) is None  # finished, but its checkpoint is not on this machine
    run = tmp_path / "runs" / short.name(1) / "mabt" / "abc"
    run.mkdir(parents=True)
    (run / "mabt-ep=8.ckpt").write_bytes(b"older")
    os.utime(run / "mabt-ep=8.ckpt", (1, 1))
    (run / "mabt-ep=9.ckpt").write_bytes(b"weights")
    assert runner.prefix_run(scale, point, 1) == short
    assert not any("resume_from_checkpoint" in o for o in runner.launch_overrides(scale, point, 1)[1])

    (run / "run.lock").write_text("123")
    runner.extend_from(scale, short, point, 1)
    copy = tmp_path / "runs" / point.name(1) / "mabt" / "abc"
    assert (copy / "mabt-ep=9.ckpt").read_bytes() == b"weights" and not (copy / "run.lock").exists()
    longer = [r for r in read_csv(tmp_path / "curves.csv") if r["run"] == point.name(1)]
    assert [int(r["epoch"]) for r in longer] == list(range(1, 11)) and longer[-1]["knn_backbone"] == "54.0"
    extra = runner.launch_overrides(scale, point, 1)[1]
    assert (
        f"+resume_from_checkpoint='{copy / 'mabt-ep=9.ckpt'}'" in extra and "auto_resume.accept_changes=true" in extra
    )
    (copy / "mabt-ep=10.ckpt").write_bytes(b"its own")  # its first launch checkpointed: auto-resume from now on
    later = (copy / "mabt-ep=9.ckpt").stat().st_mtime + 60
    os.utime(copy / "mabt-ep=10.ckpt", (later, later))
    assert runner.resume_overrides(scale, point, 1) == []
    (copy / "mabt-ep=9.ckpt").unlink()
    assert runner.resume_overrides(scale, point, 1) == []
    assert runner.prefix_run(scale, replace(point, epochs=10), 1) is None  # nothing shorter than 10


def test_the_grid_starts_with_the_precision_check_then_one_seed_of_each_point():
    runs = claims_grid.schedule(CPU, (1, 2))
    check = [r for r in runs if "precision" in r[0].parts]
    assert runs[: len(check)] == check and {p.precision for p, _ in check} == {"32", "auto"}
    firsts = [seed for _, seed in runs[len(check) : len(check) + len(claims_grid.grid(CPU)) - 2]]
    assert set(firsts) == {1}


def test_paused_time_inside_an_epoch_is_counted(tmp_path):
    log = tmp_path / "pauses.log"
    log.write_text("100 stop 1\n110 cont 1\n# a note\n150 stop 2\nx\n170 cont 2\n\n190 stop 3\n")
    overlap = clocks.pause_overlap
    assert overlap(log, 0, 200) == 10 + 20 + 10  # the last pause still running at 200
    assert overlap(log, 105, 160) == 5 + 10
    assert overlap(log, 120, 140) == 0
    assert overlap(None, 0, 200) == 0 and overlap(tmp_path / "none.log", 0, 200) == 0


def test_an_epochs_pauses_before_a_stop_are_carried_by_the_checkpoint_into_its_resume(tmp_path):
    log = tmp_path / "pauses.log"
    log.write_text("100 stop\n130 cont\n")  # 30 s paused in epoch 3, before the stop at 150
    before = clocks.EpochPauses(log)
    before.begin(3, 90)
    state = before.state(150)
    assert state == {"epoch": 3, "paused_seconds": 30}
    with log.open("a") as f:
        f.write("200 stop\n210 cont\n")  # 10 s more after the resume at 180
    after = clocks.EpochPauses(log)
    after.load(state)
    after.begin(3, 180)
    assert after.end(260) == 30 + 10
    after.begin(4, 260)  # the carried part counts once, in its own epoch
    assert after.end(300) == 0


def test_the_epoch_callback_puts_its_pauses_in_the_checkpoint_and_takes_them_back(monkeypatch, tmp_path):
    """Lightning saves a callback's ``state_dict`` in the checkpoint and hands it back on resume."""
    from types import SimpleNamespace

    data_at(monkeypatch, tmp_path)

    log = tmp_path / "pauses.log"
    log.write_text(f"{1.0:f} stop\n{2.0:f} cont\n")  # long before now: inside an epoch begun at 0
    point = claims_grid.grid(CPU)[0]
    stopped = EpochEval(CPU, point, 1, log)
    stopped.on_train_epoch_start(SimpleNamespace(current_epoch=5), None)
    stopped.pauses.start = 0.0
    state = stopped.state_dict()
    assert state == {"epoch": 5, "paused_seconds": 1.0}
    resumed = EpochEval(CPU, point, 1, log)
    resumed.load_state_dict(state)
    resumed.on_train_epoch_start(SimpleNamespace(current_epoch=5), None)
    assert resumed.pauses.so_far(resumed.pauses.start) == 1.0


def test_a_stop_inside_an_epoch_writes_no_row_for_it(monkeypatch, tmp_path):
    """Lightning ends the epoch early on a stop; the callback must not take it for a finished one
    (a row for epoch 3 at step 781, and a minute of evaluation before the process exits)."""
    from types import SimpleNamespace

    data_at(monkeypatch, tmp_path)
    scale = claims_grid.scale_named("cpu", tmp_path)
    callback = EpochEval(scale, claims_grid.grid(scale)[0], 1, None)
    stopped = SimpleNamespace(current_epoch=2, global_step=781, num_training_batches=390)
    callback.on_train_epoch_end(stopped, None)  # it would fail here if it evaluated: no loaders yet
    assert not (tmp_path / "curves.csv").exists()


def test_a_checkpoint_at_an_epochs_end_carries_no_pauses_into_the_next_epoch(tmp_path):
    log = tmp_path / "pauses.log"
    log.write_text("100 stop\n130 cont\n")
    pauses = clocks.EpochPauses(log)
    pauses.begin(3, 90)
    state = pauses.state(150)  # a checkpoint inside the epoch, or at its end before the row
    resumed = clocks.EpochPauses(log)
    resumed.load(state)
    resumed.begin(4, 400)
    assert resumed.end(500) == 0
    assert clocks.EpochPauses(log).state(150) == {}  # between epochs: nothing to carry


def test_the_report_says_which_runs_ran_in_which_precision_when_they_differ():
    def row(run, precision, cpu):
        return {"run": run, "precision": precision, "cpu": cpu, "knn_backbone": "50", "seed": "1"}

    check = [row("mabt-m2-d256-rule-f1-e1-s1-p32", "32-true", "A")]  # the precision check: not the grid
    same = check + [row("mabt-m2-d2048-fixed-f1-e20-s1", "bf16-mixed", "A"), row("mabt-m4-x", "bf16-mixed", "A")]
    assert claims_report.mixed_precision_note(same) == []
    mixed = same + [row("mabt-m2-d256-rule-f1-e20-s1", "32-true", "B")]
    note = claims_report.mixed_precision_note(mixed)
    assert "- 32-true (B): mabt-m2-d256-rule-f1-e20-s1" in note
    assert "- bf16-mixed (A): mabt-m2-d2048-fixed-f1-e20-s1, mabt-m4-x" in note
    assert not any("-e1-" in line for line in note)


@pytest.fixture
def scale(request, tmp_path):
    """The harness at ``request.param``'s scale, its results in tmp_path / "<scale>_claims"."""
    return claims_grid.scale_named(request.param, tmp_path / f"{request.param}_claims")


@pytest.mark.parametrize("scale", ["cpu"], indirect=True)
def test_a_run_stopped_by_the_budget_is_carried_to_another_machine_and_finishes_there(
    scale, monkeypatch, tmp_path, capsys
):
    """Machine A stops the run at its budget and copies its checkpoint into carry/ (committed);
    machine B, without the run's folder, resumes that checkpoint, and the finished row says which
    machine and precision ran which epochs; the carry goes once the run is done."""
    from mvssl_plugin.files import read_csv, write_csv

    name = "mabt-m2-d256-rule-f1-e20-s1"
    point, _ = claims_grid.find_point(scale, name)
    out = scale.out
    machine = {"cpu": "A", "precision": "32-true", "epochs": range(1, 4), "running": True}
    monkeypatch.setattr(runner, "cpu_description", lambda accelerator: machine["cpu"])
    data_at(monkeypatch, tmp_path)
    monkeypatch.setattr(runner, "commit", lambda: "abc1234")
    monkeypatch.setattr(runner, "estimate_minutes", lambda *args: 100.0)
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)

    class Clock:  # the budget is spent at the second look
        def __init__(self):
            self.reads = 0

        def read(self):
            self.reads += 1
            return 0.0 if self.reads == 1 or not machine["running"] else 1e9

    class Child:
        """Trains machine["epochs"]: a checkpoint and a curve row each (the real child's rows)."""

        def __init__(self, command, **kwargs):
            self.returncode, self.signals = None, []
            folder = out / "runs" / name / "mabt" / "abc"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "args.json").write_text("{}")
            (folder / "run.lock").write_text("123")
            rows = read_csv(out / "curves.csv")
            for epoch in machine["epochs"]:
                (folder / f"ep={epoch}.ckpt").write_bytes(b"PK weights %d" % epoch)
                os.utime(folder / f"ep={epoch}.ckpt", (1000 + epoch, 1000 + epoch))
                row = {"run": name, "epoch": epoch, "views_seen": epoch * 100_000, "knn_backbone": 30 + epoch}
                row.update(precision=machine["precision"], train_seconds=epoch, eval_seconds=1)
                rows.append({**row, "cpu": machine["cpu"]} if machine["cpu"] == "B" else row)
            write_csv(out / "curves.csv", rows)

        def poll(self):
            if not machine["running"]:
                self.returncode = 0
            return self.returncode

        def send_signal(self, sig):
            self.signals.append(sig)

        def wait(self, *args):
            self.returncode = 0
            return 0

    monkeypatch.setattr(runner, "ActiveClock", Clock)
    monkeypatch.setattr(runner.subprocess, "Popen", Child)
    monkeypatch.setattr(runner, "is_complete_checkpoint", lambda path: True)
    runner.run_grid(scale, claims_grid.schedule(scale, (1,)), SCRIPT, 100, None, name)
    carried = out / "carry" / name / "mabt" / "abc"
    assert sorted(p.name for p in carried.iterdir()) == ["args.json", "ep=3.ckpt"]  # the newest; no lock
    assert {r["cpu"] for r in read_csv(out / "curves.csv")} == {"A"}  # A's rows name A from now on
    assert not runner.finished(scale, name)

    shutil.rmtree(out / "runs")  # machine B: a fresh clone with the commit
    machine.update(cpu="B", precision="bf16-mixed", epochs=range(4, 21), running=False)
    launched = []
    monkeypatch.setattr(runner, "carry_in", lambda s, n, real=runner.carry_in: launched.append(real(s, n)) or True)
    runner.run_grid(scale, claims_grid.schedule(scale, (1,)), SCRIPT, 100, None, name)
    assert launched == [True]
    assert capsys.readouterr().out.endswith(f"cpu_claims: every run with {name!r} is done\n")  # not "the grid"
    (row,) = [r for r in read_csv(out / "results.csv") if r["run"] == name]
    assert row["precision"] == "32-true+bf16-mixed" and row["cpu"] == "A (epochs 1-3); B (epochs 4-20)"
    assert not (out / "carry" / name).exists()


@pytest.mark.parametrize("scale", ["cpu"], indirect=True)
def test_a_run_the_budget_cannot_finish_is_skipped_if_too_large_to_carry_and_started_if_not(
    scale, monkeypatch, tmp_path, capsys
):
    """On a slow machine a d = 2048 run (about 108 MiB with Adam's state) would start over elsewhere:
    the call goes on to the next run, which a cut carries (about 10 MiB)."""
    big, _ = claims_grid.find_point(scale, "mabt-m2-d2048-rule-f1-e20-s1")
    small, _ = claims_grid.find_point(scale, "mabt-m2-d64-fixed-f1-e20-s1")
    make_image_folder(tmp_path / "train", per_class=2)  # the recipe checks its data; the model needs none
    data_at(monkeypatch, tmp_path)
    assert runner.checkpoint_mib(scale, big) > runner.CARRY_MAX_MB > runner.checkpoint_mib(scale, small)
    monkeypatch.setattr(runner, "estimate_minutes", lambda *args: 100.0)
    monkeypatch.setattr(runner, "cpu_description", lambda accelerator: "S")
    monkeypatch.setattr(runner, "commit", lambda: "abc1234")
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    reads = iter([0.0, 0.0, 1e9])  # each run's look at the budget (10 min left), then spent

    class Clock:
        def read(self):
            return next(reads)

    launched, carried = [], []

    class Child:
        def __init__(self, command, **kwargs):
            launched.append(command[command.index("--run") + 1])
            self.returncode = None

        def poll(self):
            return self.returncode

        def send_signal(self, sig):
            self.returncode = -sig

        def wait(self, *args):
            return self.returncode

    monkeypatch.setattr(runner, "ActiveClock", Clock)
    monkeypatch.setattr(runner.subprocess, "Popen", Child)
    monkeypatch.setattr(runner, "carry_out", lambda scale, name: carried.append(name))
    runner.run_grid(scale, [(big, 1), (small, 1)], SCRIPT, 10)
    assert launched == carried == [small.name(1)]
    said = capsys.readouterr().out
    assert f"{big.name(1)} needs about 100 min, the budget has 10 left, and its checkpoint (about 108 MiB)" in said
    assert f"{small.name(1)} needs about 100 min: it starts, and is carried when the budget ends" in said


def test_the_first_launch_on_another_machine_resumes_the_carried_checkpoint(monkeypatch, tmp_path):
    scale = claims_grid.scale_named("cpu", tmp_path)
    data_at(monkeypatch, tmp_path)
    name = "mabt-m2-d256-rule-f1-e20-s1"
    point, _ = claims_grid.find_point(scale, name)
    assert not runner.carry_in(scale, name)  # nothing carried
    carried = tmp_path / "carry" / name / "mabt" / "abc"
    carried.mkdir(parents=True)
    (carried / "x-ep=2-stopped.ckpt").write_bytes(b"weights")
    assert runner.carry_in(scale, name)
    copy = tmp_path / "runs" / name / "mabt" / "abc" / "x-ep=2-stopped.ckpt"
    assert copy.read_bytes() == b"weights"
    assert f"+resume_from_checkpoint='{copy}'" in runner.launch_overrides(scale, point, 1)[1]


def _checkpoint(path, age_hours: float = 0.0):
    """A file auto-resume reads as a complete checkpoint (a zip archive), written ``age_hours`` ago."""
    import zipfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.pkl", b"weights")
    then = time.time() - age_hours * 3600
    os.utime(path, (then, then))
    return path


def test_a_checkpoint_left_without_its_args_json_gives_way_to_the_carried_one(monkeypatch, tmp_path):
    """``git clean`` keeps a run folder's ignored .ckpt and removes its args.json: auto-resume
    cannot take that checkpoint, so the run must go on from its carry, not start over."""
    scale = claims_grid.scale_named("cpu", tmp_path)
    data_at(monkeypatch, tmp_path)
    name = "mabt-m8-d256-rule-f1-e10-s2"
    point, seed = claims_grid.find_point(scale, name)
    stray = _checkpoint(tmp_path / "runs" / name / "mabt" / "old" / "x-ep=1-stopped.ckpt")
    carried = _checkpoint(tmp_path / "carry" / name / "mabt" / "old" / "x-ep=1-stopped.ckpt")
    (carried.parent / "args.json").write_text("{}")
    start = runner.head_start(scale, point, seed)
    assert (start.here, start.carried) == (False, True)
    assert runner.carry_in(scale, name)
    assert (stray.parent / "args.json").is_file()  # the carried folder replaced the stray one
    assert f"+resume_from_checkpoint='{stray}'" in runner.launch_overrides(scale, point, seed)[1]
    assert runner.head_start(scale, point, seed).here


def test_a_run_resumes_however_long_it_waited_between_sessions(monkeypatch, tmp_path):
    """The recipes' auto-resume skips checkpoints older than 36 h; a grid run's launch takes its
    checkpoint after 40 days all the same."""
    from omegaconf import OmegaConf

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.resume import find_resumable

    scale = claims_grid.scale_named("cpu", tmp_path)
    data_at(monkeypatch, tmp_path)
    point, seed = claims_grid.find_point(scale, "mabt-m2-d64-rule-f1-e20-s2")
    recipe, extra = runner.launch_overrides(scale, point, seed)
    cfg = compose_recipe(recipe, "pretrain", extra)
    logdir = Path(cfg.checkpoint.dir) / "mabt"
    ckpt = _checkpoint(logdir / "offline-1" / "x-ep=3.ckpt", age_hours=40 * 24)
    (ckpt.parent / "args.json").write_text(json.dumps(OmegaConf.to_container(cfg, resolve=True)))
    assert find_resumable(cfg, str(logdir)).checkpoint == ckpt
    assert runner.head_start(scale, point, seed).here
    cfg.auto_resume.max_hours = 36  # the recipe's own window would have started it over
    assert find_resumable(cfg, str(logdir)).checkpoint is None


def test_a_checkpoint_too_large_to_commit_is_not_carried(monkeypatch, tmp_path):
    scale = claims_grid.scale_named("cpu", tmp_path)
    monkeypatch.setattr(runner, "CARRY_MAX_MB", 1e-5)
    monkeypatch.setattr(runner, "is_complete_checkpoint", lambda path: True)
    folder = tmp_path / "runs" / "r" / "mabt" / "abc"
    folder.mkdir(parents=True)
    (folder / "ep=1.ckpt").write_bytes(b"x" * 100)
    assert runner.carry_out(scale, "r") is None and not (tmp_path / "carry").exists()


def test_a_runs_machines_are_named_with_their_epochs():
    one = [{"epoch": "1", "cpu": "A"}, {"epoch": "2", "cpu": "A"}]
    assert runner.machines(one, "here") == "A"
    assert runner.machines([{"epoch": "1"}, {"epoch": "2"}], "here") == "here"  # rows from before the column
    two = one + [{"epoch": "3", "cpu": "B"}, {"epoch": "4", "cpu": "A"}]
    assert runner.machines(two, "here") == "A (epochs 1-2); B (epochs 3-3); A (epochs 4-4)"


def rows(method, m, d, beta, fraction, epochs, accuracies):
    """results.csv and curves.csv rows: one run per seed, its curve rising linearly to its accuracy."""
    results, curves = [], []
    for seed, final in enumerate(accuracies, start=1):
        run = f"{method}-m{m}-d{d}-{beta}-f{fraction:g}-e{epochs}-s{seed}"
        common = {"run": run, "method": method, "m": m, "d": d, "beta": beta, "fraction": fraction, "seed": seed}
        for epoch in range(1, epochs + 1):
            views = epoch * 50000 * fraction * m
            curve = {**common, "epoch": epoch, "views_seen": views, "train_seconds": views / 1000}
            curves.append({**curve, "knn_backbone": final * epoch / epochs, "rank_projector": 10})
        results.append({**common, "epochs": epochs, "views_seen": views, "knn_backbone": final, "rank_projector": 10})
    return results, curves


def grid_of(*settings):
    results, curves = [], []
    for setting in settings:
        r, c = rows(*setting)
        results += r
        curves += c
    return verdicts.Grid(results, curves)


@pytest.mark.parametrize(
    "rule, fixed, expected",
    [
        ((50.0, 51.0), (40.0, 41.0), "holds: +10.0 points"),
        ((40.0, 41.0), (50.0, 51.0), "does not hold: -10.0 points"),
        ((50.0, 46.0), (48.0, 47.5), "inconclusive: +0.2 points, within the seeds' spread of 4.0"),
        ((50.0,), (40.0, 41.0), "inconclusive so far: +9.5 points, 1 seed against 2"),
    ],
)
def test_a_verdict_needs_two_seeds_on_each_side_and_a_gap_beyond_their_spread(rule, fixed, expected):
    grid = grid_of(("mabt", 2, 64, "rule", 1.0, 20, rule), ("mabt", 2, 64, "fixed", 1.0, 20, fixed))
    text = verdicts.verdict(grid, ("mabt", 2, 64, "rule", 1.0, 20), ("mabt", 2, 64, "fixed", 1.0, 20), "d")
    assert text.startswith(expected), text


def test_views_to_reach_the_baseline_are_read_off_each_seeds_curve():
    grid = grid_of(("mabt", 2, 2048, "fixed", 1.0, 20, (50.0, 50.0)), ("mabt", 4, 256, "rule", 1.0, 10, (60.0, 60.0)))
    base = grid.reach(("mabt", 2, 2048, "fixed", 1.0, 20), 50.0)
    four = grid.reach(("mabt", 4, 256, "rule", 1.0, 10), 50.0)
    assert base == 20 * 50000 * 2
    assert four == 9 * 50000 * 4  # 60 * 9 / 10 = 54 >= 50 first at epoch 9
    assert grid.reach(("mabt", 4, 256, "rule", 1.0, 10), 70.0) is None  # never reached


def test_the_report_is_made_from_the_csvs(tmp_path, monkeypatch):
    from mvssl_plugin.files import write_csv

    results, curves = rows("mabt", 2, 2048, "fixed", 1.0, claims_grid.BASE_EPOCHS, (50.0, 52.0))
    rule = rows("mabt", 2, 2048, "rule", 1.0, claims_grid.BASE_EPOCHS, (53.0,))
    started = rows("mabt", 2, 64, "rule", 1.0, claims_grid.BASE_EPOCHS, (40.0,))[1][:3]  # 3 epochs, no result
    results, curves = results + rule[0], curves + rule[1] + started
    scale = claims_grid.scale_named("cpu", tmp_path)
    write_csv(scale.results, results)
    write_csv(scale.curves, curves)
    summary = claims_report.report(scale).read_text()
    assert "| mabt m=2 d=2048 fixed | 20 | 51.0 ± 1.0 (2 seeds) |" in summary
    assert "not run yet" in summary  # the rest of the grid
    # the projector claim is judged at every d of the grid, as the paper states it
    assert "- d = 2048: rule vs fixed beta: inconclusive so far: +2.0 points, 1 seed against 2" in summary
    assert "- d = 64: rule vs fixed beta: inconclusive: mabt m=2 d=64 rule has not finished" in summary
    assert "- d = 256: rule vs fixed beta: inconclusive: mabt m=2 d=256 rule has not run yet" in summary
    assert all((tmp_path / f"{slug}.png").is_file() for slug in ("projector", "views", "data", "vicreg"))


def test_until_is_the_next_such_time_on_this_machines_clock():
    now = time.mktime((2026, 11, 26, 3, 30, 0, 0, 0, -1))
    assert clocks.parse_until("05:45", now) - now == 2 * 3600 + 15 * 60
    assert clocks.parse_until("03:00", now) - now == 23.5 * 3600  # passed today: tomorrow's
    for bad in ("5", "25:00", "05:60", "soon"):
        with pytest.raises(ValueError, match="--until takes HH:MM"):
            clocks.parse_until(bad, now)
    with pytest.raises(SystemExit) as stopped:  # the command line says so before anything runs
        cpu_claims.main(["--until", "25:00"])
    assert stopped.value.code == 2


@pytest.mark.parametrize("scale", ["cpu"], indirect=True)
def test_until_stops_the_running_run_at_that_time_even_with_budget_left(scale, monkeypatch, tmp_path, capsys):
    """Pauses stretch a --budget-min call past a session's end; --until holds the wall clock."""
    small, _ = claims_grid.find_point(scale, "mabt-m2-d64-fixed-f1-e20-s1")
    monkeypatch.setattr(runner, "estimate_minutes", lambda *args: 5.0)
    monkeypatch.setattr(runner, "cpu_description", lambda accelerator: "S")
    monkeypatch.setattr(runner, "commit", lambda: "abc1234")
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    walls = iter([1000.0, 1000.0, 1500.0, 2001.0])  # start, the run's first looks, then past 2000
    monkeypatch.setattr(clocks, "wall_clock", lambda: next(walls))
    stopped, carried = [], []

    class Child:
        def __init__(self, command, **kwargs):
            self.returncode = None

        def poll(self):
            return self.returncode

        def send_signal(self, sig):
            stopped.append(sig)
            self.returncode = -sig

        def wait(self, *args):
            return self.returncode

    monkeypatch.setattr(runner.subprocess, "Popen", Child)
    monkeypatch.setattr(runner, "carry_out", lambda scale, name: carried.append(name))
    runner.run_grid(scale, [(small, 1)], SCRIPT, 600, until=2000.0)  # 10 h of budget, 1,000 s to --until
    assert stopped == [signal.SIGTERM] and carried == [small.name(1)]
    assert f"budget spent: stopping {small.name(1)}" in capsys.readouterr().out


def test_the_budget_does_not_count_the_time_the_harness_was_paused():
    times = iter([0.0, 5.0, 10.0, 610.0, 615.0])  # stopped for 10 minutes between 10 and 610
    clock = clocks.ActiveClock(poll=5.0, now=lambda: next(times))
    assert [clock.read() for _ in range(4)] == [5.0, 10.0, 15.0, 20.0]


def test_a_run_is_estimated_from_the_epochs_already_measured():
    curves = [
        {
            "run": "a",
            "method": "mabt",
            "d": "256",
            "epoch": "1",
            "views_seen": "100000",
            "train_seconds": "100",
            "eval_seconds": "30",
        },
        {
            "run": "a",
            "method": "mabt",
            "d": "256",
            "epoch": "2",
            "views_seen": "200000",
            "train_seconds": "200",
            "eval_seconds": "30",
        },
        {
            "run": "b",
            "method": "mavicreg",
            "d": "2048",
            "epoch": "1",
            "views_seen": "100000",
            "train_seconds": "300",
            "eval_seconds": "30",
        },
    ]
    m4 = claims_grid.Point("mabt", 4, 256, "rule", 1.0, 10, ("views",), True)
    # 10 epochs x 200,000 views x 1 ms + 10 x 30 s of evaluation
    assert clocks.estimate_minutes(m4, curves) == pytest.approx((2_000_000 * 1e-3 + 300) / 60)
    vicreg = claims_grid.Point("mavicreg", 2, 2048, "fixed", 1.0, 1, ("vicreg",), False)
    assert clocks.estimate_minutes(vicreg, curves) == pytest.approx((100_000 * 3e-3 + 30) / 60)
    assert clocks.estimate_minutes(m4, []) is None


def test_the_width_check_is_the_baselines_setting_at_twice_the_width(monkeypatch, tmp_path):
    (check,) = [p for p in claims_grid.grid(CPU) if "width" in p.parts]
    (baseline,) = [p for p in claims_grid.grid(CPU) if p.parts == ("projector", "views")]
    assert (check.method, check.m, check.d, check.beta) == (baseline.method, baseline.m, baseline.d, baseline.beta)
    assert check.width == 2 * claims_grid.WIDTH and check.name(1).endswith("-w32")
    assert claims_grid.width_of(check.name(1)) == 32 and claims_grid.width_of(baseline.name(1)) == 16
    data_at(monkeypatch, tmp_path)
    assert "backbone.kwargs.width=32" in claims_grid.overrides(CPU, check, 1)[1]
    assert "backbone.kwargs.width=16" in claims_grid.overrides(CPU, baseline, 1)[1]


def curve_row(run, epoch, views, seconds, cpu, eval_seconds=30):
    return {"run": run, "method": "mabt", "m": "2", "d": "256", "epoch": str(epoch), "views_seen": str(views),
            "train_seconds": str(seconds), "eval_seconds": str(eval_seconds), "cpu": cpu}  # fmt: skip


def test_a_run_is_estimated_from_this_machines_own_epochs_where_it_has_any():
    """A fast machine's epochs (1 ms a view) would promise the slow one (2 ms) half its real time;
    a carried run's clocks are cumulative, so only the slow machine's own epochs count."""
    curves = [
        curve_row("fast", 1, 100_000, 100, "F"),
        curve_row("fast", 2, 200_000, 200, "F"),
        curve_row("carried", 1, 100_000, 100, "F"),
        curve_row("carried", 2, 200_000, 300, "S", eval_seconds=60),  # its second epoch: on S, 2 ms a view
        curve_row("carried", 3, 300_000, 500, "S", eval_seconds=60),
    ]
    point = claims_grid.Point("mabt", 2, 256, "rule", 1.0, 10, ("projector",), True)
    slow = clocks.estimate_minutes(point, curves, machine="S")
    assert slow == pytest.approx((1_000_000 * 2e-3 + 10 * 60) / 60)
    fast = clocks.estimate_minutes(point, curves, machine="F")  # the fast run, and the carried run's epoch 1
    assert fast == pytest.approx((1_000_000 * 1e-3 + 10 * 30) / 60)
    anywhere = clocks.estimate_minutes(point, curves, machine="new")  # no epoch here: every run, whole
    assert anywhere == pytest.approx((1_000_000 * 500 / 300_000 + 10 * 60) / 60)  # the upper median of 1 and 1.67 ms


@pytest.mark.parametrize("scale", ["cpu"], indirect=True)
def test_the_list_gives_each_unfinished_runs_minutes_left_here_and_their_sum(scale, monkeypatch, capsys):
    from mvssl_plugin.files import write_csv

    name = "mabt-m2-d256-rule-f1-e20-s1"
    point, _ = claims_grid.find_point(scale, name)
    assert point.epochs == 20 and point.m == 2
    rows = [curve_row(name, e, e * 100_000, e * 200, "S", eval_seconds=60) | {"knn_backbone": "40.0"} for e in (1, 2)]
    scale.out.mkdir(parents=True)
    write_csv(scale.curves, rows)
    checkpoint = _checkpoint(scale.run_folder(name) / "mabt" / "x" / "ep=2.ckpt")
    (checkpoint.parent / "args.json").write_text("{}")
    monkeypatch.setattr(runner, "cpu_description", lambda accelerator: "S")
    runner.list_grid(scale, [1])
    out = capsys.readouterr().out
    (line,) = [row for row in out.splitlines() if row.startswith(f"| {name} |")]
    assert line.endswith("| epoch 2/20 | 40.0 | 78 |")  # 18 epochs x (100,000 views x 2 ms + 60 s)
    total = float(out.rsplit("about ", 1)[1].split(" h left here (S)")[0])
    listed = [float(row.rsplit("|", 2)[1]) for row in out.splitlines() if row.startswith("| ") and "to do" in row]
    assert total == pytest.approx((78 + sum(listed)) / 60, abs=0.05) and len(listed) > 10


def test_a_wider_run_is_estimated_from_the_narrow_ones_by_its_width_squared():
    narrow = [{"run": "a", "method": "mabt", "d": "2048", "epoch": "1", "views_seen": "100000",
               "train_seconds": "100", "eval_seconds": "30"}]  # fmt: skip
    wide = claims_grid.Point("mabt", 2, 2048, "fixed", 1.0, 1, ("width",), False, width=32)
    assert clocks.estimate_minutes(wide, narrow) == pytest.approx(4 * (100_000 * 1e-3 * 1.0 + 30) / 60)


def test_the_width_is_compared_at_equal_training_seconds():
    narrow = [{"run": "n", "epoch": e, "train_seconds": 100 * e, "knn_backbone": 30 + e} for e in (1, 2, 3, 4)]
    wide = [{"run": "w", "epoch": e, "train_seconds": 250 * e, "knn_backbone": 31 + e} for e in (1, 2)]
    assert claims_report.knn_at(narrow, 250) == pytest.approx(32.5)
    assert claims_report.knn_at(narrow, 50) is None and claims_report.knn_at(narrow, 450) is None
    lines = claims_report.width_section(narrow + wide, [("w", "n")])
    assert "| w | 1 | 250 | 32 | 32.50 |" in lines
    assert "| w | 2 | 500 | 33 | not reached yet |" in lines  # the narrow curve ends at 400 s
    assert any("at 250 s: 32.00 vs 32.50%: the grid's width learns more" in line for line in lines)
    assert any("clocks of a shared machine" in line for line in lines)
    # at measured step rates (s per view) the clocks are views x rate: the wide one 3x the narrow
    for r in narrow + wide:
        r["views_seen"] = 100_000 * r["epoch"]
    lines = claims_report.width_section(narrow + wide, [("w", "n")], {"n": 1e-3, "w": 3e-3})
    assert "| w | 1 | 300 | 32 | 33.00 |" in lines  # narrow at 300 s: epoch 3, kNN 33
    assert any("at the step times measured side by side" in line for line in lines)


def test_an_unfinished_seed_shows_where_it_stands():
    results, curves = rows("mabt", 2, 2048, "fixed", 1.0, 20, (50.0, 52.0))
    grid = verdicts.Grid(results[:1], curves)  # seed 2 still running (all its epochs logged)
    key = ("mabt", 2, 2048, "fixed", 1.0, 20)
    assert grid.unfinished(key) == [(2, 20, 52.0)]
    cell = verdicts.accuracy_cell(*grid.accuracy(key), grid.unfinished(key))
    assert cell == "50.0 (1 seed); seed 2 unfinished: 52.0 at epoch 20"
    assert verdicts.accuracy_cell(None, None, 0) == "not run yet"


def step_row(method, m, d, s_per_step, width=16):
    return {"method": method, "m": m, "d": d, "width": width, "s_per_step": s_per_step, "date": "d", "cpu": "c"}


def test_time_to_the_baseline_comes_from_the_measured_step_rates():
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    grid = grid_of((*base, (50.0,)), (*four, (60.0,)))
    # 4 views first reach 50% at epoch 9: 1.8M views, 0.9x the baseline's 2M
    steps = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.3)]  # 4 views: 0.75x per view
    lines = claims_report.reach_section(grid, base, [base, four], steps)
    assert "| mabt m=4 d=256 rule | 1,800,000 | 0.90 | 1,055 | 0.68 |" in lines
    assert (
        "- mabt m=4 d=256 rule: holds so far: 0.68x the baseline's time, 0.90x its views (1 seed; the baseline 1)"
        in lines
    )
    two = grid_of((*base, (50.0, 50.0)), (*four, (60.0, 60.0)))  # a verdict without "so far" needs 2 seeds a side
    lines = claims_report.reach_section(two, base, [base, four], steps)
    assert "- mabt m=4 d=256 rule: holds: 0.68x the baseline's time, 0.90x its views (2 seeds; the baseline 2)" in lines
    slow = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.5)]  # 1.25x per view
    lines = claims_report.reach_section(grid, base, [base, four], slow)
    assert any(line.startswith("- mabt m=4 d=256 rule: does not hold so far: 1.12x") for line in lines)
    lines = claims_report.reach_section(grid, base, [base, four], [])
    assert any("0.90x the baseline's; time not measured" in line for line in lines)


def test_each_machines_step_rates_give_their_own_time_and_the_verdict_needs_all_of_them():
    """On the first CPU 4 views cost 0.75x the baseline's seconds per view, on the second 1.25x:
    at 0.90x its views, 4 views are faster on one and slower on the other."""
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    grid = grid_of((*base, (50.0,)), (*four, (60.0,)))
    a = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.3)]
    b = [{**r, "cpu": "b"} for r in (step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.5))]
    lines = claims_report.reach_section(grid, base, [base, four], a + b)
    assert (
        "| run | views | x baseline's views | s at the step rate of c | x baseline's time: c | x baseline's time: b |"
        in lines
    )
    assert "| mabt m=4 d=256 rule | 1,800,000 | 0.90 | 1,055 | 0.68 | 1.12 |" in lines  # seconds: the first CPU's
    verdict = (
        "- mabt m=4 d=256 rule: depends on the CPU so far: 0.68x (c), 1.12x (b) the baseline's time, 0.90x its views"
    )
    assert any(line.startswith(verdict) for line in lines)
    assert (
        "(step times measured d, c; step times measured d, b: `python benchmarks/cpu_claims.py --step-times`.)" in lines
    )
    lines = claims_report.reach_section(grid, base, [base, four], b + a)  # the file's order sets the first
    assert "| mabt m=4 d=256 rule | 1,800,000 | 0.90 | 1,758 | 1.12 | 0.68 |" in lines
    fast = [{**r, "cpu": "b"} for r in (step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.4))]
    lines = claims_report.reach_section(grid, base, [base, four], a + fast)
    assert any(
        line.startswith("- mabt m=4 d=256 rule: holds so far: 0.68x (c), 0.90x (b) the baseline's time")
        for line in lines
    )


def test_a_seed_still_running_below_the_baseline_leaves_the_verdict_to_the_finished_seeds():
    """Seed 1 of 4 views reached the baseline and finished; seed 2 is at epoch 5 of 10, below it:
    its first reach is still to come, so seed 1's stands, with seed 2's place beside it."""
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    steps = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.3)]
    results, curves = rows(*base, (50.0,))
    r4, c4 = rows(*four, (60.0, 60.0))
    running = [r for r in c4 if r["seed"] == 1 or r["epoch"] <= 5]  # seed 2: 30% at epoch 5
    grid = verdicts.Grid(results + r4[:1], curves + running)
    assert grid.pending(four, 50.0) == [(2, 5, 30.0)]
    assert grid.reach(four, 50.0) == 1_800_000
    lines = claims_report.reach_section(grid, base, [base, four], steps)
    assert "| mabt m=4 d=256 rule | 1,800,000 | 0.90 | 1,055 | 0.68 |" in lines
    assert (
        "- mabt m=4 d=256 rule: holds so far: 0.68x the baseline's time, 0.90x its views"
        " (1 seed; the baseline 1; seed 2 unfinished: 30.0% at epoch 5)"
    ) in lines
    # once seed 2 reaches the baseline, unfinished or not, it counts
    grid = verdicts.Grid(results + r4[:1], curves + [r for r in c4 if r["seed"] == 1 or r["epoch"] <= 9])
    assert grid.pending(four, 50.0) == []
    assert verdicts.views_verdict(grid, base, four, steps).endswith("(2 seeds; the baseline 1)")
    # a finished seed that never reached it is judged short, the running seed named
    r4, c4 = rows(*four, (45.0, 60.0))
    grid = verdicts.Grid(results + r4[:1], curves + [r for r in c4 if r["seed"] == 1 or r["epoch"] <= 5])
    text = verdicts.views_verdict(grid, base, four, steps)
    assert text.startswith("inconclusive so far: ends at 45.0% (-5.0 against the baseline's 50.0%)"), text
    assert text.endswith("; seed 2 unfinished: 30.0% at epoch 5"), text
    # no seed finished, none at the baseline yet
    grid = verdicts.Grid(results, curves + [r for r in c4 if r["epoch"] <= 5])
    assert verdicts.views_verdict(grid, base, four, steps) == "inconclusive: not finished, not at 50.0% yet"


def test_the_baselines_time_is_its_whole_run_when_a_seed_ends_below_the_seeds_mean():
    """Seed 1 of the baseline ends at 50%, seed 2 at 52%: the target is their mean, 51%, which
    seed 1's curve never reaches; the baseline's cost is still its whole run (2M views), and
    4 views that reach 51% at epoch 9 (1.8M views) are ahead of it, not short."""
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    grid = grid_of((*base, (50.0, 52.0)), (*four, (60.0,)))
    steps = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.3)]
    lines = claims_report.reach_section(grid, base, [base, four], steps)
    assert "| mabt m=2 d=2048 fixed | 2,000,000 | 1.00 | 1,562 | 1.00 |" in lines
    assert "| mabt m=4 d=256 rule | 1,800,000 | 0.90 | 1,055 | 0.68 |" in lines
    verdict = "- mabt m=4 d=256 rule: holds so far: 0.68x the baseline's time, 0.90x its views (1 seed; the baseline 2)"
    assert verdict in lines


def test_a_setting_short_of_the_baseline_fails_the_claim_only_beyond_the_seeds_spread():
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    steps = [step_row("mabt", 2, 2048, 0.2), step_row("mabt", 4, 256, 0.3)]  # 4 views: 0.75x per view
    cases = [
        (
            (50.0,),
            (40.0,),
            "inconclusive so far: ends at 40.0% (-10.0 against the baseline's 50.0%) after 1.00x the "
            "baseline's views, 0.75x its time; 1 seed, the baseline 1",
        ),
        (
            (50.0, 51.0),
            (40.0, 41.0),
            "does not hold: ends at 40.5% (-10.0 against the baseline's 50.5%) after 1.00x "
            "the baseline's views, 0.75x its time, seeds' spread 1.0",
        ),
        (
            (50.0, 51.0),
            (49.0, 50.4),
            "inconclusive: ends at 49.7% (-0.8 against the baseline's 50.5%) after 1.00x "
            "the baseline's views, 0.75x its time, within the seeds' spread of 1.4",
        ),
    ]
    for base_knn, four_knn, expected in cases:
        grid = grid_of((*base, base_knn), (*four, four_knn))
        assert f"- mabt m=4 d=256 rule: {expected}" in claims_report.reach_section(grid, base, [base, four], steps)
    results, curves = rows(*four, (40.0,))
    running = verdicts.Grid(rows(*base, (50.0,))[0], rows(*base, (50.0,))[1] + curves[:3])
    eight = ("mabt", 8, 256, "rule", 1.0, 5)
    lines = claims_report.reach_section(running, base, [base, four, eight], [])
    assert "- mabt m=4 d=256 rule: inconclusive: not finished, not at 50.0% yet" in lines
    assert "| mabt m=4 d=256 rule | not reached | | | |" in lines
    assert "| mabt m=8 d=256 rule | not run yet | | | |" in lines


@pytest.mark.parametrize("scale", ["cpu", "gpu"], indirect=True)
def test_every_step_of_the_grid_is_timed_once_with_its_own_setting(scale, monkeypatch, tmp_path):
    """One step setting per (method, m, d, width), and each composes into the config its runs train,
    at either scale (composing needs no GPU)."""
    from mvssl_plugin.cli.config_name import compose_recipe

    data_at(monkeypatch, tmp_path)
    settings = claims_grid.step_settings(scale)
    keys = [(p.method, p.m, p.d, p.width) for p, _, _ in settings]
    assert len(keys) == len(set(keys)) == len({(p.method, p.m, p.d, p.width) for p in claims_grid.grid(scale)})
    for point, recipe, extra in settings:
        assert not any(o.startswith(("checkpoint.dir", "data.fraction", "max_epochs")) for o in extra)
        cfg = compose_recipe(recipe, "pretrain", extra)
        assert (cfg.method, cfg.data.num_views, cfg.method_kwargs.proj_output_dim, cfg.backbone.kwargs.width) == (
            point.method,
            point.m,
            point.d,
            point.width,
        )
        assert (cfg.accelerator, cfg.precision) == (scale.accelerator, scale.precision)


def test_step_times_alternate_the_settings_and_keep_the_median(monkeypatch, tmp_path):
    calls = []

    def fake_run_setting(overrides, steps, out, profile, recipe="mabt_cifar_cpu.yaml"):
        m = int(next(o for o in overrides if o.startswith("data.num_views=")).split("=")[1])
        calls.append(m)
        return [0.1 * m, 0.1 * m + 0.01 * len(calls), 0.1 * m]

    monkeypatch.setattr(clocks, "run_setting", fake_run_setting)
    data_at(monkeypatch, tmp_path)
    scale = claims_grid.scale_named("cpu", tmp_path)
    rows_ = clocks.measure_step_times(scale, rounds=2, steps=3)
    n = len(claims_grid.step_settings(scale))
    assert calls[:n] == calls[n:] and len(calls) == 2 * n  # every setting once per round, in the same order
    four = next(r for r in rows_ if (r["method"], r["m"], r["d"]) == ("mabt", 4, 256))
    assert four["s_per_step"] == pytest.approx(0.4) and four["views_per_s"] == pytest.approx(128 * 4 / 0.4, abs=0.1)
    assert four["steps"] == 6
    from mvssl_plugin.files import read_csv

    assert len(read_csv(tmp_path / "step_times.csv")) == n


def test_step_times_replace_this_machines_rows_and_keep_another_machines(monkeypatch, tmp_path):
    """The wall-clock ratios depend on the CPU: a second machine's measurement is added beside
    the first's, and measuring again replaces only one's own rows, in place."""
    from mvssl_plugin.files import read_csv, write_csv

    monkeypatch.setattr(clocks, "run_setting", lambda overrides, steps, out, profile, recipe="": [0.5] * steps)
    data_at(monkeypatch, tmp_path)
    scale = claims_grid.scale_named("cpu", tmp_path)
    monkeypatch.setattr(clocks, "cpu_description", lambda accelerator: "here")
    first = {**step_row("mabt", 2, 2048, 0.2), "cpu": "first"}
    write_csv(tmp_path / "step_times.csv", [first, {**step_row("mabt", 2, 2048, 9.0), "cpu": "here"}])
    clocks.measure_step_times(scale, rounds=1, steps=2)
    saved = read_csv(tmp_path / "step_times.csv")
    n = len(claims_grid.step_settings(scale))
    assert [r["cpu"] for r in saved] == ["first"] + ["here"] * n  # the first machine stays first
    assert float(saved[0]["s_per_step"]) == 0.2 and {float(r["s_per_step"]) for r in saved[1:]} == {0.5}


def test_an_estimate_scales_another_settings_run_by_the_measured_step_times():
    """Width 32 measured 2.0x the width-16 step, not the 4x the width squared would say."""
    narrow = [{"run": "a", "method": "mabt", "m": "2", "d": "2048", "epoch": "1", "views_seen": "100000",
               "train_seconds": "100", "eval_seconds": "30"}]  # fmt: skip
    wide = claims_grid.Point("mabt", 2, 2048, "fixed", 1.0, 1, ("width",), False, width=32)
    steps = [step_row("mabt", 2, 2048, 0.4), step_row("mabt", 2, 2048, 0.8, width=32)]
    assert clocks.estimate_minutes(wide, narrow, steps) == pytest.approx(2 * (100 + 30) / 60)
    four = claims_grid.Point("mabt", 4, 256, "rule", 1.0, 1, ("views",), True)
    steps.append(step_row("mabt", 4, 256, 0.4))  # per view: 0.4 / 512 against 0.4 / 256
    # 200,000 views at half the baseline's 1 ms; the same evaluation (same width)
    assert clocks.estimate_minutes(four, narrow, steps) == pytest.approx((200_000 * 0.5e-3 + 30) / 60)
    # another machine where 4 views cost as much per view as the baseline: this machine's ratio counts
    other = [{**r, "cpu": "other"} for r in (step_row("mabt", 2, 2048, 0.4), step_row("mabt", 4, 256, 0.8))]
    assert clocks.estimate_minutes(four, narrow, steps + other, "other") == pytest.approx((200_000e-3 + 30) / 60)
    assert clocks.estimate_minutes(four, narrow, steps + other, "c") == pytest.approx((200_000 * 0.5e-3 + 30) / 60)


@pytest.mark.parametrize(
    "fewer_images, expected",
    [
        ((48.5, 49.5), "holds: -0.5 points, seeds' spread 1.0"),  # equal within the spread
        ((45.0, 46.0), "does not hold: -4.0 points"),
        ((49.0,), "inconclusive so far"),
    ],
)
def test_an_equal_accuracy_claim_holds_unless_below_beyond_the_spread(fewer_images, expected):
    full, half = ("mabt", 2, 256, "rule", 1.0, 20), ("mabt", 4, 256, "rule", 0.5, 20)
    grid = grid_of((*full, (50.0, 49.0)), (*half, fewer_images))
    assert verdicts.verdict(grid, half, full, "4 x 50%", matches=True).startswith(expected)


def test_the_claims_pages_table_is_the_one_the_committed_csvs_make():
    """docs/claims.md cannot drift from results.csv: `--report` writes the table between markers."""
    from mvssl_plugin.files import read_csv

    grid = verdicts.Grid(read_csv(CPU.results), read_csv(CPU.curves))
    table = claims_report.claims_table(grid, read_csv(CPU.step_times), claims_grid.BASE_EPOCHS)
    readme = (REPO / "docs" / "claims.md").read_text()
    block = claims_report.TABLE_START, claims_report.TABLE_END, table
    assert replace_between(readme, *block) == readme, "run: python benchmarks/cpu_claims.py --report"
    with pytest.raises(SystemExit, match="no markers '<!-- cpu-claims table"):
        replace_between("# a README without the table", *block)


def test_each_setting_is_set_against_the_baseline_after_the_same_seconds():
    base, four = ("mabt", 2, 2048, "fixed", 1.0, 20), ("mabt", 4, 256, "rule", 1.0, 10)
    grid = grid_of((*base, (50.0,)), (*four, (40.0,)))
    # 4 views: 2M views at 0.5 ms = 1,000 s; the baseline at 1 ms/view has 1M views then: epoch 10, 25%
    steps = [step_row("mabt", 2, 2048, 0.256), step_row("mabt", 4, 256, 0.256)]
    lines = claims_report.equal_seconds_table(grid, base, [base, four], steps)
    assert "| mabt m=4 d=256 rule | 10 | 1,000 | 40.00 | 25.00 |" in lines
    assert claims_report.equal_seconds_table(grid, base, [base, four], []) == []
    # a setting that runs past the baseline's seconds is set against it at its last epoch within them:
    # 4 views at 0.75 ms / view for 20 epochs (3,000 s); the baseline ends at 2,000 s; epoch 13 is at 1,950 s
    longer = ("mabt", 4, 256, "rule", 1.0, 20)
    grid = grid_of((*base, (50.0,)), (*longer, (40.0,)))
    steps = [step_row("mabt", 2, 2048, 0.256), step_row("mabt", 4, 256, 0.384)]
    lines = claims_report.equal_seconds_table(grid, base, [base, longer], steps)
    assert "| mabt m=4 d=256 rule | 13 | 1,950 | 26.00 | 48.75 |" in lines


@pytest.mark.parametrize("scale", ["gpu"], indirect=True)
def test_the_gpu_scale_is_the_same_grid_at_resnet18_width(scale, monkeypatch, tmp_path):
    gpu = claims_grid.grid(scale)
    cpu = [p for p in claims_grid.grid(CPU) if not {"precision", "width"} & set(p.parts)]  # questions about a CPU
    cpu_names = [p.name(1) for p in cpu]

    def setting(p):
        return (p.method, p.m, p.d, p.beta, p.fraction, p.epochs, p.parts, p.deciding)

    assert [setting(p) for p in gpu] == [setting(p) for p in cpu]
    assert {p.width for p in gpu} == {64} and [p.name(1) for p in gpu] == cpu_names  # no -w64 in the names
    data_at(monkeypatch, tmp_path)
    _, extra = claims_grid.overrides(scale, gpu[0], 1)
    assert {"accelerator=gpu", "precision=bf16-mixed", "backbone.kwargs.width=64"} <= set(extra)
    assert f"checkpoint.dir={(tmp_path / 'gpu_claims').resolve() / 'runs' / gpu[0].name(1)}" in extra
    _, extra = claims_grid.overrides(CPU, cpu[0], 1)
    assert {"accelerator=cpu", "precision=auto", "backbone.kwargs.width=16"} <= set(extra)


@pytest.mark.parametrize("scale", ["gpu"], indirect=True)
def test_the_gpu_report_has_its_own_folder_title_and_leaves_the_readme_alone(scale, monkeypatch, tmp_path):
    from mvssl_plugin.files import write_csv

    results, curves = rows("mabt", 2, 2048, "fixed", 1.0, claims_grid.BASE_EPOCHS, (60.0,))
    four = rows("mabt", 4, 256, "rule", 1.0, claims_grid.BASE_EPOCHS, (70.0,))
    out = tmp_path / "gpu_claims"
    out.mkdir()
    write_csv(out / "results.csv", results + four[0])
    write_csv(out / "curves.csv", curves + four[1])
    steps = [step_row("mabt", 2, 2048, 0.2, width=64), step_row("mabt", 4, 256, 0.3, width=64)]
    write_csv(out / "step_times.csv", steps)  # the GPU's steps are at width 64
    repo = tmp_path / "repo"
    repo.mkdir()
    readme = repo / "docs" / "claims.md"
    readme.parent.mkdir()
    readme.write_text((REPO / "docs" / "claims.md").read_text())
    monkeypatch.setattr(cpu_claims, "REPO", repo)
    cpu_claims.main(["--scale", "gpu", "--results", str(out), "--report"])
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# The paper's claims on all of CIFAR-10: ResNet-18, GPU")
    assert "| mabt m=2 d=2048 fixed | 20 | 60.0 (1 seed) |" in summary
    # 4 views reach 60% at epoch 18 (3.6M views, 1.8x the baseline's), at 0.75x its seconds per view
    assert "- mabt m=4 d=256 rule: does not hold so far: 1.35x the baseline's time, 1.80x its views" in summary
    assert "bf16 against fp32" not in summary and "backbone's width" not in summary  # the CPU's questions
    assert readme.read_text() == (REPO / "docs" / "claims.md").read_text()  # the page's table is the CPU's


@pytest.mark.parametrize("scale", ["gpu"], indirect=True)
def test_a_sigint_to_the_group_stops_the_harness_once_the_child_has_checkpointed(scale, monkeypatch, tmp_path):
    """The GPU kit cuts a call with SIGINT to the process group: the child checkpoints and exits, the
    harness waits for it and exits 130, and the runner resumes the line next call."""

    class Child:
        waited = False

        def __init__(self, command, **kwargs):
            self.command, self.returncode = command, None
            Child.handler = signal.getsignal(signal.SIGINT)

        def poll(self):
            raise KeyboardInterrupt  # the SIGINT reaches the harness while it waits on the child

        def wait(self, *args):
            Child.waited, self.returncode = True, 130
            return 130

    # both would start processes (git; torch's first import asks ldconfig) through the fake Popen
    monkeypatch.setattr(runner, "commit", lambda: "abc1234")
    monkeypatch.setattr(runner, "cpu_description", lambda accelerator: "G")
    monkeypatch.setattr(runner.subprocess, "Popen", Child)
    monkeypatch.setattr(runner, "estimate_minutes", lambda *args: None)
    # started from a background shell, which leaves SIGINT ignored: the harness takes it back
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(SystemExit) as stopped:
            runner.run_grid(scale, claims_grid.schedule(scale, (1,)), SCRIPT, 100)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.code == 130 and Child.waited
    assert Child.handler is signal.default_int_handler
    first = claims_grid.grid(scale)[0].name(1)
    log = (tmp_path / "gpu_claims" / "logs" / f"{first}.log").read_text()
    assert f"--run {first} --scale gpu --results {(tmp_path / 'gpu_claims').resolve()}" in log


def test_the_seconds_panel_uses_the_measured_step_rates_where_there_are_some():
    key = ("mabt", 4, 256, "rule", 1.0, 10)
    _, curves = rows(*key, (50.0,))
    seconds, measured = plots.plot_seconds(key, curves[:2], [step_row("mabt", 4, 256, 0.256)])
    assert measured and seconds == pytest.approx([200_000 * 0.0005, 400_000 * 0.0005])  # 0.256 s / (128 x 4)
    seconds, measured = plots.plot_seconds(key, curves[:2], [step_row("mabt", 2, 256, 0.256)])
    assert not measured and seconds == [float(r["train_seconds"]) for r in curves[:2]]


def test_a_runs_child_trains_and_writes_one_curve_row_per_epoch_then_its_result(tiny_cifar, monkeypatch, tmp_path):
    """The child as the harness starts it (``run_child``: the plugin's pretraining with the
    per-epoch callback), shrunk to tiny data: each epoch's row holds its kNN on the test split
    and its clocks, and the finished run's row is made from the last one."""
    from mvssl_plugin.files import read_csv

    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))
    scale = claims_grid.scale_named("cpu", tmp_path / "claims")
    tiny = ("optimizer.batch_size=8", "backbone.kwargs.width=8", "method_kwargs.proj_output_dim=16", "precision=32")
    point = claims_grid.Point("mabt", 2, 16, "rule", 1.0, 2, ("test",), False, tag="tiny", extra=tiny)
    runner.run_child(scale, point, 1, None)
    rows = read_csv(scale.curves)
    assert [(r["run"], r["epoch"], r["step"]) for r in rows] == [("tiny-e2-s1", "1", "3"), ("tiny-e2-s1", "2", "6")]
    assert all(0 <= float(r["knn_backbone"]) <= 100 and float(r["train_seconds"]) > 0 for r in rows)
    assert rows[-1]["views_seen"] == str(6 * 8 * 2) and rows[-1]["cpu"] == clocks.cpu_description()
    result = runner.record_result(scale, point, 1)
    assert (result["run"], result["epochs"], result["knn_backbone"]) == ("tiny-e2-s1", 2, rows[-1]["knn_backbone"])
    (last,) = scale.run_folder("tiny-e2-s1").rglob("*.ckpt")  # the checkpointer keeps the newest
    assert last.name.endswith("ep=1.ckpt")


def test_a_bad_clock_or_data_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """The run options (claims/cli.py): ``--until`` by the parser (exit 2), ``--data`` for its
    train/ and test/ folders, before the plan is even listed."""
    monkeypatch.delenv("CIFAR10_DIR", raising=False)
    with pytest.raises(SystemExit) as stopped:
        cpu_claims.main(["--until", "25:00", "--list"])
    assert stopped.value.code == 2 and "--until takes HH:MM" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=f"no CIFAR-10 ImageFolder tree .* at {tmp_path}: set CIFAR10_DIR"):
        cpu_claims.main(["--data", str(tmp_path), "--list"])
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_run_option_without_a_budget_is_an_error_not_the_help(monkeypatch, capsys):
    """``--only X --pause-log F`` without ``--budget-min``/``--until`` once printed the help and
    exited 0; a background chain took that for the run's end and went on to the next."""
    from claims import cli

    monkeypatch.setattr(cli, "run_grid", lambda *args: pytest.fail("no budget, no run"))
    with pytest.raises(SystemExit) as stopped:
        cpu_claims.main(["--only", "mabt-m2-d256-rule-f1-e20-s1", "--pause-log", "pause.log"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2
    assert "--only, --pause-log runs nothing without a budget: add --budget-min MINUTES or --until HH:MM" in error
    cpu_claims.main([])  # nothing at all: the help, as before
    assert capsys.readouterr().out.startswith("usage:")


def test_only_picks_the_run_of_that_exact_name_else_every_run_containing_it():
    """``--only lr1e-3-e3-s2`` once went on to ``cos-lr1e-3-e3-s2``, whose name contains it."""
    points = [claims_grid.Point("mabt", 2, 256, "rule", 1.0, 3, ("t",), True, tag=t) for t in ("lr1e-3", "cos-lr1e-3")]
    plan = [(p, seed) for p in points for seed in (1, 2)]
    names = [p.name(s) for p, s in plan]
    assert [n for n in names if runner.selected(n, "lr1e-3-e3-s2", plan)] == ["lr1e-3-e3-s2"]
    assert {n for n in names if runner.selected(n, "lr1e-3-e3", plan)} == set(names)
    assert all(runner.selected(n, None, plan) for n in names)


def test_start_anyway_reaches_the_budget_loop(monkeypatch):
    """A run that needs hours and a checkpoint too large to carry starts in a shorter session
    only with ``--start-anyway`` (it resumes on this machine next call)."""
    from claims import cli

    calls = []
    monkeypatch.setattr(cli, "run_grid", lambda *args: calls.append(args))
    cpu_claims.main(["--budget-min", "5"])
    cpu_claims.main(["--budget-min", "5", "--start-anyway", "--only", "mabt-m2-d256-rule-f1-e20-s1"])
    (_, _, script, budget, _, _, anyway, until), (*_, only, anyway_now, _) = calls
    assert (script.name, budget, anyway, until) == ("cpu_claims.py", 5.0, False, None)
    assert (only, anyway_now) == ("mabt-m2-d256-rule-f1-e20-s1", True)
