"""What the modelled-clock speedrun ran: its settings (a recipe and its Hydra overrides each), the
levers that compare two of them, and what a run's name says; ``speedrun_report.py`` reads its
finished runs with them, ``lever_split.py`` screens the levers again on the validation split.
Nothing here reads a run's state or times a step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from claims.grid import BASE_EPOCHS, RESULTS_ROOT, SCALES, Point, override_key

from mvssl_plugin.data.resolution import ResolutionRamp

#: the speedrun's results folder
OUT = RESULTS_ROOT / "speedrun"
#: the speedrun's step times (per setting; the claims grid's step_times.csv is per grid step)
STEPS = "steps.csv"
#: the claims grid's step times, where its steps are the speedrun's (``grid_step``) and the baseline's
CLAIMS_STEP_TIMES = SCALES["cpu"].step_times
RECIPE = "speedrun_cpu.yaml"
#: the lr the recipe's settings were screened at (``speedrun_cpu.yaml``'s until it took ``RECIPE_SETTING``'s):
#: each setting on the recipe that sets no lr of its own pins it, so the yaml's lr changes no setting's training
SCREEN_LR = 5e-4
#: the levers' reference: the recipe at ``SCREEN_LR``, what every lever changes one thing of
REFERENCE = "lr5e-4"
#: the setting ``speedrun_cpu.yaml`` is (its lr: a test composes both): the record the README shows first
RECIPE_SETTING = "lr2e-3"
#: the peer's epochs (solo-learn's recipe is written for 1000; the claims baseline's 20)
PEER_EPOCHS = 20
#: each lever's screening budget (a fitted schedule of this many epochs)
SCREEN_EPOCHS = 3
#: the recipe's view side (CIFAR-10's 32 px crops): a resolution ramp's full size
FULL_SIDE = 32
#: the speedrun's batch
CPU_BATCH = 128
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

    def screen(self) -> Point:
        """Its screen run."""
        return self.point(self.screen_epochs)

    def point(self, epochs: int) -> Point:
        """The run at ``epochs`` (named ``<tag>-e<epochs>-s<seed>``)."""
        extra = list(self.overrides)
        if self.recipe == RECIPE and not any(override_key(o) == "optimizer.lr" for o in extra):
            extra.insert(0, f"optimizer.lr={SCREEN_LR:g}")
        if self.warmup is not None:
            extra.append(f"++scheduler.warmup_epochs={epochs * self.warmup:g}")
        if self.resolution_start is not None:
            extra.append(f"+memory.resolution.start={self.resolution_start}")
        if self.tail is not None:
            extra.append(f"++scheduler.tail_epochs={self.tail_epochs(epochs)}")
        if self.batch_factor != 1:
            extra.append(f"optimizer.batch_size={round(CPU_BATCH * self.batch_factor)}")
        width = round(SCALES["cpu"].width * self.width_factor)
        return Point(
            self.method, self.m, self.d, "rule", 1.0, epochs, ("speedrun",), False,
            width=width, scale_width=SCALES["cpu"].width, tag=self.tag, recipe=self.recipe, extra=tuple(extra),
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
                grid_step=True, tail=0.2),
        Setting("lars", "LARS with solo-learn's Barlow Twins settings (lr 0.3, wd 1e-4, eta 0.02), warm-up + cosine",
                overrides=LARS),
        Setting("mixres", "2 views at 32 px + 2 at 16 px", m=4, warmup=None,
                overrides=("augmentations=cifar_multicrop", "data.num_views=4", "+data.num_small_views=2")),
        # the claims grid's m = 4, m = 8 and d = 64 runs were these trainings: their screens are the grid's first epochs
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


@dataclass(frozen=True)
class Lever:
    """One lever: ``changed`` against ``reference`` (settings), at equal training seconds."""

    name: str
    changed: str
    reference: str
    what: str


#: each lever: the setting that changes one thing, against the one it changes it in
LEVERS = (
    Lever("schedule", "cos-lr5e-4", REFERENCE, "warm-up + cosine to zero vs constant, same peak lr"),
    Lever("peak lr", "cos-lr1e-3", "cos-lr5e-4", "lr 1e-3 vs 5e-4, both scheduled"),
    Lever("peak lr", "cos-lr2e-3", "cos-lr1e-3", "lr 2e-3 vs 1e-3, both scheduled"),
    Lever("peak lr", "cos-lr4e-3", "cos-lr2e-3", "lr 4e-3 vs 2e-3, both scheduled"),
    Lever("constant lr", "lr1e-3", REFERENCE, "lr 1e-3 vs 5e-4, both constant"),
    Lever("constant lr", "lr2e-3", "lr1e-3", "lr 2e-3 vs 1e-3, both constant"),
    Lever("constant lr", "lr4e-3", "lr2e-3", "lr 4e-3 vs 2e-3, both constant"),
    Lever("optimizer", "lars", "cos-lr1e-3", "LARS (solo-learn's settings) vs Adam, both scheduled"),
    Lever("views", "m4", REFERENCE, "4 views vs 2, all at 32 px"),
    Lever("views", "m8", REFERENCE, "8 views vs 2, all at 32 px"),
    Lever("resolution", "mixres", REFERENCE, "+2 views at 16 px"),
    Lever("resolution", "mixres", "m4", "2 of the 4 views at 16 px vs all 4 at 32 px"),
    Lever("resolution", "ramp", REFERENCE, "16 -> 32 px over the run vs 32 px throughout"),
    Lever("constant lr", "ramp-lr1e-3", "ramp", "lr 1e-3 vs 5e-4, both with the resolution ramp"),
    Lever("together", "ramp-lr1e-3", REFERENCE, "the ramp and lr 1e-3 together vs neither"),
    Lever("projector", "d64", REFERENCE, "d = 64 vs 256"),
    Lever("projector", "d128", REFERENCE, "d = 128 vs 256"),
    Lever("width", "w24", REFERENCE, "width 24 vs 16"),
    Lever("batch", "b256", REFERENCE, "batch 256 vs 128, lr scaled with it"),
    Lever("augmentation", "crop0.2", REFERENCE, "crops of at least 20% vs 8% of the image"),
    Lever("augmentation", "jitter0.5", REFERENCE, "colour jitter at half strength vs full"),
    Lever("beta", "beta2x", REFERENCE, "beta's constant 6.6 vs 3.3"),
    Lever("the peer", "peer", RECIPE_SETTING, "solo-learn's barlow_twins recipe vs ours, same epochs"),
)
#: the levers' screens, in the order they ran
SCREEN = (REFERENCE, "m4", "m8", "d64", "cos-lr5e-4", "cos-lr1e-3", "lars", "peer", "cos-lr2e-3", "lr1e-3", "mixres",
          "cos-lr4e-3", "d128", "w24", "b256", "crop0.2", "beta2x", "ramp", "ramp-lr1e-3", "lr2e-3",
          "lr4e-3", "jitter0.5")  # fmt: skip


def recipe_words(tag: str) -> str:
    """A setting's recipe and overrides, as records.csv's ``recipe`` column gives them."""
    s = SETTINGS[tag]
    return " ".join([s.recipe, *s.overrides])


def setting_of(run: str) -> str:
    """The setting's tag in a run's name (``<tag>-e<epochs>-s<seed>``, claims.grid's Point.name)."""
    return run.rsplit("-e", 1)[0]


def epochs_of(run: str) -> int:
    """The epochs in a run's name."""
    return int(run.rsplit("-e", 1)[1].split("-s")[0])


def seed_of(run: str) -> str:
    """The seed in a run's name."""
    return run.rsplit("-s", 1)[-1]
