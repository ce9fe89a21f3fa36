"""Time to accuracy on a CPU: the speedrun recipe, each efficiency lever beside it, and
solo-learn's own Barlow Twins recipe, on all of CIFAR-10.

    python benchmarks/speedrun.py --list                  # the plan and what is done
    python benchmarks/speedrun.py --budget-min 120        # run the next runs for 2 hours
    python benchmarks/speedrun.py --step-times            # every setting's step, beside the baseline's
    python benchmarks/speedrun.py --report                # records.csv, levers.csv, peer.csv, summary.md, plot

The protocol and the machinery are the claims grid's (``cpu_claims.py``): every run is a child
process training through ``main_pretrain.py``'s flow on all 50,000 training images, with the
same per-epoch callback outside the training clock (backbone kNN, k = 20, cosine, all 10,000
test images, all 50,000 training images as the bank), the same ``curves.csv`` / ``results.csv``
columns, the same budget, pauses, resume and carry; only the runs differ. A setting is the
speedrun recipe (``speedrun_cpu.yaml``) or another recipe with Hydra overrides; every
learning-rate schedule is fitted to its run's epochs (warm-up over the first 10%, cosine to
zero at the last step), so runs with a schedule never go on from a shorter one.

Levers are screened at ``SCREEN_EPOCHS`` epochs, one seed, then a second; the record and the
peer (solo-learn's ``barlow_twins`` recipe as it ships, ``solo_barlow_cifar_cpu.yaml``) run at
their full budgets, two seeds. Time is steps x the setting's step time, measured side by side
with the claims baseline's (``--step-times``; ``speedrun_report`` says how other machines are
timed). Results: ``benchmarks/results/speedrun/``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import speedrun_report
from claims import clocks
from claims.cli import add_run_arguments, no_action, parse_run_arguments, run_budget
from claims.grid import (
    BASE_EPOCHS,
    REPO,
    RESULTS_ROOT,
    SCALES,
    Point,
    Scale,
    override_key,
    scale_named,
    step_overrides,
)
from claims.runner import epochs_done, finished, head_start, run_child
from doc_blocks import replace_between
from speedrun_report import epochs_of, setting_of
from step_clock import run_setting

from mvssl_plugin.config.hardware import cpu_precision
from mvssl_plugin.data.resolution import ResolutionRamp
from mvssl_plugin.files import read_csv, write_csv

OUT = RESULTS_ROOT / "speedrun"
#: the speedrun's step times (per setting; the claims grid's step_times.csv is per grid step)
STEPS = "steps.csv"
CLAIMS_STEP_TIMES = SCALES["cpu"].step_times
RECIPE = "speedrun_cpu.yaml"
#: the lr the recipe's settings were screened at (``speedrun_cpu.yaml``'s until it took ``RECIPE_SETTING``'s):
#: each setting on the recipe that sets no lr of its own pins it, so the yaml's lr changes no setting's training
SCREEN_LR = 5e-4
#: the levers' reference: the recipe at ``SCREEN_LR``, what every lever changes one thing of
REFERENCE = "lr5e-4"
#: the setting ``speedrun_cpu.yaml`` is (its lr: a test composes both): the record the README shows first
RECIPE_SETTING = "lr2e-3"
#: the recipe's epochs: 30 minutes of training at the bf16 EPYC's step (0.2469 s x 390 steps)
RECORD_EPOCHS = 18
#: the 2-hour target's epochs: 74 x 390 steps at the bf16 EPYC's 0.2469 s are 119 minutes
LONG_EPOCHS = 74
#: the peer's epochs (solo-learn's recipe is written for 1000; the claims baseline's 20)
PEER_EPOCHS = 20
#: each lever's screening budget (a fitted schedule of this many epochs)
SCREEN_EPOCHS = 3
#: the recipe's view side (CIFAR-10's 32 px crops): a resolution ramp's full size
FULL_SIDE = 32
#: the speedrun's batch on a CPU, and on a GPU (``--scale gpu``)
CPU_BATCH, GPU_BATCH = 128, 512
#: the claims baseline (2 views, d = 2048, fixed beta): every step is timed beside it
BASELINE = Point("mabt", 2, 2048, "fixed", 1.0, BASE_EPOCHS, ("views",), True)


@dataclass(frozen=True)
class Setting:
    """A speedrun setting: a recipe and its Hydra overrides (the schedule's own are added per run)."""

    tag: str
    what: str
    recipe: str = RECIPE
    overrides: Tuple[str, ...] = ()
    method: str = "mabt"
    m: int = 2  # all views, large and small (views processed = steps x batch x m)
    d: int = 256
    warmup: Optional[float] = 0.1  # warmup_cosine's warm-up, a fraction of the run's epochs; None: no schedule
    grid_step: bool = False  # the step is the claims grid's (method, m, d, width 16, batch 128, Adam)
    width_factor: float = 1.0  # the backbone's width over the scale's (16 on the CPU, 64 on a GPU)
    batch_factor: float = 1.0  # the batch over the scale's (128 on the CPU, 512 on a GPU)
    resolution_start: Optional[int] = None  # memory.resolution.start: views grow from this side to 32 px
    anchor: str = REFERENCE  # where its step is only a ratio: the setting it is timed against (step_times_on)
    screen_epochs: int = SCREEN_EPOCHS  # its screen's epochs (a cheaper epoch may screen more of them)
    tail: Optional[float] = None  # scheduler.tail_epochs, a fraction of the run's epochs: a constant lr's decay
    twin: Optional[str] = None  # the constant setting a tail run is until its tail (it goes on from its checkpoint)

    def tail_epochs(self, epochs: int) -> int:
        """The run's last epochs in which its lr falls linearly to zero (0: none)."""
        return 0 if self.tail is None else max(1, round(epochs * self.tail))

    def ramp(self) -> Optional[ResolutionRamp]:
        """The resolution ramp of ``memory.resolution`` (its default ramp), or None."""
        return None if self.resolution_start is None else ResolutionRamp(self.resolution_start, FULL_SIDE)

    def sides(self, epochs: int) -> List[int]:
        """The views' side in each of ``epochs`` epochs."""
        ramp = self.ramp()
        return [FULL_SIDE] * epochs if ramp is None else ramp.sides(epochs)

    def screen(self, scale: Scale = SCALES["cpu"]) -> Point:
        """Its screen run."""
        return self.point(self.screen_epochs, scale)

    def point(self, epochs: int, scale: Scale = SCALES["cpu"]) -> Point:
        """The run at ``epochs`` on ``scale``: on a GPU, the ResNet-18 (width 64) at batch 512
        (solo-learn scales the lr with it), the rest as on the CPU. Its name is the same on
        every scale (``<tag>-e<epochs>-s<seed>``)."""
        extra = list(self.overrides)
        if self.recipe == RECIPE and not any(override_key(o) == "optimizer.lr" for o in extra):
            extra.insert(0, f"optimizer.lr={SCREEN_LR:g}")
        if self.warmup is not None:
            extra.append(f"++scheduler.warmup_epochs={epochs * self.warmup:g}")
        if self.resolution_start is not None:
            extra.append(f"+memory.resolution.start={self.resolution_start}")
        if self.tail is not None:
            extra.append(f"++scheduler.tail_epochs={self.tail_epochs(epochs)}")
        if scale.name == "gpu" or self.batch_factor != 1:
            batch = GPU_BATCH if scale.name == "gpu" else CPU_BATCH
            extra.append(f"optimizer.batch_size={round(batch * self.batch_factor)}")
        width = round(scale.width * self.width_factor)
        return Point(
            self.method, self.m, self.d, "rule", 1.0, epochs, ("speedrun",), False,
            width=width, scale_width=scale.width, tag=self.tag, recipe=self.recipe, extra=tuple(extra),
            # a schedule, a ramp and a tail are fitted to the epochs: a shorter run is no prefix
            extendable=self.warmup is None and self.resolution_start is None and self.tail is None,
        )  # fmt: skip


#: warm-up over the first 10% of a run's epochs (``Setting.warmup``), then a cosine to zero at its last step
SCHEDULE = (  # "++": the recipe's scheduler block has its name only
    "scheduler.name=warmup_cosine",
    "++scheduler.warmup_start_lr=0.0",
    "++scheduler.min_lr=0.0",
    "++scheduler.interval=step",
)
LARS = (
    "optimizer.name=lars",
    "optimizer.lr=0.3",
    "optimizer.weight_decay=1e-4",
    "+optimizer.kwargs.clip_lr=true",
    "+optimizer.kwargs.eta=0.02",
    "+optimizer.kwargs.exclude_bias_n_norm=true",
    *SCHEDULE,
)
#: the recipe's colour jitter (augmentations/cifar.yaml: 0.4, 0.4, 0.2, 0.1) at half strength: a 3-epoch
#: budget may not need the invariance the full strength teaches
JITTER_HALF = {"brightness": 0.2, "contrast": 0.2, "saturation": 0.1, "hue": 0.05}
SETTINGS = {
    s.tag: s
    for s in (
        Setting(REFERENCE, "the recipe at the levers' lr: Adam, lr 5e-4 (the authors'), constant",
                overrides=(f"optimizer.lr={SCREEN_LR:g}",), warmup=None, grid_step=True),
        Setting("cos-lr5e-4", "warm-up + cosine, the levers' lr", overrides=(*SCHEDULE, "optimizer.lr=5e-4"),
                grid_step=True),
        Setting("cos-lr1e-3", "warm-up + cosine, twice the levers' lr", overrides=(*SCHEDULE, "optimizer.lr=1e-3"),
                grid_step=True),
        Setting("cos-lr2e-3", "warm-up + cosine, 4x the levers' lr", overrides=(*SCHEDULE, "optimizer.lr=2e-3"),
                grid_step=True),
        Setting("cos-lr4e-3", "warm-up + cosine, 8x the levers' lr", overrides=(*SCHEDULE, "optimizer.lr=4e-3"),
                grid_step=True),
        Setting("lr1e-3", "the recipe at twice the levers' lr (1e-3, constant)", overrides=("optimizer.lr=1e-3",),
                warmup=None, grid_step=True),
        Setting("lr2e-3", "speedrun_cpu.yaml: 4x the levers' lr (2e-3, constant)", overrides=("optimizer.lr=2e-3",),
                warmup=None, grid_step=True),
        Setting("lr4e-3", "the recipe at 8x the levers' lr (4e-3, constant)", overrides=("optimizer.lr=4e-3",),
                warmup=None, grid_step=True),
        Setting("lr2e-3-tail", "speedrun_cpu.yaml's constant lr 2e-3, then linear to zero over the last 20% "
                "of the epochs (scheduler.tail_epochs)", overrides=("optimizer.lr=2e-3",), warmup=None,
                grid_step=True, tail=0.2, twin="lr2e-3"),
        Setting("lars", "LARS with solo-learn's Barlow Twins settings (lr 0.3, wd 1e-4, eta 0.02), warm-up + cosine",
                overrides=LARS),
        Setting("mixres", "2 views at 32 px + 2 at 16 px", m=4, warmup=None,
                overrides=("augmentations=cifar_multicrop", "data.num_views=4", "+data.num_small_views=2")),
        # the claims grid's m = 4, m = 8 and d = 64 runs are these trainings (``CLAIMS_IMPORTS``): imported,
        # not trained again
        Setting("m4", "4 views at 32 px", m=4, overrides=("data.num_views=4",), warmup=None, grid_step=True),
        Setting("m8", "8 views at 32 px", m=8, overrides=("data.num_views=8",), warmup=None, grid_step=True),
        Setting("d64", "projector d = 64 (beta by the rule)", overrides=("method_kwargs.proj_output_dim=64",),
                d=64, warmup=None, grid_step=True),
        Setting("d128", "projector d = 128 (beta by the rule)", overrides=("method_kwargs.proj_output_dim=128",),
                d=128, warmup=None),
        Setting("w24", "backbone width 24 (1.5x)", width_factor=1.5, warmup=None),
        Setting("b256", "twice the batch (256 on the CPU; solo-learn scales the lr with it), half the steps",
                warmup=None, batch_factor=2.0),
        # 4 epochs at 16, 24, 32, 32 px cost about the recipe's 3 at 32 px: a screen of equal seconds
        Setting("ramp", "views from 16 px growing to 32 px over the first 75% of the epochs (memory.resolution)",
                warmup=None, resolution_start=16, screen_epochs=4),
        Setting("ramp-lr1e-3", "the resolution ramp at lr 1e-3 (constant): the two screens that beat the recipe",
                overrides=("optimizer.lr=1e-3",), warmup=None, resolution_start=16, screen_epochs=4),
        Setting("crop0.2", "random-resized crops of at least 20% of the image (the recipe: 8%)", warmup=None,
                overrides=("augmentations.0.rrc.crop_min_scale=0.2",), grid_step=True),
        Setting("jitter0.5",
                f"colour jitter at half strength ({', '.join(f'{k} {v}' for k, v in JITTER_HALF.items())})",
                warmup=None, grid_step=True,
                overrides=tuple(f"augmentations.0.color_jitter.{k}={v}" for k, v in JITTER_HALF.items())),
        Setting("beta2x", "the beta rule's constant doubled (c = 6.6: beta = 6.6 / d)", warmup=None,
                overrides=("++method_kwargs.beta_c=6.6",), grid_step=True),
        # the same training, compiled: a step time only (its kNN is the recipe's), not screened
        Setting("compile", "torch.compile of the backbone's and projector's forward", warmup=None,
                overrides=("performance.compile=true",)),
        Setting("peer", "solo-learn's barlow_twins CIFAR recipe as it ships", "solo_barlow_cifar_cpu.yaml",
                overrides=("method_kwargs.lamb=0.0051",), method="barlow_twins", d=2048,
                warmup=0.01,  # solo-learn's 10 warm-up epochs of 1000
                anchor="baseline"),  # its 2048-2048 projector: a step of the baseline's kind
    )
}  # fmt: skip
#: each lever: the setting that changes one thing, against the one it changes it in
LEVERS = (
    speedrun_report.Lever("schedule", "cos-lr5e-4", REFERENCE, "warm-up + cosine to zero vs constant, same peak lr"),
    speedrun_report.Lever("peak lr", "cos-lr1e-3", "cos-lr5e-4", "lr 1e-3 vs 5e-4, both scheduled"),
    speedrun_report.Lever("peak lr", "cos-lr2e-3", "cos-lr1e-3", "lr 2e-3 vs 1e-3, both scheduled"),
    speedrun_report.Lever("peak lr", "cos-lr4e-3", "cos-lr2e-3", "lr 4e-3 vs 2e-3, both scheduled"),
    speedrun_report.Lever("constant lr", "lr1e-3", REFERENCE, "lr 1e-3 vs 5e-4, both constant"),
    speedrun_report.Lever("constant lr", "lr2e-3", "lr1e-3", "lr 2e-3 vs 1e-3, both constant"),
    speedrun_report.Lever("constant lr", "lr4e-3", "lr2e-3", "lr 4e-3 vs 2e-3, both constant"),
    speedrun_report.Lever("optimizer", "lars", "cos-lr1e-3", "LARS (solo-learn's settings) vs Adam, both scheduled"),
    speedrun_report.Lever("views", "m4", REFERENCE, "4 views vs 2, all at 32 px"),
    speedrun_report.Lever("views", "m8", REFERENCE, "8 views vs 2, all at 32 px"),
    speedrun_report.Lever("resolution", "mixres", REFERENCE, "+2 views at 16 px"),
    speedrun_report.Lever("resolution", "mixres", "m4", "2 of the 4 views at 16 px vs all 4 at 32 px"),
    speedrun_report.Lever("resolution", "ramp", REFERENCE, "16 -> 32 px over the run vs 32 px throughout"),
    speedrun_report.Lever("constant lr", "ramp-lr1e-3", "ramp", "lr 1e-3 vs 5e-4, both with the resolution ramp"),
    speedrun_report.Lever("together", "ramp-lr1e-3", REFERENCE, "the ramp and lr 1e-3 together vs neither"),
    speedrun_report.Lever("projector", "d64", REFERENCE, "d = 64 vs 256"),
    speedrun_report.Lever("projector", "d128", REFERENCE, "d = 128 vs 256"),
    speedrun_report.Lever("width", "w24", REFERENCE, "width 24 vs 16"),
    speedrun_report.Lever("batch", "b256", REFERENCE, "batch 256 vs 128, lr scaled with it"),
    speedrun_report.Lever("augmentation", "crop0.2", REFERENCE, "crops of at least 20% vs 8% of the image"),
    speedrun_report.Lever("augmentation", "jitter0.5", REFERENCE, "colour jitter at half strength vs full"),
    speedrun_report.Lever("beta", "beta2x", REFERENCE, "beta's constant 6.6 vs 3.3"),
    speedrun_report.Lever("the peer", "peer", RECIPE_SETTING, "solo-learn's barlow_twins recipe vs ours, same epochs"),
)
#: the order runs are started in: the levers' first seeds (short; the peer's screen too, which
#: fits a session where its full run does not and is too large to carry), the record and the
#: peer, then the second seeds
SCREEN = (REFERENCE, "m4", "m8", "d64", "cos-lr5e-4", "cos-lr1e-3", "lars", "peer", "cos-lr2e-3", "lr1e-3", "mixres",
          "cos-lr4e-3", "d128", "w24", "b256", "crop0.2", "beta2x", "ramp", "ramp-lr1e-3", "lr2e-3",
          "lr4e-3", "jitter0.5")  # fmt: skip


#: settings whose screen beat the reference's at equal seconds, on two seeds: each runs the record's epochs
#: too (a constant lr: it goes on from its screen's checkpoint where that is on the machine). lr 2e-3
#: beat lr 1e-3 on both seeds (47.41 / 47.61 against 45.58 / 46.13), so lr 1e-3 runs no record; its
#: 18-epoch runs beat the reference's on both seeds (61.55 / 61.52 against 55.41 / 54.15): the yaml took it
RECORD_CANDIDATES = ("lr2e-3",)
#: the 2-hour target's runs with an lr tail (``Setting.tail``), beside their constant twins' (a constant lr's
#: kNN flattens late: docs/speedrun.md); each goes on from its twin's checkpoint at the tail's start
#: (``--from-twin``), or trains from scratch
TAIL_CANDIDATES = ("lr2e-3-tail",)
#: settings whose first screen beat the reference's: their second seed runs before the records, so a
#: gain within the seeds' spread (the reference's 3-epoch screens differ by 0.16 points) is seen as such
CONFIRM = ("lr1e-3", "ramp", "lr2e-3")


#: the claims grid's run of the reference's training (2 views, d = 256, the rule, Adam at a constant 5e-4, all
#: of CIFAR-10): without a schedule its first epochs are the reference's screen and record, not trained again
CLAIMS_CONST = Point("mabt", 2, 256, "rule", 1.0, BASE_EPOCHS, ("projector", "data"), True)
#: the claims grid's runs that are a speedrun setting's training (the same composed config but its
#: name and folder): setting -> (the grid's point, the setting's epochs taken from it)
CLAIMS_IMPORTS = {
    REFERENCE: (CLAIMS_CONST, (SCREEN_EPOCHS, RECORD_EPOCHS)),
    "m4": (Point("mabt", 4, 256, "rule", 1.0, BASE_EPOCHS, ("views",), True), (SCREEN_EPOCHS,)),
    "m8": (Point("mabt", 8, 256, "rule", 1.0, 10, ("views",), True), (SCREEN_EPOCHS,)),
    "d64": (Point("mabt", 2, 64, "rule", 1.0, BASE_EPOCHS, ("projector",), True), (SCREEN_EPOCHS,)),
}


def import_claims(out: Path, claims: Path) -> List[str]:
    """Copies the claims grid's runs of ``CLAIMS_IMPORTS`` (both seeds) into ``out``'s CSVs as
    the setting's runs of those epochs (``lr5e-4-e{SCREEN_EPOCHS}-s*``, ``lr5e-4-e{RECORD_EPOCHS}-s*``,
    ``m4-e{SCREEN_EPOCHS}-s*``, likewise m8 and d64: their first epochs): without a schedule a shorter run is the
    longer one's prefix (``claims.runner.prefix_run``), so these are the runs the speedrun would
    train. Each row names its source; a run already in ``out`` is left alone. Returns the runs
    added."""
    curves, results = read_csv(out / "curves.csv"), read_csv(out / "results.csv")
    claims_curves, claims_results = read_csv(claims / "curves.csv"), read_csv(claims / "results.csv")
    added = []
    for tag, (point, all_epochs) in CLAIMS_IMPORTS.items():
        for seed in (1, 2):
            source = point.name(seed)
            rows = speedrun_report.curve_of(claims_curves, source)
            final = next((r for r in claims_results if r["run"] == source), None)
            for epochs in all_epochs:
                name = SETTINGS[tag].point(epochs).name(seed)
                if final is None or len(rows) < epochs or any(r["run"] == name for r in results):
                    continue
                copied = [{**r, "run": name, "source": source} for r in rows[:epochs]]
                curves = [r for r in curves if r["run"] != name] + copied
                last = {k: copied[-1][k] for k in final if k in copied[-1]}
                where = f"claims grid's {source}, commit {final.get('commit', '?')}"
                results.append({**final, **last, "run": name, "epochs": epochs, "source": where})
                added.append(name)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "curves.csv", curves)
    write_csv(out / "results.csv", results)
    return added


def plan(scale: Scale) -> List[Tuple[Point, int]]:
    """(point, seed) in the order runs are started (``SCREEN``'s docstring); the second seeds
    of ``CONFIRM``'s screens, then each record candidate at the record's epochs beside the
    reference's, the other second seeds, and last each candidate at the 2-hour target's
    epochs (a constant lr: it goes on from its 18-epoch run; about 8 more hours on a 2-core AVX2 CPU)."""
    screens = [SETTINGS[t].screen(scale) for t in SCREEN]
    confirm = [(SETTINGS[t].screen(scale), 2) for t in CONFIRM]
    records = [SETTINGS[t].point(RECORD_EPOCHS, scale) for t in (REFERENCE, *RECORD_CANDIDATES)]
    peer = SETTINGS["peer"].point(PEER_EPOCHS, scale)
    full = [(p, seed) for seed in (1, 2) for p in (*records, peer)]
    later = [(p, 2) for p in screens if (p, 2) not in confirm]
    long = [(SETTINGS[t].point(LONG_EPOCHS, scale), seed) for seed in (1, 2) for t in RECORD_CANDIDATES]
    long += [(SETTINGS[t].point(LONG_EPOCHS, scale), seed) for seed in (2, 1) for t in TAIL_CANDIDATES]
    return [(p, 1) for p in screens] + confirm + full + later + long


def find(scale: Scale, name: str) -> Tuple[Point, int]:
    for point, seed in plan(scale):
        if point.name(seed) == name:
            return point, seed
    raise SystemExit(f"{name}: not a run of the speedrun (see --list)")


# ----------------------------------------------------------------------------- step times


def timed_points(scale: Scale, only: Optional[Sequence[str]] = None) -> Dict[str, Point]:
    """What ``--step-times`` times, by ``steps.csv``'s name: the claims baseline, then every
    setting (or the ``only`` ones) at its screen; a resolution ramp as one point per side below
    the full one (``side_tag``), with the recipe beside it for the full side. Without ``only``, a
    setting whose step an earlier one's stands for (``same_step``) is not timed again."""
    baseline = replace(BASELINE, width=scale.width, scale_width=scale.width)
    wanted = set(only or SETTINGS)
    if any(SETTINGS[t].ramp() is not None for t in wanted if t in SETTINGS):
        wanted.add(REFERENCE)  # a ramp's full side, in the same rounds
    chosen: Dict[str, Setting] = {}
    for tag, s in SETTINGS.items():
        if tag in wanted and (only or not any(same_step(o, s) for o in chosen.values())):
            chosen[tag] = s
    timed: Dict[str, Point] = {"baseline": baseline}
    for tag, s in chosen.items():
        point = s.point(SCREEN_EPOCHS, scale)
        if s.ramp() is None:
            timed[tag] = point
            continue
        # a ramp's step changes with the epoch: each side below the full one is timed on its own
        # (the full side's step is the recipe's, the same work), ``step_times_on`` averages them
        fixed = tuple(o for o in point.extra if not o.startswith("+memory.resolution."))
        for side in sorted(set(s.sides(s.screen_epochs)) - {FULL_SIDE}):
            timed[side_tag(tag, side)] = replace(point, extra=(*fixed, f"augmentations.0.crop_size={side}"))
    return timed


def measure_step_times(scale: Scale, rounds: int, steps: int, only: Optional[Sequence[str]] = None) -> List[dict]:
    """Seconds per step of every setting (or of the ``only`` ones) and of the claims baseline,
    alternating within each round on this machine (run it alone); appends them to ``steps.csv``
    as one round (one ``date``): earlier rounds stay, so a ratio to an anchor pairs two rows of
    the same round (``step_times_on``), and the latest row of a setting is its measured step."""
    import torch  # local: --list and --report need no torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    timed = timed_points(scale, only)
    times: Dict[str, List[float]] = {tag: [] for tag in timed}
    out = Path(tempfile.mkdtemp())
    for round_ in range(rounds):
        for tag, point in timed.items():
            recipe, extra = step_overrides(scale, point)
            times[tag] += run_setting(extra, steps, out, False, recipe=recipe, fraction=0.2)
            print(f"speedrun: step times, round {round_ + 1}/{rounds}: {tag}", flush=True)
    machine, made, base = (
        clocks.cpu_description(scale.accelerator),
        clocks.commit(),
        statistics.median(times["baseline"]),
    )
    stamp = time.strftime("%Y-%m-%d %H:%M")
    rows = [
        {
            "setting": tag,
            "s_per_step": round(statistics.median(times[tag]), 4),
            "ratio_to_baseline": round(statistics.median(times[tag]) / base, 4),
            "steps": len(times[tag]),
            "precision": cpu_precision()[0],
            "threads": torch.get_num_threads(),
            "cpu": machine,
            "commit": made,
            "date": stamp,
        }
        for tag in timed
    ]
    for r in rows:  # printed first: the measurement is not lost to a failed write
        print(f"| {r['setting']} | {r['s_per_step']} s | {r['ratio_to_baseline']}x the baseline |", flush=True)
    scale.out.mkdir(parents=True, exist_ok=True)
    write_csv(scale.out / STEPS, read_csv(scale.out / STEPS) + rows)
    return rows


def side_tag(tag: str, side: int) -> str:
    """``steps.csv``'s name of a ramp setting's step at one side (``ramp@16``)."""
    return f"{tag}@{side}"


def ramp_step(tag: str, steps: Dict[str, speedrun_report.StepTime]) -> Optional[speedrun_report.StepTime]:
    """A ramp setting's step over its screen: the mean of its epochs' steps (every epoch has the
    same steps), each side's own step (the full side's: the recipe's, which it is but for the ramp). Exact
    for the screen's total seconds, which is what its lever reads; its epochs in between are
    placed at that mean (the early, smaller epochs took less). None until every side is timed."""
    s = SETTINGS[tag]
    sides = s.sides(s.screen_epochs)
    by_side = {side: steps.get(side_tag(tag, side) if side != FULL_SIDE else REFERENCE) for side in sides}
    if any(step is None for step in by_side.values()):
        return None
    parts = [by_side[side] for side in sides]
    bases = sorted({p.basis for p in parts})
    return speedrun_report.StepTime(
        statistics.mean(p.seconds for p in parts),
        parts[0].machine,
        parts[0].precision,
        f"mean of its epochs' sides {'/'.join(map(str, sides))} px ({'; '.join(bases)})",
    )


def same_work(a: Setting, b: Setting) -> bool:
    """Whether two settings train the same network on the same views (their steps cost the same)."""
    return (a.method, a.m, a.d, a.width_factor, a.recipe) == (b.method, b.m, b.d, b.width_factor, b.recipe)


def same_step(a: Setting, b: Setting) -> bool:
    """Whether one's measured step stands for the other's: the same work with Adam at the grid's
    batch (a schedule, the lr, the crops' scale or beta change no work of the step), or two ramps
    of the same work from the same side. LARS or another batch is timed on its own."""
    if a.resolution_start != b.resolution_start or not same_work(a, b):
        return False
    return a.resolution_start is not None or (a.grid_step and b.grid_step)


def beside_reference(
    name: str, machine: str, own: Sequence[dict], reference: Optional[speedrun_report.StepTime]
) -> Optional[speedrun_report.StepTime]:
    """``name`` (a setting, or the claims baseline) timed on ``machine`` in a call (one date of
    ``own``, steps.csv's rows) that timed the reference too, where the reference has several calls
    there: the two's ratio in its latest such call (a call again supersedes one before) x the
    reference's step there (``reference``: its median). A step on the Xeon moved by a third between
    quiet calls, any setting's, so a cost is a ratio measured side by side, on one scale. None
    where the reference has fewer than two calls there (the step as measured is that ratio)."""
    calls = [r for r in own if r["setting"] == REFERENCE and r["cpu"] == machine]
    dates = [c.get("date") for c in calls]
    rows = [r for r in own if r["setting"] == name and r["cpu"] == machine and r.get("date") in dates]
    if name == REFERENCE or not rows or len(calls) < 2 or reference is None:
        return None
    r = rows[-1]
    mate = [c for c in calls if c.get("date") == r.get("date")]
    ratio = float(r["s_per_step"]) / float(mate[-1]["s_per_step"])
    basis = f"its ratio to the {REFERENCE} in its call x the {REFERENCE}'s median"
    return speedrun_report.StepTime(ratio * reference.seconds, machine, r["precision"], basis)


def step_times_on(machine: str, own: Sequence[dict], claims: Sequence[dict]) -> Dict[str, speedrun_report.StepTime]:
    """setting -> its step time on ``machine``: measured there (``own``: the speedrun's
    steps.csv), else the claims grid's step where the setting's step is one of the grid's
    (``claims``: its step_times.csv), else its ratio to its anchor (``Setting.anchor``: the
    recipe it changes one thing of, or the claims baseline), measured on the first machine that
    measured it, times the anchor's step on ``machine``. Where the reference was timed here in
    several calls, its step is their median, and a setting timed in a call beside it is their
    ratio in that call x that median (:func:`beside_reference`). A ratio to the recipe keeps a change that
    costs nothing at no cost; one to the baseline would carry over how the baseline's d = 2048
    projector weighs against the recipe's on the other machine (0.67 on the AVX2 EPYC in fp32,
    0.59 on the bf16 one). A resolution ramp: the mean of its sides' (``ramp_step``)."""
    StepTime = speedrun_report.StepTime
    here = {r["setting"]: r for r in own if r["cpu"] == machine}  # rows in time order: the latest stays
    grid = {(r["method"], int(r["m"]), int(r["d"]), int(r["width"])): r for r in claims if r["cpu"] == machine}
    base = grid.get((BASELINE.method, BASELINE.m, BASELINE.d, BASELINE.width))
    anchors: Dict[str, StepTime] = {}
    if base is not None:
        anchors["baseline"] = StepTime(float(base["s_per_step"]), machine, base["precision"], "claims grid's step")
    out: Dict[str, StepTime] = {}

    def by_ratio(tag: str, anchor: str) -> Optional[StepTime]:
        """``tag``'s ratio to ``anchor`` on the first machine that measured it (its latest
        round there) x the anchor's step on ``machine``. The anchor's ratio to the baseline is
        the same round's where it was timed in it, else its median over that machine's rounds:
        a ratio from two rounds carries their 5-10% drift."""
        rows = [r for r in own if r["setting"] == tag]
        if not rows:
            return None
        row = [r for r in rows if r["cpu"] == rows[0]["cpu"]][-1]
        mates = [float(r["ratio_to_baseline"]) for r in own if r["setting"] == anchor and r["cpu"] == row["cpu"]]
        beside = [
            r for r in own if r["setting"] == anchor and r["cpu"] == row["cpu"] and r.get("date") == row.get("date")
        ]
        if anchor != "baseline" and (not mates or anchor not in out):
            anchor = "baseline"  # the anchor not measured on that machine, or unknown here
        basis = f"ratio to the {anchor} on {row['cpu']}"
        if anchor == "baseline":
            if "baseline" not in anchors:
                return None
            ratio, step = float(row["ratio_to_baseline"]), anchors["baseline"]
        else:  # both ratios to the baseline of their own round: the baseline's drift cancels
            mate = float(beside[-1]["ratio_to_baseline"]) if beside else statistics.median(mates)
            ratio, step = float(row["ratio_to_baseline"]) / mate, out[anchor]
            basis += "" if beside else f" (the {anchor}'s median over {len(mates)} rounds)"
        return StepTime(ratio * step.seconds, machine, step.precision, basis)

    calls = [r for r in own if r["setting"] == REFERENCE and r["cpu"] == machine]  # one row per call

    def measured(name: str, of: Optional[str] = None) -> Optional[StepTime]:
        """``name``'s own step here: its latest call's; the reference's, its median over calls."""
        r = here.get(name)
        if r is None:
            return None
        seconds, basis = float(r["s_per_step"]), "measured"
        if name == REFERENCE and len(calls) > 1:
            seconds = statistics.median(float(c["s_per_step"]) for c in calls)
            basis = f"median of {len(calls)} calls"
        return StepTime(seconds, machine, r["precision"], basis if of is None else f"{of}'s step, {basis}")

    def beside(name: str) -> Optional[StepTime]:
        return beside_reference(name, machine, own, out.get(REFERENCE))

    def first(steps: Iterable[Optional[StepTime]]) -> Optional[StepTime]:
        return next((step for step in steps if step is not None), None)

    def same_work_step(s: Setting) -> Optional[StepTime]:
        """A measured setting's step that does the same work (a schedule, the augmentation's
        scale or beta change no work of the step)."""
        return first(measured(t, t) for t in here if t in SETTINGS and same_step(SETTINGS[t], s))

    def grid_step(s: Setting) -> Optional[StepTime]:
        r = grid.get((s.method, s.m, s.d, 16)) if s.grid_step else None
        return None if r is None else StepTime(float(r["s_per_step"]), machine, r["precision"], "claims grid's step")

    # plain settings first, in SETTINGS' order (an anchor before what it anchors); then each
    # ramp from its sides, timed like plain settings against the same anchor
    for tag, s in SETTINGS.items():
        if s.ramp() is not None:
            continue
        if step := beside(tag) or measured(tag) or same_work_step(s) or grid_step(s) or by_ratio(tag, s.anchor):
            out[tag] = step
    for tag, s in SETTINGS.items():
        if s.ramp() is None:
            continue
        twins = [t for t, o in SETTINGS.items() if t != tag and same_step(o, s)]
        for side in set(s.sides(s.screen_epochs)) - {FULL_SIDE}:
            name, others = side_tag(tag, side), [side_tag(t, side) for t in twins]
            # its own side measured here, else a twin's; then its own ratio, else a twin's
            step = beside(name) or measured(name) or first(beside(n) or measured(n, n) for n in others)
            if step := step or by_ratio(name, s.anchor) or first(by_ratio(n, s.anchor) for n in others):
                out[name] = step
        if (step := ramp_step(tag, out)) is not None:
            out[tag] = step
    return out


# ----------------------------------------------------------------------------- report

#: the targets' kind of machine: 2 cores that compute bf16 natively
TARGET_KIND = clocks.machine_kind(2, True)
#: the machine of the targets: the records' first clock
TARGET_MACHINE = f"AMD EPYC, {TARGET_KIND}"


def of_the_targets_kind(machine: str) -> bool:
    """Whether ``machine`` (``clocks.cpu_description``) is of the targets' kind (``TARGET_KIND``).
    The README's records are timed on each such machine that measured the steps."""
    return machine.endswith(f", {TARGET_KIND}")


def peer_lines(rows: Sequence[dict]) -> List[str]:
    """The peer target's paragraph and table (``speedrun_report.speedup_rows``' rows)."""
    return [
        f"Against solo-learn's `barlow_twins` recipe (`peer`, {PEER_EPOCHS} epochs): the minutes each took to",
        "the peer's final kNN (the end of the first epoch at or above it, for both), the peer's run against",
        f"`{RECIPE_SETTING}`'s of the same seed (`peer.csv`; the target: at least 2x less time).",
        "",
        *(speedrun_report.speedup_table(rows) if rows else ["The peer's full run has not finished yet."]),
    ]


#: where the report writes its tables for readers: the modelled-clock records and the levers, both in
#: the docs (the README's headline table is the runs' own clock: own_clock.py)
README = REPO / "docs" / "speedrun.md"
LEVERS_DOC = REPO / "docs" / "speedrun.md"
RECORDS_START = "<!-- speedrun records: made by `python benchmarks/speedrun.py --report` from its CSVs -->"
LEVERS_START = "<!-- speedrun levers: made by `python benchmarks/speedrun.py --report` from its CSVs -->"
END = "<!-- end of the speedrun table -->"


def report(out: Path = OUT, readme: Optional[Path] = README, levers_doc: Optional[Path] = LEVERS_DOC) -> Path:
    """records.csv, levers.csv, summary.md and the plot in ``out`` from its CSVs; the record table
    into ``readme`` and the levers table into ``levers_doc``, between their markers."""
    out.mkdir(parents=True, exist_ok=True)
    results, curves = read_csv(out / "results.csv"), read_csv(out / "curves.csv")
    own, claims = read_csv(out / STEPS), read_csv(CLAIMS_STEP_TIMES)
    machines = list(dict.fromkeys([TARGET_MACHINE, *(r["cpu"] for r in own)]))
    finished = [(r["run"], setting_of(r["run"]), int(r["seed"])) for r in results]
    details = {r["run"]: r for r in results}
    runs = [(run, tag, recipe_words(tag), seed) for run, tag, seed in finished if tag in SETTINGS]
    records, levers = [], []
    screens: Dict[str, List[str]] = {}
    for run, tag, _, seed in runs:
        if run == SETTINGS[tag].screen().name(seed):
            screens.setdefault(tag, []).append(run)
    timed: set = set()
    for machine in machines:
        steps = step_times_on(machine, own, claims)
        timed |= set(steps)
        full = [r for r in runs if r[0] != SETTINGS[r[1]].screen().name(r[3])]
        records += speedrun_report.record_rows(full, curves, steps, details)
        levers += speedrun_report.lever_rows(LEVERS, screens, curves, steps, longer_runs(results))
    untimed = speedrun_report.untimed_rows(LEVERS, screens, curves, sorted(timed))
    untimed_block = []
    if untimed:
        untimed_block = [
            "",
            "Screened, but a step not timed yet (`--step-times --only ...`): the difference at equal",
            "epochs, which is equal seconds only where the two steps cost the same.",
            "",
            *speedrun_report.untimed_table(untimed),
        ]
    write_csv(out / "records.csv", records)
    write_csv(out / "levers.csv", levers)
    peer = speedrun_report.speedup_rows(records, curves, "peer", RECIPE_SETTING)
    write_csv(out / "peer.csv", peer)
    targets = [m for m in machines if of_the_targets_kind(m)]
    first = [r for r in records if r["timed_on"] in targets]
    claims_curves = read_csv(CLAIMS_STEP_TIMES.parent / "curves.csv")
    beside = baseline_rows(machines, own, claims, claims_curves, read_csv(CLAIMS_STEP_TIMES.parent / "results.csv"))
    lines = [
        "# Speedrun: time to accuracy on a CPU",
        "",
        "Made by `python benchmarks/speedrun.py --report` from `curves.csv`, `results.csv` and",
        "`steps.csv` (and the claims grid's `step_times.csv`). All of CIFAR-10, the width-16",
        "ResNet-18, backbone kNN (k = 20, cosine) on all 10,000 test images after every epoch;",
        "time = steps x the setting's step time on the named machine (`basis`: how it was timed).",
        "",
        f"## Records, timed on {' and on '.join(targets)}",
        "",
        *(speedrun_report.records_table(first) if first else ["No record run has finished yet."]),
        "",
        "## The peer, side by side",
        "",
        *peer_lines(peer),
        "",
        "## The record beside the claims baseline, on every machine timed",
        "",
        "The claims grid's 2-view, d = 2048, fixed-beta baseline (its curves, each machine's step):",
        "",
        *speedrun_report.records_table(sorted(records + beside, key=lambda r: r["timed_on"])),
        "",
        f"## Levers, screened at {SCREEN_EPOCHS} epochs (fitted schedules; the resolution ramp at "
        f"{SETTINGS['ramp'].screen_epochs}, about the same seconds), equal training seconds",
        "",
        *(speedrun_report.levers_table(levers) if levers else ["No lever pair has finished yet."]),
        *untimed_block,
        "",
        "Every clock: records.csv and levers.csv (one row per machine timed).",
    ]
    summary = out / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    if readme is not None:
        records_block = speedrun_report.records_table(first) if first else ["No record run has finished yet."]
        where = " and on ".join(targets)
        records_block += ["", f"(Timed on {where}; every clock: `benchmarks/results/speedrun/records.csv`.)"]
        records_block += ["", *peer_lines([r for r in peer if r["timed_on"] in targets])]
        readme.write_text(replace_between(readme.read_text(), RECORDS_START, END, records_block))
    if levers_doc is not None:
        shown = [r for r in levers if r["timed_on"] == machines[0]] or levers
        levers_block = speedrun_report.levers_table(shown) if shown else ["No lever pair has finished yet."]
        levers_block += untimed_block
        levers_doc.write_text(replace_between(levers_doc.read_text(), LEVERS_START, END, levers_block))
    steps = step_times_on(machines[0], own, claims)
    lines_to_plot = [
        (run, speedrun_report.curve_of(curves, run), steps[tag].seconds)
        for run, tag, _, seed in sorted(runs, key=lambda r: (r[1], r[3]))
        if tag in steps and run != SETTINGS[tag].screen().name(seed)
    ]
    base_step = baseline_step(machines[0], own, claims)
    for seed in (1, 2):
        name = BASELINE.name(seed)
        if base_step is not None and speedrun_report.curve_of(claims_curves, name):
            curve = speedrun_report.curve_of(claims_curves, name)
            lines_to_plot.append((f"claims baseline s{seed}", curve, base_step.seconds))
    if lines_to_plot:
        speedrun_report.plot(lines_to_plot, out / "knn_vs_minutes.png", machines[0])
    print(summary.read_text())
    return summary


def baseline_step(machine: str, own: Sequence[dict], claims: Sequence[dict]) -> Optional[speedrun_report.StepTime]:
    """The claims baseline's step on ``machine``: measured there beside the settings (``steps.csv``'s
    ``baseline``, its latest round; where the reference was timed in several calls, timed as every
    setting is, by :func:`beside_reference`), else the claims grid's own; None where neither."""
    key = (BASELINE.method, str(BASELINE.m), str(BASELINE.d), str(BASELINE.width))
    mine = next((r for r in reversed(own) if r["cpu"] == machine and r["setting"] == "baseline"), None)  # latest
    grid = next((r for r in claims if r["cpu"] == machine and (r["method"], r["m"], r["d"], r["width"]) == key), None)
    if mine is None and grid is None:
        return None
    reference = step_times_on(machine, own, claims).get(REFERENCE) if mine else None
    if (step := beside_reference("baseline", machine, own, reference)) is not None:
        return step
    r = mine or grid
    basis = "measured beside the settings" if mine else "claims grid's step"
    return speedrun_report.StepTime(float(r["s_per_step"]), machine, r["precision"], basis)


def baseline_rows(
    machines: Sequence[str], own: Sequence[dict], claims: Sequence[dict], claims_curves: Sequence[dict],
    claims_results: Sequence[dict],
) -> List[dict]:  # fmt: skip
    """The claims baseline's two runs (``claims_curves`` / ``claims_results``: the grid's CSVs) as
    records on each machine with its step (:func:`baseline_step`)."""
    details = {r["run"]: r for r in claims_results}
    runs = [(BASELINE.name(seed), "claims baseline", "mabt m=2 d=2048 fixed beta", seed) for seed in (1, 2)]
    rows: List[dict] = []
    for machine in machines:
        step = baseline_step(machine, own, claims)
        if step is not None:
            rows += speedrun_report.record_rows(runs, claims_curves, {"claims baseline": step}, details)
    return rows


def longer_runs(results: Sequence[dict]) -> Dict[str, List[str]]:
    """setting -> its finished runs, shortest first, for settings without a schedule: their first
    epochs are the screen's (a constant lr does not depend on ``max_epochs``)."""
    out: Dict[str, List[str]] = {}
    for r in sorted(results, key=lambda r: epochs_of(r["run"])):
        tag = setting_of(r["run"])
        if tag in SETTINGS and SETTINGS[tag].warmup is None:
            out.setdefault(tag, []).append(r["run"])
    return out


def kept_folder(scale: Scale, name: str) -> Path:
    """Where a run's checkpoints kept for its tail runs wait (``claims/keep.py``; ignored by git)."""
    return scale.out / "kept" / name


def tail_starts(scale: Scale, point: Point) -> List[int]:
    """The epochs after which ``point``'s checkpoint starts a tail run of the plan: one for each
    tail setting whose twin it is, at its epochs."""
    tails = [(p, SETTINGS[p.tag]) for p, _ in plan(scale) if p.epochs == point.epochs]
    return sorted({p.epochs - s.tail_epochs(p.epochs) for p, s in tails if s.twin == point.tag})


def keepers(scale: Scale, point: Point, seed: int) -> List[object]:
    """The child's callback that keeps its checkpoints at :func:`tail_starts`, if any."""
    starts = tail_starts(scale, point)
    if not starts:
        return []
    from claims.keep import KeepCheckpoints  # torch: the child only

    name = point.name(seed)
    return [KeepCheckpoints(scale.run_folder(name), kept_folder(scale, name), starts)]


def twin_checkpoint(scale: Scale, name: str) -> Optional[Path]:
    """The newest checkpoint kept from the tail run ``name``'s twin (same seed), or None if none is."""
    point, seed = find(scale, name)
    twin = SETTINGS[point.tag].twin
    if twin is None:
        raise SystemExit(f"{name}: --from-twin starts a tail run from its constant twin; {point.tag} has no twin")
    kept = kept_folder(scale, SETTINGS[twin].point(point.epochs, scale).name(seed)).glob("*.ckpt")
    return max(kept, key=lambda c: c.stat().st_mtime, default=None)


def from_kept_twin(scale: Scale, point: Point, seed: int) -> None:
    """Before a tail run's turn (``run_grid``'s ``prepare``): a run not begun anywhere goes on from
    its twin's kept checkpoint, if there is one, instead of training the twin's epochs again."""
    name = point.name(seed)
    if SETTINGS[point.tag].twin is None or finished(scale, name) or epochs_done(scale, name):
        return
    start = head_start(scale, point, seed)
    checkpoint = None if start.here or start.carried else twin_checkpoint(scale, name)
    if checkpoint is not None:
        go_on_from_twin(scale, name, checkpoint)


def go_on_from_twin(scale: Scale, name: str, checkpoint: Path) -> Path:
    """Starts the tail run ``name`` (a setting with a ``twin``) from its constant twin's
    ``checkpoint``, taken at an epoch's end at or before the tail's first epoch: until then the
    two are one training. The checkpoint, with the twin's args.json, goes into ``carry/<name>/``
    (the next launch resumes it, accepting the tail), and the twin's curve rows up to that epoch
    into curves.csv under ``name``, their ``source`` naming the twin. Returns the carried copy."""
    import shutil

    from claims.keep import checkpoint_step  # torch: only when a tail run goes on

    point, seed = find(scale, name)
    setting = SETTINGS[point.tag]
    if setting.twin is None:
        raise SystemExit(f"{name}: --from-twin starts a tail run from its constant twin; {point.tag} has no twin")
    twin = SETTINGS[setting.twin].point(point.epochs, scale).name(seed)
    twin_curve = speedrun_report.curve_of(read_csv(scale.curves), twin)
    if not checkpoint.is_file():
        raise SystemExit(f"{checkpoint}: not a file (give the twin {twin}'s checkpoint at an epoch's end)")
    step = checkpoint_step(checkpoint)
    at = next((r for r in twin_curve if int(r["step"]) == step), None)
    start = point.epochs - setting.tail_epochs(point.epochs)
    if at is None or int(at["epoch"]) > start:
        where = f"epoch {at['epoch']}" if at else f"step {step}, no epoch's end of {twin} in curves.csv"
        raise SystemExit(f"{checkpoint}: at {where}; {name} goes on from {twin} at an epoch's end up to {start}")
    epoch = int(at["epoch"])
    args = checkpoint.with_name("args.json")
    if not args.is_file():  # a copy kept aside: the twin's run folder has it
        args = next(scale.run_folder(twin).rglob("args.json"), args)
    if not args.is_file():
        raise SystemExit(f"{twin}: no args.json beside {checkpoint} or in {scale.run_folder(twin)}")
    inside = scale.carry_folder(name) / point.method / args.parent.name  # a run folder's layout
    shutil.rmtree(scale.carry_folder(name), ignore_errors=True)
    inside.mkdir(parents=True)
    shutil.copy2(checkpoint, inside / checkpoint.name)
    shutil.copy2(args, inside / "args.json")
    rows = [r for r in read_csv(scale.curves) if r["run"] != name]
    copied = [{**r, "run": name, "source": twin} for r in twin_curve if int(r["epoch"]) <= epoch]
    write_csv(scale.curves, rows + copied)
    print(f"speedrun: {name} goes on from {twin} after epoch {epoch} ({inside / checkpoint.name})")
    return inside / checkpoint.name


def recipe_words(tag: str) -> str:
    s = SETTINGS[tag]
    return " ".join([s.recipe, *s.overrides])


# ----------------------------------------------------------------------------- CLI


def list_plan(scale: Scale) -> None:
    """The plan's runs and their status."""
    curves = read_csv(scale.curves)
    print("| run | status | last kNN |\n|---|---|---|")
    for point, seed in plan(scale):
        name = point.name(seed)
        rows = speedrun_report.curve_of(curves, name)
        status = "done" if finished(scale, name) else f"epoch {rows[-1]['epoch']}/{point.epochs}" if rows else "to do"
        print(f"| {name} | {status} | {rows[-1]['knn_backbone'] if rows else '-'} |")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument(
        "--only",
        help="only the run of this name, else runs whose name contains this; with --step-times: these settings, "
        "comma-separated",
    )
    parser.add_argument("--list", action="store_true", help="the plan and its status")
    parser.add_argument("--report", action="store_true", help="records, levers, summary and plot from the CSVs")
    parser.add_argument("--step-times", action="store_true", help="every setting's step beside the baseline's")
    parser.add_argument(
        "--import-claims", action="store_true", help="the claims grid's runs of the const setting, as its runs"
    )
    parser.add_argument(
        "--from-twin", nargs="?", const="", metavar="CKPT",
        help="with --only <a tail run>: start it from its constant twin's checkpoint CKPT (an epoch's end up to the "
        "tail's start); without CKPT, the one the twin's run kept there (kept/<twin>/)",
    )  # fmt: skip
    parser.add_argument("--results", type=Path, help="results folder (default: benchmarks/results/speedrun[_gpu])")
    parser.add_argument("--scale", choices=sorted(SCALES), default="cpu", help="cpu, or the GPU twin")
    args, until = parse_run_arguments(parser, argv)
    out = args.results or (OUT if args.scale == "cpu" else OUT.with_name("speedrun_gpu"))
    scale = scale_named(args.scale, out)  # the claims harness's CSVs and runs, in this folder
    if args.run:
        point, seed = find(scale, args.run)
        run_child(scale, point, seed, args.pause_log, keepers(scale, point, seed))
    elif args.list:
        list_plan(scale)
    elif args.step_times:
        measure_step_times(scale, args.rounds, args.steps, args.only.split(",") if args.only else None)
    elif args.import_claims:
        added = import_claims(out, CLAIMS_STEP_TIMES.parent)
        print(f"speedrun: {', '.join(added) or 'nothing new'} from the claims grid into {out}")
    elif args.from_twin is not None:
        if not args.only:
            parser.error("--from-twin needs --only <the tail run>")
        checkpoint = Path(args.from_twin) if args.from_twin else twin_checkpoint(scale, args.only)
        if checkpoint is None:
            parser.error(f"--from-twin: no checkpoint kept from {args.only}'s twin in {scale.out / 'kept'}: name one")
        go_on_from_twin(scale, args.only, checkpoint)
    elif args.report:
        report(out, README if args.scale == "cpu" else None, LEVERS_DOC if args.scale == "cpu" else None)
    elif args.budget_min is not None or until is not None:
        run_budget(scale, plan(scale), Path(__file__), args, until, lambda p, seed: from_kept_twin(scale, p, seed))
    else:
        no_action(parser, args)


if __name__ == "__main__":
    main()
