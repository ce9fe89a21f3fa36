"""What the leaderboard runs (``leaderboard.py`` collects and reports it): every method's screens,
each method's pick, its record runs and the runs of a lever at a record's length, as
``tag|main_pretrain.py arguments`` lines. Pure planning: it reads rows, not run folders."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

SCREEN_EPOCHS = 3
#: CIFAR-10's training images, and the split every screen holds out of them
TRAIN_IMAGES, HOLDOUT = 50_000, 5_000
#: every screen: its budget, the split it is read on, and no test set
SCREEN = (f"max_epochs={SCREEN_EPOCHS}", "seed=1", f"data.holdout={HOLDOUT}", "data.val_path=null",
          "epoch_knn.enabled=true", "epoch_knn.stop_after_minutes=null")  # fmt: skip
ADAM = ("optimizer.name=adam", "~optimizer.kwargs", "optimizer.weight_decay=1e-6", "scheduler.name=none")
#: solo-learn's LARS settings for its CIFAR recipes, for a recipe that ships Adam
LARS = (
    "optimizer.name=lars",
    "optimizer.weight_decay=1e-4",
    "+optimizer.kwargs.clip_lr=True",
    "+optimizer.kwargs.eta=0.02",
    "+optimizer.kwargs.exclude_bias_n_norm=True",
    "scheduler.name=warmup_cosine",
    "++scheduler.warmup_epochs=0.2",
)
#: every record in one offline wandb project, side by side (each run's own tags name its method and optimizer)
WANDB = ("wandb.enabled=true", "wandb.offline=true", "wandb.project=mvssl-leaderboard", "+wandb.tags=[leaderboard]")
#: a record's training minutes (the issue's comparison: each method's accuracy at 30 minutes) and seeds
RECORD_MINUTES, RECORD_SEEDS = 30.0, (1, 2)
ADAM_LRS = ("2e-3", "1e-3", "4e-3")
LARS_FACTORS = (1.0, 0.5, 2.0)


@dataclass(frozen=True)
class Method:
    key: str
    recipe: str
    lars_lr: float  # the LARS lr solo-learn ships for it (ours: Barlow Twins' and VICReg's)
    ships: str  # the optimizer its recipe ships: "lars" or "adam"
    ours: bool = False


METHODS = (
    Method("barlow", "solo_barlow_cifar_cpu.yaml", 0.3, "lars"),
    Method("vicreg", "solo_vicreg_cifar_cpu.yaml", 0.3, "lars"),
    Method("simclr", "solo_simclr_cifar_cpu.yaml", 0.4, "lars"),
    Method("byol", "solo_byol_cifar_cpu.yaml", 1.0, "lars"),
    Method("mabt", "speedrun_mabt_cpu.yaml", 0.3, "adam", ours=True),
    Method("mavicreg", "speedrun_mavicreg_cpu.yaml", 0.3, "adam", ours=True),
    Method("mmcr", "speedrun_mmcr_cpu.yaml", 0.3, "adam", ours=True),
)


@dataclass(frozen=True)
class Screen:
    method: Method
    optimizer: str  # "lars" or "adam"
    lr: str

    @property
    def tag(self) -> str:
        return f"{self.method.key}-{self.optimizer}-{self.lr}"

    @property
    def round(self) -> str:
        """A: the shipped setting and Adam at 2e-3; B: the other four; C: beyond the Adam grid's edge."""
        if self.optimizer == "adam" and self.lr not in ADAM_LRS:
            return "C"
        shipped = f"{self.method.lars_lr:g}" if self.optimizer == "lars" else ADAM_LRS[0]
        return "A" if self.lr == shipped else "B"

    def arguments(self) -> List[str]:
        family: Tuple[str, ...] = ()
        if self.optimizer != self.method.ships:
            family = ADAM if self.optimizer == "adam" else LARS
        return ["--config-name", self.method.recipe, *SCREEN, *family, f"optimizer.lr={self.lr}"]


def screens(round_: Optional[str] = None) -> List[Screen]:
    """Every method's six screens, round A's first."""
    every = [
        Screen(m, opt, lr)
        for m in METHODS
        for opt, lrs in (("lars", [f"{m.lars_lr * f:g}" for f in LARS_FACTORS]), ("adam", ADAM_LRS))
        for lr in lrs
    ]
    every.sort(key=lambda s: s.round)
    return [s for s in every if round_ in (None, s.round)]


def screen_of(tag: str) -> Optional[Screen]:
    """The screen a tag names (``<method>-<optimizer>-<lr>``), or None."""
    key, _, rest = tag.partition("-")
    optimizer, _, lr = rest.partition("-")
    method = next((m for m in METHODS if m.key == key), None)
    try:
        float(lr)
    except ValueError:
        return None
    return Screen(method, optimizer, lr) if method and optimizer in ("adam", "lars") else None


def _lr_text(lr: float) -> str:
    """1e-3's style for an lr: 5e-4, 8e-3, 1.6e-2."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def edge_screens(rows: Sequence[Dict[str, object]]) -> List[Screen]:
    """Round C: for each method whose six screens have run and whose best Adam screen is the
    lowest or the highest lr it screened, Adam at half or twice that lr. One rule for every
    method, so that no method's best lies beyond the grid unseen (run again after each round C)."""
    done = {str(r["tag"]) for r in rows}
    edges = []
    for m in METHODS:
        if any(s.tag not in done for s in screens() if s.method == m):
            continue
        adam = [r for r in rows if str(r["tag"]).startswith(f"{m.key}-adam-") and r["holdout_knn"] not in ("", None)]
        if not adam:
            continue
        lrs = sorted(float(r["lr"]) for r in adam)
        best = float(max(adam, key=lambda r: float(r["holdout_knn"]))["lr"])
        step = 0.5 if best == lrs[0] else 2.0 if best == lrs[-1] else None
        beyond = None if step is None else Screen(m, "adam", _lr_text(best * step))
        if beyond is not None and beyond.tag not in done:
            edges.append(beyond)
    return edges


#: the word a record's tag and setting carry when a peer's loss ran in float32
#: (``performance.loss_fp32=true``; ours compute theirs in float32 as they ship)
FP32 = "fp32"


def record_tag(screen: Screen, seed: int, tail: float = 0, fp32: bool = False) -> str:
    """``record-mmcr-adam-8e-3-s1``; ``record-mmcr-adam-8e-3-tail20-s1`` with the lr's tail;
    ``record-vicreg-adam-5e-4-fp32-s1`` for a peer whose loss ran in float32."""
    words = [*([f"tail{tail:g}"] if tail else []), *([FP32] if fp32 else [])]
    return f"record-{'-'.join([screen.tag, *words])}-s{seed}"


def record_of(tag: str) -> Optional[Screen]:
    """The screen a ``record_tag`` names, with or without its tail and ``fp32`` words, or None."""
    head, _, seed = tag.rpartition("-s")
    if not tag.startswith("record-") or not seed.isdigit():
        return None
    setting = head[len("record-") :].removesuffix(f"-{FP32}")
    stem, _, tail = setting.rpartition("-tail")
    return screen_of(stem if stem and tail.replace(".", "", 1).isdigit() else setting)


def split_tag(
    screen: Screen,
    minutes: float,
    tail: float,
    seed: int,
    warmup: float = 0,
    ramp: Optional[Tuple[int, float]] = None,
    compiled: bool = False,
    strength: Optional[float] = None,
    first_stage: Optional[int] = None,
    cycle: float = 0,
    hard: Optional[Tuple[int, int, int]] = None,
) -> str:
    """``split60-mmcr-adam-8e-3-tail20-s1``: a pick trained 60 minutes on the split, its lr's tail 20
    (or ``const``); ``split60-mmcr-adam-1.6e-2-warm3-tail20-s1`` with a 3-minute warm-up;
    ``split60-mmcr-adam-8e-3-ramp16by0.2-tail20-s1`` with the ramp ``(16, 0.2)``: views from 16 px,
    full size by 20% of ``max_epochs``; ``split60-mmcr-adam-8e-3-aug0.5-ramp16by0.2-tail20-s1`` with
    the augmentation's magnitude growing with that ramp from half the recipe's;
    ``split30-mmcr-adam-8e-3-compile-const-s1`` compiled; ``split30-mmcr-adam-8e-3-first32-const-s1``
    with the backbone's first stage 32 channels wide; ``split60-mmcr-adam-8e-3-cycle20-tail20-s1`` with
    the tail repeated in every 20-minute cycle of the budget; ``split60-mmcr-adam-8e-3-hard2of4at16-tail20-s1``
    trained on each image's 2 hardest of 4 views, chosen at 16 px."""
    words = [
        *([f"hard{hard[0]}of{hard[1]}at{hard[2]}"] if hard else []),
        *([f"first{first_stage}"] if first_stage else []),
        *(["compile"] if compiled else []),
        *([f"aug{strength:g}"] if strength is not None else []),
        *([f"ramp{ramp[0]}by{ramp[1]:g}"] if ramp else []),
        *([f"warm{warmup:g}"] if warmup else []),
        *([f"cycle{cycle:g}"] if cycle else []),
    ]
    return f"split{minutes:g}-{screen.tag}-{'-'.join([*words, f'tail{tail:g}' if tail else 'const'])}-s{seed}"


def split_of(tag: str) -> Optional[Tuple[Screen, str, str]]:
    """The (screen, lever, seed) a ``split_tag`` names, or None."""
    head, _, rest = tag.partition("-")
    rest, _, seed = rest.rpartition("-s")
    if not head.startswith("split") or not seed.isdigit():
        return None
    parts = rest.split("-")  # the screen's tag, then the lever's words; an lr may hold a "-" (8e-3)
    for cut in range(len(parts) - 1, 0, -1):
        if (screen := screen_of("-".join(parts[:cut]))) is not None:
            return screen, "-".join(parts[cut:]), seed
    return None


def lever_base(lever: str) -> str:
    """The lever a split run is read against: one word fewer (``warm3-tail20``: ``tail20``;
    ``tail20``: ``const``)."""
    return lever.partition("-")[2] or "const"


def split_lines(rows: Sequence[Dict[str, object]], method: str, minutes: float, tail: float, seed: int) -> List[str]:
    """``tag|arguments`` of a lever at a record's length, read on the split: ``method``'s record line
    for ``minutes`` (its pick, a constant Adam lr) with ``data.holdout=5000`` held out, at its
    constant lr and with the lr's tail over the budget's last ``tail`` minutes."""
    pick = picks(rows)[method]
    screen = screen_of(str(pick["tag"]))
    assert screen is not None, pick
    if screen.optimizer != "adam":
        raise SystemExit(f"{method}'s pick {pick['tag']} has a schedule: a tail decays a constant lr")
    mine = [r for r in rows if r["method"] == method]
    (line,) = [x for x in record_lines(mine, minutes) if x.startswith(f"{record_tag(screen, seed)}|")]
    args = line.partition("|")[2].split()
    at = args.index(f"seed={seed}")
    args[at:at] = [f"data.holdout={HOLDOUT}"]
    args = [f"+wandb.tags=[leaderboard,split{minutes:g}]" if a == WANDB[-1] else a for a in args]
    return [
        f"{split_tag(screen, minutes, 0, seed)}|{' '.join(args)}",
        f"{split_tag(screen, minutes, tail, seed)}|{' '.join(args)} ++scheduler.tail_minutes={tail:g}",
    ]


def lever_line(
    rows: Sequence[Dict[str, object]],
    method: str,
    minutes: float,
    tail: float,
    seed: int,
    warmup: float = 0,
    peak: str = "",
    ramp: Optional[Tuple[int, float]] = None,
    compiled: bool = False,
    strength: Optional[float] = None,
    first_stage: Optional[int] = None,
    cycle: float = 0,
    hard: Optional[Tuple[int, int, int]] = None,
) -> str:
    """``tag|arguments`` of a lever at a record's length, read on the split against ``split_lines``'s
    run with the tail (its ``lever_base``; ``--tail 0``: the constant lr's run): that run's arguments
    with a warm-up over the first ``warmup`` training minutes to the constant lr ``peak``, with
    views that grow from ``ramp = (start px, end)`` to full size by the fraction ``end`` of
    ``max_epochs`` (``memory.resolution``; the run stops on its clock well before ``max_epochs``),
    with that ramp and the augmentation's magnitude growing with it from ``strength`` of the
    recipe's (read against the ramp alone), compiled (``performance.compile``: its compilation on
    the training clock, the per-epoch kNN on the eager forward), or with the backbone's first stage
    ``first_stage`` channels wide (``backbone.kwargs.first_stage_width``: the step's tile fill), or with
    the tail repeated in every ``cycle`` minutes of the budget (``scheduler.cycle_minutes``: each
    cycle's end a finished model, arXiv 2212.05611's extendable cyclic lr), or trained on each image's
    ``hard = (k, m, side)``: its k hardest of m views, chosen at ``side`` px (``method_kwargs.hard_views``:
    arXiv 2212.05611's hard positive mining)."""
    if hard is not None and not (2 <= hard[0] < hard[1] and hard[2] >= 8):
        raise SystemExit(f"--hard-views {hard[0]} {hard[1]} {hard[2]}: keep k of m views (2 <= k < m), chosen at a "
                         "side of 8 px or more")  # fmt: skip
    if strength is not None and (not ramp or not 0 <= strength < 1):
        raise SystemExit(f"--strength {strength:g}: the augmentation's magnitude at the ramp's start, a fraction "
                         "in [0, 1), with --ramp px")  # fmt: skip
    if first_stage is not None and first_stage < 1:
        raise SystemExit(f"--first-stage-width {first_stage}: the first stage's channels, an integer >= 1")
    if cycle and not (0 < tail <= cycle and abs(minutes / cycle - round(minutes / cycle)) < 1e-6):
        raise SystemExit(f"--cycle {cycle:g}: the tail's cycle, minutes that divide --minutes {minutes:g} and hold "
                         f"--tail {tail:g} (above zero)")  # fmt: skip
    if (
        bool(warmup) != bool(peak)
        or (peak and float(peak) <= 0)
        or not (warmup or ramp or compiled or first_stage or cycle or hard)
        or ((warmup or ramp) and not tail)
    ):
        raise SystemExit("a lever needs --compile, --first-stage-width or --hard-views, or --tail minutes and "
                         "either --warmup minutes with a --peak lr above zero, or --ramp px (with --ramp-end), or "
                         "--cycle minutes")  # fmt: skip
    base = split_lines(rows, method, minutes, tail, seed)[1 if tail else 0]
    tag, _, args = base.partition("|")
    screen = split_of(tag)[0]  # type: ignore[index]
    words = args.split()
    if warmup:  # the recipe's lr replaced by the peak
        screen = Screen(screen.method, screen.optimizer, peak)
        words = [w for w in words if not w.startswith("optimizer.lr=")]
        words += [f"optimizer.lr={peak}", f"++scheduler.warmup_minutes={warmup:g}"]
    if ramp:
        words += [f"+memory.resolution.start={ramp[0]}", f"+memory.resolution.ramp_end={ramp[1]:g}"]
    if strength is not None:
        words += [f"+memory.resolution.strength_start={strength:g}"]
    if compiled:
        words += ["++performance.compile=true"]
    if first_stage:
        words += [f"++backbone.kwargs.first_stage_width={first_stage}"]
    if cycle:
        words += [f"++scheduler.cycle_minutes={cycle:g}"]
    if hard:
        words += [f"data.num_views={hard[1]}", f"++method_kwargs.hard_views={hard[0]}"]
        words += [f"++method_kwargs.hard_views_side={hard[2]}"]
    tag = split_tag(screen, minutes, tail, seed, warmup, ramp, compiled, strength, first_stage, cycle, hard)
    return f"{tag}|{' '.join(words)}"


def picks(rows: Sequence[Dict[str, object]]) -> Dict[str, Dict[str, object]]:
    """Each method's best screen by its holdout kNN (a tie: the first screened)."""
    best: Dict[str, Dict[str, object]] = {}
    for r in rows:
        if r["holdout_knn"] in ("", None):  # diverged before its first kNN
            continue
        if r["method"] not in best or float(r["holdout_knn"]) > float(best[str(r["method"])]["holdout_knn"]):
            best[str(r["method"])] = r
    return best


#: every setting with records and the recipe that is it (its lr, its tail where the split kept one, its
#: time budget): ``records`` plans from these, and tests/benchmarks/test_record_recipes.py holds each
#: recipe equal to the configs its records ran (their ``args.json``). The peers' recipes are their
#: picks beside solo-learn's own (``Method.recipe``); ``speedrun_cpu.yaml`` is the fastest of these.
RECORD_RECIPES: Dict[str, str] = {
    "barlow-adam-5e-4": "solo_barlow_adam_cifar_cpu.yaml",
    "vicreg-adam-5e-4": "solo_vicreg_adam_cifar_cpu.yaml",
    "simclr-adam-5e-4": "solo_simclr_adam_cifar_cpu.yaml",
    "byol-adam-5e-4": "solo_byol_adam_cifar_cpu.yaml",
    "mabt-adam-4e-3": "speedrun_mabt_cpu.yaml",
    "mavicreg-adam-4e-3": "speedrun_mavicreg_cpu.yaml",
    "mmcr-adam-8e-3": "speedrun_mmcr_cpu.yaml",
    "mmcr-adam-8e-3-tail20": "speedrun_mmcr_60min_cpu.yaml",
    "vicreg-adam-5e-4-tail20": "solo_vicreg_adam_60min_cpu.yaml",
}
#: the fastest setting with two seeds on record: what ``speedrun_cpu.yaml`` composes to
FASTEST = "mmcr-adam-8e-3"


def record_recipe(setting: str) -> str:
    """The recipe that is ``setting`` (a pick's tag, with ``-tail20`` for its tail)."""
    if setting not in RECORD_RECIPES:
        raise SystemExit(
            f"no recipe is the setting {setting}: write scripts/pretrain/cifar10/<name>.yaml from the pick's "
            "recipe with its lr and budget, add it to leaderboard_plan.RECORD_RECIPES, and run "
            "tests/benchmarks/test_record_recipes.py"
        )
    return RECORD_RECIPES[setting]


def record_lines(
    rows: Sequence[Dict[str, object]], minutes: float = RECORD_MINUTES, tail: float = 0, fp32: bool = False
) -> List[str]:
    """``tag|arguments`` of each method's record runs: the recipe that is its pick (all 50,000 training
    images, the test set read after every epoch, the budget), seeds 1 and 2, logged to one offline
    wandb project. With ``minutes`` beyond ``RECORD_MINUTES`` a constant lr trains on (its row is read
    at ``RECORD_MINUTES``; ``max_epochs`` raised to twice the epochs ``minutes`` hold at the method's
    fastest screen's pace, scaled from 45,000 images to 50,000); a schedule keeps its epochs, as a
    longer one would not pass through its record. With ``tail``, the settings whose recipe holds
    that tail (ours' where the split kept it, and the best peer's, as the trainer's lr is no method's),
    the tail starting at or after ``RECORD_MINUTES``. With ``fp32``, the
    peers' records with their loss in float32 (``+performance.loss_fp32=true``), as ours compute theirs."""
    if tail and minutes - tail < RECORD_MINUTES:
        raise SystemExit(
            f"a {tail:g}-minute tail of a {minutes:g}-minute record starts before minute {RECORD_MINUTES:g}, "
            f"where the records are compared: give --minutes at least {RECORD_MINUTES + tail:g} or a shorter --tail"
        )
    lines = []
    for method, pick in picks(rows).items():
        screen = screen_of(str(pick["tag"]))
        assert screen is not None, pick
        setting = screen.tag + (f"-tail{tail:g}" if tail else "")
        if tail and setting not in RECORD_RECIPES:  # ours' where the split kept it; the best peer's: the same
            continue
        if fp32 and screen.method.ours:  # ours' records already compute the loss in float32
            continue
        budget: List[str] = []
        if not tail and minutes != RECORD_MINUTES and screen.optimizer == "adam":
            ran = [r for r in rows if r["method"] == method and r.get("diverged_in_epoch") in ("", None)]
            pace = min(float(r["train_minutes"]) for r in ran) / SCREEN_EPOCHS * TRAIN_IMAGES / (TRAIN_IMAGES - HOLDOUT)
            budget = [f"max_epochs={2 * math.ceil(minutes / pace)}", f"epoch_knn.stop_after_minutes={minutes:g}"]
        for seed in RECORD_SEEDS:
            args = ["--config-name", record_recipe(setting), *budget, f"seed={seed}", *WANDB]
            args += ["+performance.loss_fp32=true"] if fp32 else []
            lines.append(f"{record_tag(screen, seed, tail, fp32)}|{' '.join(args)}")
    return lines
