"""The paper's three claims on all of CIFAR-10, on a CPU, in pieces that resume.

    python benchmarks/cpu_claims.py --list                  # the grid and what is done
    python benchmarks/cpu_claims.py --budget-min 120        # run the next runs for 2 hours
    python benchmarks/cpu_claims.py --report                # summary.md and plots from the CSVs
    python benchmarks/cpu_claims.py --step-times            # wall-clock: every step, side by side

Every run pretrains through the plugin's own flow (``main_pretrain.py``'s ``pretrain``, the
CPU recipes ``mabt_cifar_cpu.yaml`` / ``mavicreg_cifar_cpu.yaml``): all 50,000 training
JPEGs of ../shared/data/cifar10 (or ``CIFAR10_DIR``, or ``data.fraction`` of them for the
data claim: solo-learn's stratified subsets), ``data.format=memory``, the width-16 CIFAR
ResNet-18, batch 128, the authors' optimizer (Adam, constant learning rate), precision
``auto`` (bf16 autocast on a CPU with native bf16), no online validation. After every
epoch a callback measures, outside the training clock:

* the backbone's kNN top-1 on all 10,000 test images, the bank all 50,000 training
  images (plain normalized, whatever fraction the run trains on): solo-learn's weighted
  kNN, k = 20, cosine, T = 0.07;
* RankMe of the projector's (and backbone's) test embeddings;
* the clocks: training seconds (Lightning's epochs, without this evaluation, less the
  time the run was paused, see below), views processed (steps x batch x m).

Each epoch appends a row to ``curves.csv``; a finished run appends one row to
``results.csv``. A run is a child process with its own checkpoint folder; a call runs the
next unfinished runs, most decisive first, until ``--budget-min`` is spent, then stops the
running one with SIGTERM (the plugin writes its ``-stopped.ckpt``); the next call resumes
it there (auto-resume), on this machine. ``results.csv`` and ``curves.csv`` are committed,
so the grid also continues elsewhere. A stopped run goes on elsewhere too: its checkpoint
(with args.json, run.json, metrics.csv) is copied into ``carry/<run>/`` to be committed, if
it is at most ``CARRY_MAX_MB`` (16 MiB: the width-16 runs up to d = 256, about 10 MiB with
Adam's state; not the d = 2048 ones), and a machine without the run's folder (or with a
checkpoint whose args.json is gone, as ``git clean`` leaves it) resumes it from there, however
long it waited (auto-resume's 36 h window is lifted); the finished row's ``cpu`` and
``precision`` then name each machine's epochs, and ``carry/<run>/`` is deleted. A larger one
would start over elsewhere, so a call skips such a run when its budget cannot finish it, by an
estimate from the epochs already in ``curves.csv`` (this machine's own, where it has any:
``--list`` gives each run's minutes left here and their sum), and goes on to the next run
(``--start-anyway`` starts it all the same); a run small enough to carry always starts, and a
run resumed here or carried always goes on.
The budget counts minutes the harness was not paused. ``--until HH:MM`` (this machine's clock)
ends the call at that time whatever the pauses, e.g. to leave the end of a session to the
test suite; with ``--budget-min`` too, whichever comes first.

Pausing: other work on a small machine pauses the runs with SIGSTOP to the process group
whose id ``--pgid-file`` holds, and logs each pause in ``--pause-log`` (``<unix time>
stop|cont``): the paused seconds inside an epoch are taken off its training seconds, those
before a stop inside it too (the checkpoint carries them into the resume).
Wall-clock claims still come from step times measured side by side in one quiet run:
``--step-times`` times every distinct step of the grid (method, m, d, width), the settings
alternating within each round (``benchmarks/step_clock.py``), into
``step_times.csv``; the report turns views-to-reach into seconds with them. Training
seconds of runs that shared a machine are indicative only.

Because the optimizer has no schedule, a shorter run is a prefix of a longer one: a run goes
on from the end of a finished shorter run of its setting whose checkpoint is on this machine
(its folder and curve rows copied; the first launch names the copied checkpoint in
``resume_from_checkpoint`` with ``auto_resume.accept_changes`` for the one change,
``max_epochs``, which solo-learn's auto-resume would not match; later launches auto-resume).
The epoch budgets below put the data claim at equal views processed, and run 4 and 8 views
to twice the baseline's views (about the baseline's time at their step rates), so that each
shows whether and when it reaches the baseline's final kNN.

``--scale gpu`` runs the same grid at the paper's backbone: the standard ResNet-18 (width 64,
the CIFAR stem), ``accelerator=gpu``, bf16 mixed precision, results in
``benchmarks/results/gpu_claims/`` (or ``--results``), the same report; the CPU-only questions
(bf16 against fp32 on a CPU, the backbone's width) are left out. The GPU kit runs it
(``benchmarks/gpu/runs/claims.txt``): a call cut by the kit's budget (SIGINT) stops the running
run at a checkpoint, and the next call resumes it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_claims_report import seconds_per_view, step_times_by_machine  # noqa: E402
from step_clock import cifar_root  # noqa: E402


@dataclass(frozen=True)
class Scale:
    """Where the grid runs: the backbone width, the accelerator and precision, the results folder."""

    name: str
    width: int
    accelerator: str
    precision: str  # of the grid's runs; "auto": bf16 where the CPU computes it natively
    out: Path
    setting: str  # the report's words for it


SCALES = {
    "cpu": Scale("cpu", 16, "cpu", "auto", REPO / "benchmarks" / "results" / "cpu_claims", "width-16 ResNet-18, CPU"),
    "gpu": Scale("gpu", 64, "gpu", "bf16-mixed", REPO / "benchmarks" / "results" / "gpu_claims", "ResNet-18, GPU"),
}
SCALE = SCALES["cpu"]
OUT = SCALE.out
RESULTS, CURVES = OUT / "results.csv", OUT / "curves.csv"
STEP_TIMES = OUT / "step_times.csv"


def use_scale(name: str, out: Optional[Path] = None) -> Scale:
    """Points the harness at a scale (and its results at ``out``, default the scale's folder)."""
    global SCALE, OUT, RESULTS, CURVES, STEP_TIMES
    SCALE = replace(SCALES[name], out=(out or SCALES[name].out).resolve())
    OUT = SCALE.out
    RESULTS, CURVES, STEP_TIMES = OUT / "results.csv", OUT / "curves.csv", OUT / "step_times.csv"
    return SCALE


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
#: the 2-view baseline's epochs; every other budget is set from it (equal views processed)
BASE_EPOCHS = 20
#: the CPU grid's backbone width; the points below are written at it and scaled to ``SCALE.width``
WIDTH = 16
#: epochs of the width-32 check (about the CPU-seconds of 12 width-16 epochs)
WIDTH_CHECK_EPOCHS = 4
#: "fixed": the beta the rule gives at d = 8192, m = 2 (the paper's large-projector setting)
FIXED_C_OVER = 8192


@dataclass(frozen=True)
class Point:
    """One setting of the grid; ``parts``: the claims it serves."""

    method: str
    m: int
    d: int
    beta: str  # rule | fixed | none (mmcr)
    fraction: float
    epochs: int
    parts: Tuple[str, ...]
    deciding: bool  # run with 2 seeds
    precision: str = "auto"
    width: int = WIDTH
    #: another harness's setting (``speedrun.py``): its name, recipe and Hydra overrides, applied
    #: after the grid's own (a key given here replaces the grid's); such a run never goes on
    #: from a shorter one, since a learning-rate schedule depends on ``max_epochs``
    tag: str = ""
    recipe: str = ""
    extra: Tuple[str, ...] = ()

    def name(self, seed: int) -> str:
        if self.tag:
            return f"{self.tag}-e{self.epochs}-s{seed}"
        name = f"{self.method}-m{self.m}-d{self.d}-{self.beta}-f{self.fraction:g}-e{self.epochs}-s{seed}"
        name += "" if self.width == SCALE.width else f"-w{self.width}"
        return name if self.precision == "auto" else f"{name}-p{self.precision}"


def width_of(run: str) -> int:
    """The backbone width a run's name says (``-w32``), else the grid's."""
    tail = [part for part in run.split("-") if part[:1] == "w" and part[1:].isdigit()]
    return int(tail[0][1:]) if tail else SCALE.width


def grid() -> List[Point]:
    """The grid, most decisive first (the order runs are started in), at ``SCALE``."""
    e = BASE_EPOCHS
    points = [
        # bf16 (the CPU default where native) against fp32: one epoch, the same kNN within seeds?
        Point("mabt", 2, 256, "rule", 1.0, 1, ("precision",), True, precision="32"),
        Point("mabt", 2, 256, "rule", 1.0, 1, ("precision",), True),
        # views: the baseline (2 views, the largest d, fixed beta) vs 4 and 8 views, d = 256, the rule
        Point("mabt", 2, 2048, "fixed", 1.0, e, ("projector", "views"), True),
        # (4 and 8 views to twice the baseline's views: whether and when they reach its final kNN)
        Point("mabt", 4, 256, "rule", 1.0, e, ("views",), True),
        # the width: does a width-32 backbone learn more per CPU-second than the grid's 16?
        # (the baseline's setting; compared with the baseline at equal training seconds)
        Point("mabt", 2, 2048, "fixed", 1.0, WIDTH_CHECK_EPOCHS, ("width",), False, width=2 * WIDTH),
        Point("mabt", 2, 256, "rule", 1.0, e, ("projector", "data"), True),
        Point("mabt", 8, 256, "rule", 1.0, e // 2, ("views",), True),
        # projector: d in {64, 256, 2048}, the rule vs the fixed beta
        Point("mabt", 2, 64, "fixed", 1.0, e, ("projector",), True),
        Point("mabt", 2, 64, "rule", 1.0, e, ("projector",), True),
        Point("mabt", 2, 256, "fixed", 1.0, e, ("projector",), False),
        Point("mabt", 2, 2048, "rule", 1.0, e, ("projector",), False),
        # data: 4 x 50% and 8 x 25% against 2 x 100% (above), equal views processed
        Point("mabt", 4, 256, "rule", 0.5, e, ("data",), True),
        Point("mabt", 8, 256, "rule", 0.25, e, ("data",), True),
        # solo-learn's own Barlow Twins beside the baseline
        Point("barlow_twins", 2, 2048, "fixed", 1.0, e, ("views",), False),
        # VICReg, the views pair (4 views to twice the baseline's views, as for Barlow Twins);
        # MMCR at 4 views
        Point("mavicreg", 2, 2048, "fixed", 1.0, e, ("vicreg",), False),
        Point("mavicreg", 4, 256, "rule", 1.0, e, ("vicreg",), False),
        Point("mmcr", 4, 256, "none", 1.0, e // 2, ("mmcr",), False),
    ]
    if SCALE.name == "cpu":
        return points
    # bf16 against fp32 and the width are questions about the CPU; the rest at the scale's width
    return [replace(p, width=SCALE.width) for p in points if not {"precision", "width"} & set(p.parts)]


def schedule(seeds: Sequence[int]) -> List[Tuple[Point, int]]:
    """(point, seed) in run order: the precision check's seeds, every point's first seed,
    then the deciding points' second."""
    check = [(p, s) for p in grid() for s in seeds if "precision" in p.parts]
    first = [(p, seeds[0]) for p in grid() if "precision" not in p.parts]
    rest = [(p, s) for s in seeds[1:] for p in grid() if p.deciding and "precision" not in p.parts]
    return check + first + rest


def find_point(name: str) -> Tuple[Point, int]:
    for point, seed in schedule((1, 2)):
        if point.name(seed) == name:
            return point, seed
    raise SystemExit(f"{name}: not a run of the grid (see --list)")


#: in a run's folder: a checkpoint copied in (a finished shorter run's, or a carried one) that
#: its first launch resumes
RESUME_FROM = "resume_from.txt"
#: a stopped run's checkpoint goes into ``carry/<run>/`` (committed) up to this size, so that
#: the run goes on on another machine; a larger one stays here and the run starts over there
CARRY_MAX_MB = 16.0


def prefix_run(point: Point, seed: int) -> Optional[Point]:
    """The longest finished shorter run of ``point``'s setting whose checkpoint is here: without
    a learning-rate schedule its epochs are ``point``'s first ones, so ``point`` can go on from it."""
    if point.tag:
        return None
    for epochs in range(point.epochs - 1, 0, -1):
        shorter = replace(point, epochs=epochs)
        if finished(shorter.name(seed)) and any((OUT / "runs" / shorter.name(seed)).rglob("*.ckpt")):
            return shorter
    return None


def copy_run_folder(source: Path, target: Path) -> None:
    """Makes ``target`` a copy of the run folder ``source`` (not its lock; nothing of a launch
    there that had not checkpointed survives) and marks its newest checkpoint for the first
    launch to resume (:func:`resume_overrides`)."""
    from mvssl_plugin.runs import LOCK

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(LOCK))
    newest = max(target.rglob("*.ckpt"), key=lambda c: c.stat().st_mtime)
    (target / RESUME_FROM).write_text(f"{newest}\n")


def extend_from(shorter: Point, point: Point, seed: int) -> None:
    """Starts ``point``'s run as a copy of ``shorter``'s: its folder (checkpoint, clocks, metrics)
    and its curve rows under the new name, and a marker naming the copied checkpoint, which the
    first launch resumes (:func:`resume_overrides`). The shorter run's own folder is left as it is."""
    from mvssl_plugin.runs import read_csv, write_csv

    copy_run_folder(OUT / "runs" / shorter.name(seed), OUT / "runs" / point.name(seed))
    rows = [r for r in read_csv(CURVES) if r["run"] != point.name(seed)]
    copied = [{**r, "run": point.name(seed)} for r in rows if r["run"] == shorter.name(seed)]
    write_csv(CURVES, rows + copied)


def checkpoint_mib(point: Point) -> float:
    """A run's checkpoint size in MiB, predicted before it starts from its model: 4 bytes for
    each trainable parameter and each of Adam's two moments, the buffers, and 0.5 MiB for the
    rest (at m = 2, d = 256: 10.44 MiB predicted, 10.05 measured; d = 2048: 107.7)."""
    import contextlib
    import io
    import logging

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    recipe, extra = overrides(point, 1)
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)  # solo-learn's warnings about training, which this does not do
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            _, model = build_pretrain_model(compose_recipe(recipe, "pretrain", extra))
    finally:
        logging.disable(before)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return (12 * trainable + buffers) / 2**20 + 0.5


def carry_out(name: str) -> Optional[Path]:
    """After a stop: copies the run's newest complete checkpoint, with its folder's small files
    (args.json, run.json, metrics.csv), into ``carry/<run>/`` for the commit, if it is at most
    ``CARRY_MAX_MB``; marks the run's curve rows so far with this machine. Returns the copy."""
    from mvssl_plugin.runs import is_complete_checkpoint, read_csv, write_csv

    folder = OUT / "runs" / name
    ckpts = [c for c in folder.rglob("*.ckpt") if is_complete_checkpoint(c)]
    if not ckpts:
        return None
    here = cpu_description()
    write_csv(CURVES, [{**r, "cpu": r.get("cpu") or here} if r["run"] == name else r for r in read_csv(CURVES)])
    newest = max(ckpts, key=lambda c: c.stat().st_mtime)
    size = newest.stat().st_size / 2**20
    if size > CARRY_MAX_MB:
        print(f"cpu_claims: {name}: its checkpoint ({size:.0f} MiB) is too large to carry: it starts over elsewhere")
        return None
    target = OUT / "carry" / name
    shutil.rmtree(target, ignore_errors=True)
    inside = target / newest.parent.relative_to(folder)
    inside.mkdir(parents=True)
    for f in newest.parent.iterdir():
        if f == newest or (f.is_file() and f.suffix in (".json", ".csv")):
            shutil.copy2(f, inside / f.name)
    print(f"cpu_claims: {name}: its checkpoint ({size:.1f} MiB) is in {target}: commit it to go on elsewhere")
    return inside / newest.name


def carry_in(name: str) -> bool:
    """Starts a run that is not under way here from its carried checkpoint, if there is one: the
    folder copied back, its first launch resuming the checkpoint (:func:`resume_overrides`); its
    curve rows so far are in the committed curves.csv."""
    source = OUT / "carry" / name
    if not any(source.rglob("*.ckpt")):
        return False
    copy_run_folder(source, OUT / "runs" / name)
    return True


def resume_overrides(point: Point, seed: int) -> List[str]:
    """While a run holds only a copied checkpoint (a shorter run's, or a carried one), its launch
    names it and accepts the changes solo-learn's auto-resume would refuse (a longer
    ``max_epochs``, another machine's paths); from its first own checkpoint on, auto-resume
    finds it."""
    folder = OUT / "runs" / point.name(seed)
    if not (folder / RESUME_FROM).is_file():
        return []
    copied = Path((folder / RESUME_FROM).read_text().strip())
    if not copied.is_file() or any(c.stat().st_mtime > copied.stat().st_mtime for c in folder.rglob("*.ckpt")):
        return []  # it has checkpointed since (or the copy is gone): auto-resume
    return [f"+resume_from_checkpoint='{copied}'", "auto_resume.accept_changes=true"]  # quoted: "ep=9" has a "="


def overrides(point: Point, seed: int) -> Tuple[str, List[str]]:
    """(recipe, Hydra overrides) of a run."""
    from mvssl_plugin.beta_rule import BARLOW_TWINS_C, VICREG_C

    root = cifar_root()
    recipe = point.recipe or ("mavicreg_cifar_cpu.yaml" if point.method == "mavicreg" else "mabt_cifar_cpu.yaml")
    out = [
        f"method={point.method}",
        f"data.train_path={root / 'train'}",
        "data.val_path=null",
        "data.format=memory",
        f"data.fraction={point.fraction if point.fraction < 1 else -1}",
        f"data.num_views={point.m}",
        "data.num_workers=0",
        f"backbone.kwargs.width={point.width}",
        f"method_kwargs.proj_output_dim={point.d}",
        f"max_epochs={point.epochs}",
        f"seed={seed}",
        f"checkpoint.dir={OUT / 'runs' / point.name(seed)}",
        "auto_resume.enabled=true",
        "++auto_resume.max_hours=87600",  # a run waits between sessions: the recipe's 36 h would start it over
        "wandb.enabled=false",
        "+enable_progress_bar=false",
        f"accelerator={SCALE.accelerator}",
        f"precision={SCALE.precision if point.precision == 'auto' else point.precision}",
    ]
    out += resume_overrides(point, seed)
    if point.method == "mavicreg":
        out.append(f"method_kwargs.cov_loss_weight={'auto' if point.beta == 'rule' else VICREG_C / FIXED_C_OVER * 25}")
    elif point.method == "mmcr":
        out += ["~method_kwargs.lamb", "~method_kwargs.scale_loss", "~method_kwargs.objective"]
        out += ["~method_kwargs.redundancy", "+method_kwargs.local_weight=0.0"]
    else:
        out.append(f"method_kwargs.lamb={'auto' if point.beta == 'rule' else BARLOW_TWINS_C / FIXED_C_OVER}")
    if point.extra:
        own = {override_key(o) for o in point.extra}
        out = [o for o in out if override_key(o) not in own] + list(point.extra)
    return recipe, out


def override_key(override: str) -> str:
    """The config key a Hydra override sets: ``++a.b=1``, ``~a.b`` -> ``a.b``."""
    return override.split("=")[0].lstrip("+~")


# ----------------------------------------------------------------------------- step times (wall-clock)

#: settings the step-time measurement makes itself (``step_clock.run_setting``)
_STEP_OWN = {
    "data.train_path",
    "data.val_path",
    "data.format",
    "data.fraction",
    "checkpoint.dir",
    "auto_resume.enabled",
    "auto_resume.max_hours",
    "wandb.enabled",
    "max_epochs",
    "enable_progress_bar",
}


def step_settings() -> List[Tuple[Point, str, List[str]]]:
    """(point, recipe, overrides): one per distinct training step of the grid. A step's work
    depends on the method, m, d and the width; not on beta, the data fraction, the epochs or
    the seed."""
    found: Dict[Tuple[str, int, int, int], Tuple[Point, str, List[str]]] = {}
    for point in grid():
        key = (point.method, point.m, point.d, point.width)
        if point.precision != "auto" or key in found:
            continue
        found[key] = (point, *step_overrides(point))
    return list(found.values())


def step_overrides(point: Point) -> Tuple[str, List[str]]:
    """(recipe, overrides) of one training step of ``point``, for ``step_clock.run_setting``:
    the run's own overrides less those the step clock sets itself."""
    recipe, extra = overrides(point, 1)
    return recipe, [o for o in extra if override_key(o) not in _STEP_OWN]


def measure_step_times(rounds: int, steps: int) -> List[dict]:
    """Seconds per training step of every distinct step of the grid, measured side by side:
    the settings alternate within each round, so all see the same machine. Run it alone on
    the machine (nothing else training). It replaces this machine's rows of ``step_times.csv``
    and keeps other machines' (the report gives each its own time ratios), in their order."""
    import logging
    import statistics
    import tempfile
    import warnings

    import torch
    from step_clock import run_setting

    from mvssl_plugin.config.hardware import cpu_precision
    from mvssl_plugin.runs import read_csv, write_csv

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    settings = step_settings()
    times: Dict[str, List[float]] = {p.name(1): [] for p, _, _ in settings}
    out = Path(tempfile.mkdtemp())
    for round_ in range(rounds):
        for point, recipe, extra in settings:
            times[point.name(1)] += run_setting(extra, steps, out, False, recipe=recipe)
            print(f"cpu_claims: step times, round {round_ + 1}/{rounds}: {point.name(1)}", flush=True)
    rows = []
    for point, _, _ in settings:
        step = statistics.median(times[point.name(1)])
        rows.append(
            {
                "method": point.method,
                "m": point.m,
                "d": point.d,
                "width": point.width,
                "precision": cpu_precision()[0] if SCALE.precision == "auto" else SCALE.precision,
                "steps": len(times[point.name(1)]),
                "s_per_step": round(step, 4),
                "views_per_s": round(128 * point.m / step, 1),
                "threads": torch.get_num_threads(),
                "cpu": cpu_description(),
                "commit": commit(),
                "date": time.strftime("%Y-%m-%d %H:%M"),
            }
        )
    by_machine = step_times_by_machine(read_csv(STEP_TIMES))
    by_machine[cpu_description()] = rows  # in place when this machine measured before, else last
    write_csv(STEP_TIMES, [r for group in by_machine.values() for r in group])
    print("| method | m | d | width | s / step | views / s |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['m']} | {r['d']} | {r['width']} | {r['s_per_step']} | {r['views_per_s']} |")
    return rows


# ----------------------------------------------------------------------------- the run itself (child)


def pause_overlap(log: Optional[Path], start: float, end: float) -> float:
    """Seconds of [start, end] (unix time) that the pause log marks as paused. Lines that are
    not ``<unix time> stop|cont ...`` (a comment, a half-written line) are skipped: the log is
    written by hand-made tools, and a bad line must not end a run hours in."""
    if log is None or not log.is_file():
        return 0.0
    total, stopped = 0.0, None
    for line in log.read_text().splitlines():
        parts = line.split()
        try:
            when, what = float(parts[0]), parts[1]
        except (IndexError, ValueError):
            continue
        if what == "stop" and stopped is None:
            stopped = when
        elif what == "cont" and stopped is not None:
            total += max(0.0, min(end, when) - max(start, stopped))
            stopped = None
    if stopped is not None:
        total += max(0.0, end - max(start, stopped))
    return total


class EpochPauses:
    """The paused seconds of the running epoch, kept across a stop inside it: a stopped run's
    checkpoint carries the pauses of the epoch's first part (``state``), and the resumed epoch
    adds them to its own, so the epoch's training seconds lose every pause, not only those
    after the resume. Tagged with the epoch, so a checkpoint written at an epoch's end does not
    carry that epoch's pauses into the next."""

    def __init__(self, log: Optional[Path]) -> None:
        self.log = log
        self.epoch: Optional[int] = None
        self.start: Optional[float] = None
        self.carried = 0.0  # pauses of this epoch before a stop (from the checkpoint)
        self.carried_epoch: Optional[int] = None

    def begin(self, epoch: int, now: float) -> None:
        self.epoch, self.start = epoch, now

    def so_far(self, now: float) -> float:
        """Paused seconds of the running epoch up to ``now``, the part before a stop included."""
        own = pause_overlap(self.log, self.start, now) if self.start is not None else 0.0
        return own + (self.carried if self.carried_epoch == self.epoch else 0.0)

    def end(self, now: float) -> float:
        """The epoch's paused seconds; the carried part is used once."""
        paused = self.so_far(now)
        self.start, self.carried, self.carried_epoch = None, 0.0, None
        return paused

    def state(self, now: float) -> dict:
        if self.start is None:
            return {}
        return {"epoch": self.epoch, "paused_seconds": self.so_far(now)}

    def load(self, state: dict) -> None:
        if "epoch" in state:
            self.carried, self.carried_epoch = float(state["paused_seconds"]), int(state["epoch"])


def epoch_eval_callback(point: Point, seed: int, pause_log: Optional[Path]):
    """The per-epoch evaluation and clocks (see the module docstring) as a Lightning callback."""
    import torch
    from lightning.pytorch.callbacks import Callback
    from torchvision.datasets import ImageFolder

    from mvssl_plugin.data.inmemory.cache import decode_to_uint8, default_cache_dir
    from mvssl_plugin.data.inmemory.eval_loaders import MemoryEvalLoader, eval_recipe
    from mvssl_plugin.eval.knn import all_classes_knn
    from mvssl_plugin.eval.rank import rankme
    from mvssl_plugin.runs import read_csv, write_csv
    from mvssl_plugin.train.run_log import TrainClock

    name = point.name(seed)
    root = cifar_root()
    machine = cpu_description()

    def labelled(split: str) -> Tuple[torch.Tensor, List[int]]:
        samples = ImageFolder(str(root / split)).samples
        files, labels = [f for f, _ in samples], [y for _, y in samples]
        return decode_to_uint8(files, None, default_cache_dir(root / split)), labels

    class EpochEval(Callback):
        def __init__(self) -> None:
            self.pauses = EpochPauses(pause_log)

        def on_fit_start(self, trainer, pl_module) -> None:
            recipe, _ = eval_recipe("cifar10")
            bank, test = labelled("train"), labelled("test")
            self.loaders = [MemoryEvalLoader(x, y, recipe, augment=False, batch_size=512) for x, y in (bank, test)]
            self.clock = next(c for c in trainer.callbacks if isinstance(c, TrainClock))
            self.bf16 = "bf16" in str(trainer.precision)
            self.device_type = pl_module.device.type

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            self.pauses.begin(trainer.current_epoch, time.time())

        def state_dict(self) -> dict:
            return self.pauses.state(time.time())

        def load_state_dict(self, state_dict: dict) -> None:
            self.pauses.load(state_dict)

        @torch.no_grad()
        def embed(self, pl_module, loader) -> Dict[str, torch.Tensor]:
            feats, z, labels = [], [], []
            with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
                for x, y in loader:
                    out = pl_module(x.to(pl_module.device))
                    feats.append(out["feats"].float().cpu())
                    z.append(out["z"].float().cpu())
                    labels.append(y)
            return {"backbone": torch.cat(feats), "projector": torch.cat(z), "labels": torch.cat(labels)}

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            now = time.time()
            epoch = trainer.current_epoch + 1
            if trainer.global_step < epoch * trainer.num_training_batches:
                return  # a stop inside the epoch ends it early: no row, and the exit does not wait
            rows = [r for r in read_csv(CURVES) if not (r["run"] == name and int(r["epoch"]) >= epoch)]
            earlier = [r for r in rows if r["run"] == name]
            paused_before = sum(float(r["paused_seconds"]) for r in earlier)
            paused = self.pauses.end(now)
            was_training = pl_module.training
            pl_module.eval()
            began, began_wall = time.perf_counter(), time.time()
            bank, test = (self.embed(pl_module, loader) for loader in self.loaders)
            knn = all_classes_knn(20, 0.07, "cosine")
            knn(
                train_features=bank["backbone"],
                train_targets=bank["labels"],
                test_features=test["backbone"],
                test_targets=test["labels"],
            )
            acc1, _ = knn.compute()
            pl_module.train(was_training)
            views = trainer.global_step * int(pl_module.cfg.optimizer.batch_size) * point.m
            row = {
                "run": name,
                "method": point.method,
                "m": point.m,
                "d": point.d,
                "beta": point.beta,
                "fraction": point.fraction,
                "seed": seed,
                "epoch": epoch,
                "step": trainer.global_step,
                "views_seen": views,
                "train_seconds": round(self.clock.train_seconds - paused_before - paused, 1),
                "paused_seconds": round(paused, 1),
                "knn_backbone": round(float(acc1), 2),
                "rank_projector": round(rankme(test["projector"]), 1),
                "rank_backbone": round(rankme(test["backbone"]), 1),
                "eval_seconds": round(
                    time.perf_counter() - began - pause_overlap(pause_log, began_wall, time.time()), 1
                ),
                "precision": str(trainer.precision),
                "cpu": machine,
            }
            write_csv(CURVES, rows + [row])
            print(f"cpu_claims: {name} epoch {epoch}: kNN {row['knn_backbone']}%, {row}", flush=True)

    return EpochEval()


def run_child(point: Point, seed: int, pause_log: Optional[Path]) -> None:
    """Trains (or resumes) one run in this process, with the per-epoch evaluation."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import pretrain

    recipe, extra = overrides(point, seed)
    cfg = compose_recipe(recipe, "pretrain", extra)
    pretrain(cfg, extra_callbacks=[epoch_eval_callback(point, seed, pause_log)])


# ----------------------------------------------------------------------------- the harness (parent)


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_description() -> str:
    """The machine a row was measured on (the ``cpu`` column): the CPU model, or the GPU's at ``--scale gpu``."""
    from mvssl_plugin.config.hardware import cpu_bf16_native, usable_cores

    if SCALE.accelerator == "gpu":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU visible"

    native, _ = cpu_bf16_native()
    model = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return f"{model}, {usable_cores()} cores, bf16 {'native' if native else 'not native'}"


def finished(name: str) -> bool:
    from mvssl_plugin.runs import read_csv

    return any(r.get("run") == name for r in read_csv(RESULTS))


def record_result(point: Point, seed: int) -> dict:
    """Appends the finished run's row to results.csv from its last curves row."""
    from mvssl_plugin.runs import read_csv, write_csv

    name = point.name(seed)
    curve = [r for r in read_csv(CURVES) if r["run"] == name]
    last = max(curve, key=lambda r: int(r["epoch"]))
    if int(last["epoch"]) != point.epochs:
        raise SystemExit(f"{name}: finished, but curves.csv ends at epoch {last['epoch']} of {point.epochs}")
    row = {"run": name, **{k: last.get(k, "") for k in RESULT_COLUMNS}}
    in_order = sorted(curve, key=lambda r: int(r["epoch"]))
    row.update(epochs=point.epochs, cpu=machines(in_order), commit=commit())
    row["precision"] = "+".join(dict.fromkeys(r["precision"] for r in in_order if r.get("precision")))
    write_csv(RESULTS, read_csv(RESULTS) + [row])
    return row


def epochs_done(name: str) -> int:
    from mvssl_plugin.runs import read_csv

    return max((int(r["epoch"]) for r in read_csv(CURVES) if r["run"] == name), default=0)


def machines(curve: Sequence[dict]) -> str:
    """The ``cpu`` column of a run whose epochs (in order) ran on more than one machine (carried):
    each machine with its epochs; rows without a machine ran here."""
    spans: List[list] = []
    for r in curve:
        cpu, epoch = r.get("cpu") or cpu_description(), int(r["epoch"])
        if spans and spans[-1][0] == cpu:
            spans[-1][2] = epoch
        else:
            spans.append([cpu, epoch, epoch])
    if len(spans) == 1:
        return spans[0][0]
    return "; ".join(f"{cpu} (epochs {a}-{b})" for cpu, a, b in spans)


class ActiveClock:
    """Seconds this process ran, not counting the time it was stopped (SIGSTOP to its group).

    Read often (every ``poll`` seconds); a gap between two reads longer than ``2 * poll`` is
    taken for a pause and counts as ``poll``."""

    def __init__(self, poll: float = 5.0, now=time.monotonic) -> None:
        self.poll, self.now = poll, now
        self.last, self.active = now(), 0.0

    def read(self) -> float:
        t = self.now()
        gap, self.last = t - self.last, t
        self.active += gap if gap <= 2 * self.poll else self.poll
        return self.active


#: the wall clock ``--until`` is read against (a test moves it)
wall_clock = time.time


def parse_until(text: str, now: float) -> float:
    """``HH:MM`` -> the next such time on this machine's clock, as seconds since the epoch."""
    try:
        hour, minute = (int(part) for part in text.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError:
        raise ValueError(f"--until takes HH:MM on this machine's 24-hour clock (e.g. 05:45), got {text!r}") from None
    today = time.localtime(now)
    at = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, hour, minute, 0, 0, 0, -1))
    return at if at > now else at + 24 * 3600


def run_spans(curves: Sequence[dict], machine: Optional[str] = None) -> List[Tuple[dict, dict]]:
    """Per run, (the row before its span, its span's last row): its cumulative clocks' start
    and end. The span is the whole run, or with ``machine`` the run's last epochs measured on
    that machine (its ``cpu`` column); runs with no epoch there are left out."""
    by_run: Dict[str, List[dict]] = {}
    for r in curves:
        by_run.setdefault(r["run"], []).append(r)
    zero = {"train_seconds": "0", "views_seen": "0"}
    spans = []
    for rows in by_run.values():
        rows.sort(key=lambda r: int(r["epoch"]))
        if machine is not None:
            here = [i for i, r in enumerate(rows) if r.get("cpu") == machine]
            if not here:
                continue
            end = here[-1]
            start = end
            while start > 0 and rows[start - 1].get("cpu") == machine:
                start -= 1
            spans.append((rows[start - 1] if start else zero, rows[end]))
        else:
            spans.append((zero, rows[-1]))
    return spans


def estimate_minutes(
    point: Point, curves: Sequence[dict], step_times: Sequence[dict] = (), machine: Optional[str] = None
) -> Optional[float]:
    """Minutes a run of ``point`` takes, training and per-epoch evaluation: training seconds
    per view and evaluation seconds per epoch (the medians over runs) from the runs in
    ``curves`` with the same width, method and d (any run of that width when none has them;
    of any width when none has that width). With ``machine`` (``cpu_description()``), only the
    epochs measured on that machine count, where it has any: an AVX2-only CPU in fp32 takes
    about twice a bf16 CPU's time, and an estimate from the faster one would start runs the
    slower cannot finish. A run of another setting is scaled by the two steps' seconds per
    view in ``step_times`` (this machine's, where it measured them) where both are measured,
    else by the width squared (the convolutions' work); None when ``curves`` holds no run."""
    spans = run_spans(curves, machine) or run_spans(curves)
    width = [s for s in spans if width_of(s[1]["run"]) == point.width]
    same = [s for s in width if s[1]["method"] == point.method and int(s[1]["d"]) == point.d]
    spans = same or width or spans
    if not spans:
        return None
    step_times = step_times_by_machine(step_times).get(machine) or step_times  # this machine's ratios
    mine = seconds_per_view(step_times, point.method, point.m, point.d, point.width)

    def factor(r: dict) -> float:
        theirs = None
        if mine is not None:
            theirs = seconds_per_view(step_times, r["method"], int(r["m"]), int(r["d"]), width_of(r["run"]))
        if mine is not None and theirs is not None:
            return mine / theirs
        return (point.width / width_of(r["run"])) ** 2

    def eval_factor(r: dict) -> float:  # the evaluation embeds the same images whatever m and d
        return factor(r) if width_of(r["run"]) != point.width else 1.0

    def seconds_per_view_of(before: dict, last: dict) -> float:
        seconds = float(last["train_seconds"]) - float(before["train_seconds"])
        return seconds / (float(last["views_seen"]) - float(before["views_seen"]))

    middle = len(spans) // 2
    per_view = sorted(factor(last) * seconds_per_view_of(before, last) for before, last in spans)[middle]
    per_epoch_eval = sorted(eval_factor(last) * float(last["eval_seconds"] or 0) for _, last in spans)[middle]
    views = point.epochs * point.m * point.fraction * 50_000
    return (views * per_view + point.epochs * per_epoch_eval) / 60


@dataclass(frozen=True)
class HeadStart:
    """How far a run of the grid is on this machine before its next launch."""

    here: bool  # a checkpoint in runs/ its launch resumes (resumable_here)
    carried: bool  # its checkpoint is only in carry/ (another machine's, committed)
    shorter: Optional[Point]  # else a finished shorter run of its setting it goes on from
    done: int  # epochs already trained


def resumable_here(name: str) -> bool:
    """Whether ``runs/<name>/`` holds a checkpoint its launch resumes: a complete one beside
    its args.json, as auto-resume needs. A checkpoint alone does not count: ``git clean``
    keeps the ignored ``.ckpt`` and removes the args.json beside it, and auto-resume would
    then start the run over, unseen, instead of taking its carried checkpoint."""
    from mvssl_plugin.runs import ARGS, is_complete_checkpoint

    return any(c.with_name(ARGS).is_file() and is_complete_checkpoint(c) for c in (OUT / "runs" / name).rglob("*.ckpt"))


def head_start(point: Point, seed: int) -> HeadStart:
    name = point.name(seed)
    here = resumable_here(name)
    carried = not here and any((OUT / "carry" / name).rglob("*.ckpt"))
    shorter = None if here or carried else prefix_run(point, seed)
    done = shorter.epochs if shorter is not None else epochs_done(name) if here or carried else 0
    return HeadStart(here, carried, shorter, done)


def minutes_left(
    point: Point, start: HeadStart, curves: Sequence[dict], step_times: Sequence[dict], machine: str
) -> Optional[float]:
    """``machine``'s estimate for the epochs ``point`` has left after ``start``."""
    need = estimate_minutes(point, curves, step_times, machine)
    return None if need is None else need * (point.epochs - start.done) / point.epochs


def run_grid(
    budget_min: Optional[float],
    seeds: Sequence[int],
    pause_log: Optional[Path],
    only: Optional[str],
    start_anyway: bool = False,
    until: Optional[float] = None,
    plan: Optional[Sequence[Tuple[Point, int]]] = None,
    script: Optional[Path] = None,
) -> None:
    """Runs ``plan`` ((point, seed) in order; default the grid's schedule), each run a child
    ``script --run <name>`` (default this file), within the budget (see the module docstring)."""
    from mvssl_plugin.runs import read_csv

    # a harness started in the background by a non-interactive shell inherits SIGINT ignored,
    # and Python then raises no KeyboardInterrupt: the child would stop alone and not be carried
    signal.signal(signal.SIGINT, signal.default_int_handler)
    clock = ActiveClock()
    budget = float("inf") if budget_min is None else budget_min * 60

    def left() -> float:
        """Seconds left: the unpaused budget's, or to ``until`` if that is sooner."""
        active = budget - clock.read()
        return active if until is None else min(active, until - wall_clock())

    machine = cpu_description()
    (OUT / "logs").mkdir(parents=True, exist_ok=True)
    for point, seed in schedule(seeds) if plan is None else plan:
        name = point.name(seed)
        if finished(name) or (only and only not in name):
            continue
        seconds = left()
        if seconds < 60:
            print(f"cpu_claims: budget spent; next: {name}")
            return
        start = head_start(point, seed)
        started_here, carried, shorter = start.here, start.carried, start.shorter
        need = minutes_left(point, start, read_csv(CURVES), read_csv(STEP_TIMES), machine)
        if not (start_anyway or started_here or carried) and need is not None and need * 60 > seconds:
            size = checkpoint_mib(point)
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
            extend_from(shorter, point, seed)
            print(f"cpu_claims: {name} goes on from {shorter.name(seed)} (epoch {shorter.epochs})", flush=True)
        elif carried and carry_in(name):
            print(
                f"cpu_claims: {name} goes on from its carried checkpoint ({start.done} epochs in curves.csv)",
                flush=True,
            )
        command = [sys.executable, str(script or __file__), "--run", name, "--scale", SCALE.name, "--results", str(OUT)]
        if pause_log is not None:
            command += ["--pause-log", str(pause_log)]
        print(f"cpu_claims: {time.strftime('%H:%M:%S')} {name}", flush=True)
        with open(OUT / "logs" / f"{name}.log", "a") as log:
            log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} commit {commit()}: {' '.join(command)}\n")
            log.flush()
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
            try:
                while child.poll() is None:
                    if left() < 0:
                        print(f"cpu_claims: budget spent: stopping {name} (it resumes next call)", flush=True)
                        child.send_signal(signal.SIGTERM)
                        child.wait()
                        carry_out(name)
                        return
                    time.sleep(5)
            except KeyboardInterrupt:  # SIGINT to the group (the GPU kit's budget): the child checkpoints
                print(f"cpu_claims: interrupted: {name} stops at a checkpoint (it resumes next call)", flush=True)
                child.wait()
                carry_out(name)
                raise SystemExit(130) from None
        if child.returncode != 0:
            raise SystemExit(f"cpu_claims: {name} exited {child.returncode}: see {OUT / 'logs' / (name + '.log')}")
        row = record_result(point, seed)
        shutil.rmtree(OUT / "carry" / name, ignore_errors=True)  # done: the commit drops its carry
        print(f"cpu_claims: {name} done: kNN {row['knn_backbone']}% after {row['epochs']} epochs", flush=True)
    print("cpu_claims: every run is done" if only is None else f"cpu_claims: every run with {only!r} is done")


def report(out: Path, readme: Optional[Path] = None) -> Path:
    """summary.md, the plots and the README's claims table from the CSVs (cpu_claims_report)."""
    from cpu_claims_report import write_report

    from mvssl_plugin.runs import read_csv

    step_times = read_csv(STEP_TIMES)
    pairs, rates = [], {}
    for point, seed in schedule((1, 2)):
        if "width" not in point.parts:
            continue
        narrow = replace(point, width=SCALE.width, epochs=BASE_EPOCHS)
        pairs.append((point.name(seed), narrow.name(seed)))
        for p in (point, narrow):
            rate = seconds_per_view(step_times, p.method, p.m, p.d, p.width)
            if rate is not None:
                rates[p.name(seed)] = rate
    results, curves = read_csv(RESULTS), read_csv(CURVES)
    grid_steps = [r for r in step_times if int(r["width"]) == SCALE.width]  # the claims' rows: the grid's width
    return write_report(out, results, curves, grid_steps, BASE_EPOCHS, pairs, rates, readme, SCALE.setting)


def list_grid(seeds: Sequence[int]) -> None:
    from mvssl_plugin.runs import read_csv

    curves, step_times, machine = read_csv(CURVES), read_csv(STEP_TIMES), cpu_description()
    print("| run | parts | status | last kNN | min left here |")
    print("|---|---|---|---|---|")
    total = 0.0
    for point, seed in schedule(seeds):
        name = point.name(seed)
        rows = [r for r in curves if r["run"] == name]
        last = max(rows, key=lambda r: int(r["epoch"])) if rows else None
        done = finished(name)
        status = "done" if done else (f"epoch {last['epoch']}/{point.epochs}" if last else "to do")
        left = None if done else minutes_left(point, head_start(point, seed), curves, step_times, machine)
        total += left or 0.0
        minutes = "-" if left is None else f"{left:.0f}"
        print(f"| {name} | {', '.join(point.parts)} | {status} | {last['knn_backbone'] if last else '-'} | {minutes} |")
    print(f"\nabout {total / 60:.1f} h left here ({machine}), by this machine's epochs where it has any")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-min", type=float, help="run the next runs for this many minutes")
    parser.add_argument("--until", help="HH:MM: stop by then on this machine's clock, pauses or not")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", help="only runs whose name contains this")
    parser.add_argument(
        "--start-anyway", action="store_true", help="start a run the budget may not finish, even one too large to carry"
    )
    parser.add_argument("--list", action="store_true", help="the grid and its status")
    parser.add_argument("--report", action="store_true", help="summary.md and plots from the CSVs")
    parser.add_argument(
        "--step-times", action="store_true", help="every distinct step of the grid, side by side (machine alone)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="--step-times: rounds (settings alternate)")
    parser.add_argument("--steps", type=int, default=12, help="--step-times: timed steps per setting and round")
    parser.add_argument("--pause-log", type=Path, help="pause log (see the module docstring)")
    parser.add_argument("--pgid-file", type=Path, help="write this process group's id here (for pausing)")
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="cpu", help="cpu, or the same grid at ResNet-18 on a GPU"
    )
    parser.add_argument("--results", type=Path, help="results folder (default: benchmarks/results/<scale>_claims)")
    parser.add_argument("--data", type=Path, help="CIFAR-10 ImageFolder root (train/, test/); else CIFAR10_DIR")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # the child: one run
    args = parser.parse_args(argv)
    until = None
    if args.until is not None:
        try:
            until = parse_until(args.until, wall_clock())
        except ValueError as error:
            parser.error(str(error))
    use_scale(args.scale, args.results)
    if args.data is not None:
        os.environ["CIFAR10_DIR"] = str(args.data.resolve())  # the children inherit it
        cifar_root()
    if args.run:
        run_child(*find_point(args.run), args.pause_log)
    elif args.list:
        list_grid(args.seeds)
    elif args.step_times:
        measure_step_times(args.rounds, args.steps)
    elif args.report:
        report(OUT, REPO / "README.md" if SCALE.name == "cpu" and args.results is None else None)
    elif args.budget_min is not None or until is not None:
        if args.pgid_file is not None:
            args.pgid_file.write_text(str(os.getpgrp()))
        try:
            run_grid(args.budget_min, args.seeds, args.pause_log, args.only, args.start_anyway, until)
        finally:
            if args.pgid_file is not None:
                args.pgid_file.unlink(missing_ok=True)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
