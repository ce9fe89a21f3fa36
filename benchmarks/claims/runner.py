"""Running the grid: each run a child process (``run_child``) training through the plugin's own
flow with the per-epoch evaluation; the parent (``run_grid``) starts the next unfinished runs
within the budget, resumes a stopped one, lets a run go on from a finished shorter one, and
carries a stopped run's checkpoint to another machine; the newest complete checkpoint is found
here alone (``newest_checkpoint``). ``benchmarks/cpu_claims.py``'s
docstring says how these fit together."""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from mvssl_plugin.files import read_csv, write_csv
from mvssl_plugin.runs import ARGS, LOCK, is_complete_checkpoint

from . import clocks
from .clocks import ActiveClock, commit, cpu_description, estimate_minutes
from .grid import REPO, Point, Scale, overrides, schedule

#: in a run's folder: a checkpoint copied in (a finished shorter run's, or a carried one) that
#: its first launch resumes
RESUME_FROM = "resume_from.txt"
#: a stopped run's checkpoint goes into ``carry/<run>/`` (committed) up to this size, so that
#: the run goes on on another machine; a larger one stays here and the run starts over there
CARRY_MAX_MB = 16.0


def prefix_run(scale: Scale, point: Point, seed: int) -> Optional[Point]:
    """The longest finished shorter run of ``point``'s setting whose checkpoint is here: without
    a learning-rate schedule (the grid's runs have none) its epochs are ``point``'s first ones, so
    ``point`` can go on from it."""
    for epochs in range(point.epochs - 1, 0, -1):
        shorter = replace(point, epochs=epochs)
        if finished(scale, shorter.name(seed)) and any(scale.run_folder(shorter.name(seed)).rglob("*.ckpt")):
            return shorter
    return None


def copy_run_folder(source: Path, target: Path) -> None:
    """Makes ``target`` a copy of the run folder ``source`` (not its lock; nothing of a launch
    there that had not checkpointed survives) and marks its newest checkpoint for the first
    launch to resume (:func:`resume_overrides`)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(LOCK))
    newest = max(target.rglob("*.ckpt"), key=lambda c: c.stat().st_mtime)
    (target / RESUME_FROM).write_text(f"{newest}\n")


def extend_from(scale: Scale, shorter: Point, point: Point, seed: int) -> None:
    """Starts ``point``'s run as a copy of ``shorter``'s: its folder (checkpoint, clocks, metrics)
    and its curve rows under the new name, and a marker naming the copied checkpoint, which the
    first launch resumes (:func:`resume_overrides`). The shorter run's own folder is left as it is."""
    copy_run_folder(scale.run_folder(shorter.name(seed)), scale.run_folder(point.name(seed)))
    rows = [r for r in read_csv(scale.curves) if r["run"] != point.name(seed)]
    copied = [{**r, "run": point.name(seed)} for r in rows if r["run"] == shorter.name(seed)]
    write_csv(scale.curves, rows + copied)


#: the tensors an optimizer keeps for each trainable parameter (Adam: two moments; LARS, SGD: a momentum)
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lars": 1, "sgd": 1}


def checkpoint_mib(scale: Scale, point: Point) -> float:
    """A run's checkpoint size in MiB, predicted before it starts from its model: 4 bytes for
    each trainable parameter and each of its optimizer's tensors for it (``OPTIMIZER_STATES``),
    the buffers, and 0.5 MiB for the rest (at m = 2, d = 256 with Adam: 10.44 MiB predicted,
    10.05 measured; d = 2048: 107.7; solo-learn's Barlow Twins recipe with LARS: 72.0 predicted,
    71.6 measured)."""
    # local: solo-learn, Lightning and torch, which the parent harness (--list, the budget) never needs
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    recipe, extra = overrides(scale, point, 1)
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)  # solo-learn's warnings about training, which this does not do
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cfg, model = build_pretrain_model(compose_recipe(recipe, "pretrain", extra))
    finally:
        logging.disable(before)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    states = OPTIMIZER_STATES.get(cfg.optimizer.name, 2)  # an optimizer not named here: as many as Adam's
    return (4 * (1 + states) * trainable + buffers) / 2**20 + 0.5


def newest_checkpoint(folder: Path) -> Optional[Path]:
    """The newest complete checkpoint anywhere under ``folder`` (a run folder's
    ``<method>/<id>/``, a carry folder), or None: a truncated one, as a kill
    in the middle of a save leaves it, is never carried nor gone on from."""
    complete = [c for c in folder.rglob("*.ckpt") if is_complete_checkpoint(c)]
    return max(complete, key=lambda c: c.stat().st_mtime, default=None)


def carry_copy(scale: Scale, name: str, checkpoint: Path, inside: Path, small: Sequence[Path]) -> Path:
    """Makes ``carry/<name>/`` anew with ``checkpoint`` and the ``small`` files (args.json, ...)
    in its folder ``inside`` (a run folder's layout, ``<method>/<id>``), where the run's next
    launch on any machine finds it (:func:`carry_in`). Returns the checkpoint's copy."""
    target = scale.carry_folder(name)
    shutil.rmtree(target, ignore_errors=True)
    folder = target / inside
    folder.mkdir(parents=True)
    for f in (checkpoint, *small):
        shutil.copy2(f, folder / f.name)
    return folder / checkpoint.name


def carry_out(scale: Scale, name: str) -> Optional[Path]:
    """After a stop: copies the run's newest complete checkpoint, with its folder's small files
    (args.json, run.json, metrics.csv), into ``carry/<run>/`` for the commit, if it is at most
    ``CARRY_MAX_MB``; marks the run's curve rows so far with this machine. Returns the copy."""
    folder = scale.run_folder(name)
    newest = newest_checkpoint(folder)
    if newest is None:
        return None
    here = cpu_description(scale.accelerator)
    marked = [{**r, "cpu": r.get("cpu") or here} if r["run"] == name else r for r in read_csv(scale.curves)]
    write_csv(scale.curves, marked)
    size = newest.stat().st_size / 2**20
    if size > CARRY_MAX_MB:
        print(f"cpu_claims: {name}: its checkpoint ({size:.0f} MiB) is too large to carry: it starts over elsewhere")
        return None
    small = [f for f in newest.parent.iterdir() if f != newest and f.is_file() and f.suffix in (".json", ".csv")]
    copy = carry_copy(scale, name, newest, newest.parent.relative_to(folder), small)
    where = scale.carry_folder(name)
    print(f"cpu_claims: {name}: its checkpoint ({size:.1f} MiB) is in {where}: commit it to go on elsewhere")
    return copy


def carry_in(scale: Scale, name: str) -> bool:
    """Starts a run that is not under way here from its carried checkpoint, if there is one: the
    folder copied back, its first launch resuming the checkpoint (:func:`resume_overrides`); its
    curve rows so far are in the committed curves.csv."""
    source = scale.carry_folder(name)
    if not any(source.rglob("*.ckpt")):
        return False
    copy_run_folder(source, scale.run_folder(name))
    return True


def resume_overrides(scale: Scale, point: Point, seed: int) -> List[str]:
    """While a run holds only a copied checkpoint (a shorter run's, or a carried one), its launch
    names it and accepts the changes solo-learn's auto-resume would refuse (a longer
    ``max_epochs``, another machine's paths); from its first own checkpoint on, auto-resume
    finds it."""
    folder = scale.run_folder(point.name(seed))
    if not (folder / RESUME_FROM).is_file():
        return []
    copied = Path((folder / RESUME_FROM).read_text().strip())
    if not copied.is_file() or any(c.stat().st_mtime > copied.stat().st_mtime for c in folder.rglob("*.ckpt")):
        return []  # it has checkpointed since (or the copy is gone): auto-resume
    return [f"+resume_from_checkpoint='{copied}'", "auto_resume.accept_changes=true"]  # quoted: "ep=9" has a "="


def launch_overrides(scale: Scale, point: Point, seed: int) -> Tuple[str, List[str]]:
    """(recipe, Hydra overrides) of a run's next launch: the grid's, and what resuming a copied
    checkpoint needs while the run has no checkpoint of its own."""
    recipe, extra = overrides(scale, point, seed)
    return recipe, extra + resume_overrides(scale, point, seed)


def run_child(scale: Scale, point: Point, seed: int, pause_log: Optional[Path]) -> None:
    """Trains (or resumes) one run in this process, with the per-epoch evaluation."""
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    # local: solo-learn, Lightning and torch, which the parent harness (--list, the budget) never needs
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import pretrain

    from .epoch_eval import EpochEval

    recipe, extra = launch_overrides(scale, point, seed)
    cfg = compose_recipe(recipe, "pretrain", extra)
    pretrain(cfg, extra_callbacks=[EpochEval(scale, point, seed, pause_log)])


# ----------------------------------------------------------------------------- the harness (parent)


#: results.csv's columns: a finished run's last curves row, less the per-epoch ones
RESULT_COLUMNS = (
    "method",
    "m",
    "d",
    "beta",
    "fraction",
    "seed",
    "epochs",
    "views_seen",
    "train_seconds",
    "knn_backbone",
    "rank_projector",
    "precision",
    "cpu",
    "commit",
)


def finished(scale: Scale, name: str) -> bool:
    """Whether results.csv has the run's row."""
    return any(r.get("run") == name for r in read_csv(scale.results))


def record_result(scale: Scale, point: Point, seed: int) -> dict:
    """Appends the finished run's row to results.csv from its last curves row."""
    name = point.name(seed)
    curve = [r for r in read_csv(scale.curves) if r["run"] == name]
    last = max(curve, key=lambda r: int(r["epoch"]))
    if int(last["epoch"]) != point.epochs:
        raise SystemExit(f"{name}: finished, but curves.csv ends at epoch {last['epoch']} of {point.epochs}")
    row = {"run": name, **{k: last.get(k, "") for k in RESULT_COLUMNS}}
    in_order = sorted(curve, key=lambda r: int(r["epoch"]))
    row.update(epochs=point.epochs, cpu=machines(in_order, cpu_description(scale.accelerator)), commit=commit())
    row["precision"] = "+".join(dict.fromkeys(r["precision"] for r in in_order if r.get("precision")))
    write_csv(scale.results, read_csv(scale.results) + [row])
    return row


def epochs_done(scale: Scale, name: str) -> int:
    return max((int(r["epoch"]) for r in read_csv(scale.curves) if r["run"] == name), default=0)


def machines(curve: Sequence[dict], here: str) -> str:
    """The ``cpu`` column of a run whose epochs (in order) ran on more than one machine (carried):
    each machine with its epochs; rows without a machine ran ``here``."""
    spans: List[list] = []
    for r in curve:
        cpu, epoch = r.get("cpu") or here, int(r["epoch"])
        if spans and spans[-1][0] == cpu:
            spans[-1][2] = epoch
        else:
            spans.append([cpu, epoch, epoch])
    if len(spans) == 1:
        return spans[0][0]
    return "; ".join(f"{cpu} (epochs {a}-{b})" for cpu, a, b in spans)


@dataclass(frozen=True)
class HeadStart:
    """How far a run of the grid is on this machine before its next launch."""

    here: bool  # a checkpoint in runs/ its launch resumes (resumable_here)
    carried: bool  # its checkpoint is only in carry/ (another machine's, committed)
    shorter: Optional[Point]  # else a finished shorter run of its setting it goes on from
    done: int  # epochs already trained


def resumable_here(scale: Scale, name: str) -> bool:
    """Whether ``runs/<name>/`` holds a checkpoint its launch resumes: a complete one beside
    its args.json, as auto-resume needs. A checkpoint alone does not count: ``git clean``
    keeps the ignored ``.ckpt`` and removes the args.json beside it, and auto-resume would
    then start the run over, unseen, instead of taking its carried checkpoint."""
    checkpoints = scale.run_folder(name).rglob("*.ckpt")
    return any(c.with_name(ARGS).is_file() and is_complete_checkpoint(c) for c in checkpoints)


def head_start(scale: Scale, point: Point, seed: int) -> HeadStart:
    name = point.name(seed)
    here = resumable_here(scale, name)
    carried = not here and any(scale.carry_folder(name).rglob("*.ckpt"))
    shorter = None if here or carried else prefix_run(scale, point, seed)
    done = shorter.epochs if shorter is not None else epochs_done(scale, name) if here or carried else 0
    return HeadStart(here, carried, shorter, done)


def minutes_left(
    point: Point, start: HeadStart, curves: Sequence[dict], step_times: Sequence[dict], machine: str
) -> Optional[float]:
    """``machine``'s estimate for the epochs ``point`` has left after ``start``."""
    need = estimate_minutes(point, curves, step_times, machine)
    return None if need is None else need * (point.epochs - start.done) / point.epochs


def selected(name: str, only: Optional[str], plan: Sequence[Tuple[Point, int]]) -> bool:
    """Whether ``--only`` picks the run ``name``: the run of that exact name where there is one
    (``lr1e-3-e3-s2`` is not also ``cos-lr1e-3-e3-s2``), else every run whose name contains it."""
    if not only:
        return True
    exact = any(point.name(seed) == only for point, seed in plan)
    return name == only if exact else only in name


def run_grid(
    scale: Scale,
    plan: Sequence[Tuple[Point, int]],
    script: Path,
    budget_min: Optional[float] = None,
    pause_log: Optional[Path] = None,
    only: Optional[str] = None,
    start_anyway: bool = False,
    until: Optional[float] = None,
) -> None:
    """Runs ``plan`` ((point, seed) in order), each run a child ``script --run <name>``
    (``cpu_claims.py``), within the budget (``--budget-min`` minutes not paused, ``until`` a time
    since the epoch: ``cpu_claims.py``'s docstring)."""
    # a harness started in the background by a non-interactive shell inherits SIGINT ignored,
    # and Python then raises no KeyboardInterrupt: the child would stop alone and not be carried
    signal.signal(signal.SIGINT, signal.default_int_handler)
    clock = ActiveClock()
    budget = float("inf") if budget_min is None else budget_min * 60

    def left() -> float:
        """Seconds left: the unpaused budget's, or to ``until`` if that is sooner."""
        active = budget - clock.read()
        return active if until is None else min(active, until - clocks.wall_clock())

    machine = cpu_description(scale.accelerator)
    logs = scale.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for point, seed in plan:
        name = point.name(seed)
        if finished(scale, name) or not selected(name, only, plan):
            continue
        seconds = left()
        if seconds < 60:
            print(f"cpu_claims: budget spent; next: {name}")
            return
        start = head_start(scale, point, seed)
        started_here, carried, shorter = start.here, start.carried, start.shorter
        need = minutes_left(point, start, read_csv(scale.curves), read_csv(scale.step_times), machine)
        if not (start_anyway or started_here or carried) and need is not None and need * 60 > seconds:
            size = checkpoint_mib(scale, point)
            if size > CARRY_MAX_MB:
                print(
                    f"cpu_claims: {name} needs about {need:.0f} min, the budget has {seconds / 60:.0f} left, and its "
                    f"checkpoint (about {size:.0f} MiB) is too large to carry: skipped, it would start over elsewhere "
                    "(--start-anyway)",
                    flush=True,
                )
                continue
            print(f"cpu_claims: {name} needs about {need:.0f} min: it starts, and is carried when the budget ends")
        if shorter is not None:
            extend_from(scale, shorter, point, seed)
            print(f"cpu_claims: {name} goes on from {shorter.name(seed)} (epoch {shorter.epochs})", flush=True)
        elif carried and carry_in(scale, name):
            print(
                f"cpu_claims: {name} goes on from its carried checkpoint ({start.done} epochs in curves.csv)",
                flush=True,
            )
        command = [sys.executable, str(script), "--run", name, "--scale", scale.name, "--results", str(scale.out)]
        if pause_log is not None:
            command += ["--pause-log", str(pause_log)]
        print(f"cpu_claims: {time.strftime('%H:%M:%S')} {name}", flush=True)
        with open(logs / f"{name}.log", "a") as log:
            log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} commit {commit()}: {' '.join(command)}\n")
            log.flush()
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
            try:
                while child.poll() is None:
                    if left() < 0:
                        print(f"cpu_claims: budget spent: stopping {name} (it resumes next call)", flush=True)
                        child.send_signal(signal.SIGTERM)
                        child.wait()
                        carry_out(scale, name)
                        return
                    time.sleep(5)
            except KeyboardInterrupt:  # SIGINT to the group (the GPU kit's budget): the child checkpoints
                print(f"cpu_claims: interrupted: {name} stops at a checkpoint (it resumes next call)", flush=True)
                child.wait()
                carry_out(scale, name)
                raise SystemExit(130) from None
        if child.returncode != 0:
            raise SystemExit(f"cpu_claims: {name} exited {child.returncode}: see {logs / (name + '.log')}")
        row = record_result(scale, point, seed)
        shutil.rmtree(scale.carry_folder(name), ignore_errors=True)  # done: the commit drops its carry
        print(f"cpu_claims: {name} done: kNN {row['knn_backbone']}% after {row['epochs']} epochs", flush=True)
    print("cpu_claims: every run is done" if only is None else f"cpu_claims: every run with {only!r} is done")


def list_grid(scale: Scale, seeds: Sequence[int]) -> None:
    """The grid's runs, each with its status and this machine's minutes left."""
    curves, step_times = read_csv(scale.curves), read_csv(scale.step_times)
    machine = cpu_description(scale.accelerator)
    print("| run | parts | status | last kNN | min left here |")
    print("|---|---|---|---|---|")
    total = 0.0
    for point, seed in schedule(scale, seeds):
        name = point.name(seed)
        rows = [r for r in curves if r["run"] == name]
        last = max(rows, key=lambda r: int(r["epoch"])) if rows else None
        done = finished(scale, name)
        status = "done" if done else (f"epoch {last['epoch']}/{point.epochs}" if last else "to do")
        left = None if done else minutes_left(point, head_start(scale, point, seed), curves, step_times, machine)
        total += left or 0.0
        minutes = "-" if left is None else f"{left:.0f}"
        print(f"| {name} | {', '.join(point.parts)} | {status} | {last['knn_backbone'] if last else '-'} | {minutes} |")
    print(f"\nabout {total / 60:.1f} h left here ({machine}), by this machine's epochs where it has any")
