"""What a run of the claims grid is: the scale it runs at, the grid's points in the order they
are started, and each run's recipe and Hydra overrides. Nothing here reads a run's state."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from step_clock import cifar_root

from mvssl_plugin.beta_rule import BARLOW_TWINS_C, VICREG_C

REPO = Path(__file__).resolve().parents[2]
RESULTS_ROOT = REPO / "benchmarks" / "results"


@dataclass(frozen=True)
class Scale:
    """Where the grid runs: the backbone width, the accelerator and precision, the results folder."""

    name: str
    width: int
    accelerator: str
    precision: str  # of the grid's runs; "auto": bf16 where the CPU computes it natively
    out: Path
    setting: str  # the report's words for it

    @property
    def results(self) -> Path:
        """One row per finished run."""
        return self.out / "results.csv"

    @property
    def curves(self) -> Path:
        """One row per run and epoch: its kNN and clocks."""
        return self.out / "curves.csv"

    @property
    def step_times(self) -> Path:
        """Seconds per step of every distinct step, per machine (``--step-times``)."""
        return self.out / "step_times.csv"

    def run_folder(self, name: str) -> Path:
        """A run's checkpoint folder (``checkpoint.dir``)."""
        return self.out / "runs" / name

    def carry_folder(self, name: str) -> Path:
        """Where a stopped run's checkpoint waits, committed, for another machine."""
        return self.out / "carry" / name


SCALES = {
    "cpu": Scale("cpu", 16, "cpu", "auto", RESULTS_ROOT / "cpu_claims", "width-16 ResNet-18, CPU"),
    "gpu": Scale("gpu", 64, "gpu", "bf16-mixed", RESULTS_ROOT / "gpu_claims", "ResNet-18, GPU"),
}


def scale_named(name: str, out: Optional[Path] = None) -> Scale:
    """The scale ``name`` with its results in ``out`` (default: the scale's own folder)."""
    return replace(SCALES[name], out=(out or SCALES[name].out).resolve())


#: the 2-view baseline's epochs; every other budget is set from it (equal views processed)
BASE_EPOCHS = 20
#: the CPU grid's backbone width; the points below are written at it and scaled to the scale's width
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
    #: the width of the scale the point belongs to: a name says its width only where it differs
    scale_width: int = WIDTH
    #: a named setting (the retired speedrun's, which ran through this grid): its
    #: name, recipe and Hydra overrides, applied after the grid's own (a key given here replaces the grid's)
    tag: str = ""
    recipe: str = ""
    extra: Tuple[str, ...] = ()

    def name(self, seed: int) -> str:
        if self.tag:
            return f"{self.tag}-e{self.epochs}-s{seed}"
        name = f"{self.method}-m{self.m}-d{self.d}-{self.beta}-f{self.fraction:g}-e{self.epochs}-s{seed}"
        name += "" if self.width == self.scale_width else f"-w{self.width}"
        return name if self.precision == "auto" else f"{name}-p{self.precision}"


def width_of(run: str, default: int = WIDTH) -> int:
    """The backbone width a run's name says (``-w32``), else ``default`` (its scale's)."""
    tail = [part for part in run.split("-") if part[:1] == "w" and part[1:].isdigit()]
    return int(tail[0][1:]) if tail else default


def grid(scale: Scale) -> List[Point]:
    """The grid, most decisive first (the order runs are started in), at ``scale``."""
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
    if scale.name == "cpu":
        return points
    # bf16 against fp32 and the width are questions about the CPU; the rest at the scale's width
    return [
        replace(p, width=scale.width, scale_width=scale.width)
        for p in points
        if not {"precision", "width"} & set(p.parts)
    ]


def schedule(scale: Scale, seeds: Sequence[int]) -> List[Tuple[Point, int]]:
    """(point, seed) in run order: the precision check's seeds, every point's first seed,
    then the deciding points' second."""
    points = grid(scale)
    check = [(p, s) for p in points for s in seeds if "precision" in p.parts]
    first = [(p, seeds[0]) for p in points if "precision" not in p.parts]
    rest = [(p, s) for s in seeds[1:] for p in points if p.deciding and "precision" not in p.parts]
    return check + first + rest


def find_point(scale: Scale, name: str) -> Tuple[Point, int]:
    for point, seed in schedule(scale, (1, 2)):
        if point.name(seed) == name:
            return point, seed
    raise SystemExit(f"{name}: not a run of the grid (see --list)")


def overrides(scale: Scale, point: Point, seed: int, root: Optional[Path] = None) -> Tuple[str, List[str]]:
    """(recipe, Hydra overrides) of a run, as its first launch would have them (the runner adds
    what resuming a copied checkpoint needs); the data under ``root`` (default: this machine's
    CIFAR-10 tree, which must exist)."""
    root = cifar_root() if root is None else root
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
        f"checkpoint.dir={scale.run_folder(point.name(seed))}",
        "auto_resume.enabled=true",
        "++auto_resume.max_hours=87600",  # a run waits between sessions: the recipe's 36 h would start it over
        "wandb.enabled=false",
        "epoch_knn.enabled=false",  # the child's own callback (epoch_eval.py) takes the per-epoch kNN
        "+enable_progress_bar=false",
        f"accelerator={scale.accelerator}",
        f"precision={scale.precision if point.precision == 'auto' else point.precision}",
    ]
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


def step_settings(scale: Scale) -> List[Tuple[Point, str, List[str]]]:
    """(point, recipe, overrides): one per distinct training step of the grid. A step's work
    depends on the method, m, d and the width; not on beta, the data fraction, the epochs or
    the seed."""
    found: Dict[Tuple[str, int, int, int], Tuple[Point, str, List[str]]] = {}
    for point in grid(scale):
        key = (point.method, point.m, point.d, point.width)
        if point.precision != "auto" or key in found:
            continue
        found[key] = (point, *step_overrides(scale, point))
    return list(found.values())


def step_overrides(scale: Scale, point: Point) -> Tuple[str, List[str]]:
    """(recipe, overrides) of one training step of ``point``, for ``step_clock.run_setting``:
    the run's own overrides less those the step clock sets itself."""
    recipe, extra = overrides(scale, point, 1)
    return recipe, [o for o in extra if override_key(o) not in _STEP_OWN]
