"""The whole CPU training step, paired: precision x memory format, as a run trains.

    python benchmarks/bench_cpu_step.py [--steps 12] [--rounds 3] [--views 4 2] [--profile]

Each setting builds the model, the in-memory loader and Lightning's Trainer exactly as
``main_pretrain.py --config-name mabt_cifar_cpu.yaml data.format=memory`` does (real CIFAR-10
JPEGs from ../shared/data/cifar10 or CIFAR10_DIR, 10% of them; width-16 ResNet-18, d = 256,
batch 128) and times ``--steps`` training steps after 3 warm-up steps: from one batch's start
to the next, so a step holds the views' augmentation, forward, loss, backward and the
optimizer. The settings alternate within each round so that all see the same machine; the
table gives medians and the ratio of views/s to the first setting (fp32, channels-last: the
CPU default before bf16 became one).

``--profile`` prints, per setting, the operators that take the most time over a few steps
(torch.profiler): where a setting gains or loses.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (label, overrides): what is compared
SETTINGS = (
    ("fp32 channels-last", ["precision=32", "performance.disable_channel_last=false"]),
    ("fp32 contiguous", ["precision=32", "performance.disable_channel_last=true"]),
    ("bf16 channels-last", ["precision=bf16-mixed", "performance.disable_channel_last=false"]),
    ("bf16 contiguous", ["precision=bf16-mixed", "performance.disable_channel_last=true"]),
)


def cifar_paths() -> tuple[str, str]:
    root = Path(os.environ.get("CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))
    if not (root / "train").is_dir():
        raise SystemExit(f"no CIFAR-10 ImageFolder tree at {root}: set CIFAR10_DIR")
    return str(root / "train"), str(root / "test")


class StepClock:
    """Seconds between consecutive training-batch starts (the whole step, data included)."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.starts = warmup, []

    def callback(self):
        from lightning.pytorch.callbacks import Callback

        clock = self

        class _Clock(Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                clock.starts.append(time.perf_counter())

        return _Clock()

    def steps(self) -> list[float]:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:])]
        return gaps[self.warmup :]


class FixedBatches:
    """The loader's first batch, ``len(loader)`` times: the step with no data pipeline at all
    (the views already cut), against which a loader's data wait is measured."""

    def __init__(self, loader) -> None:
        self.batch, self.length = next(iter(loader)), len(loader)

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        return (self.batch for _ in range(self.length))


def run_setting(
    overrides: list[str],
    steps: int,
    out: Path,
    profile: bool,
    recipe: str = "mabt_cifar_cpu.yaml",
    fraction: float = 0.1,
    fixed_batch: bool = False,
) -> list[float]:
    """Seconds of each of ``steps`` training steps after the warm-up, on ``fraction`` of the
    images (enough for warm-up + ``steps`` batches: the run stops after one epoch); with
    ``fixed_batch`` every step gets the loader's first batch (:class:`FixedBatches`)."""
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.data.loaders import build_pretrain_loader
    from mvssl_plugin.train.checks import file_screen
    from mvssl_plugin.train.pretrain import build_pretrain_model
    from mvssl_plugin.train.trainer import fit

    warmup = 3
    train, _ = cifar_paths()
    base = [
        f"data.train_path={train}",
        "data.val_path=null",
        "data.format=memory",
        f"data.fraction={fraction:g}",
        f"checkpoint.dir={out}",
        "checkpoint.enabled=false",
        "auto_resume.enabled=false",
        "wandb.enabled=false",
        "max_epochs=1",
        f"+max_steps={steps + warmup + 1}",
        "effective_rank.enabled=false",
        "+enable_progress_bar=false",
        "+enable_model_summary=false",
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        cfg, model = build_pretrain_model(compose_recipe(recipe, "pretrain", base + overrides))
        loader, _ = build_pretrain_loader(cfg, file_screen(cfg))
    if len(loader) < steps + warmup + 1:
        raise SystemExit(
            f"{len(loader)} batches in data.fraction={fraction:g} at this batch size, {steps + warmup + 1} needed: "
            "a larger fraction or fewer steps"
        )
    if fixed_batch:
        loader = FixedBatches(loader)
    clock = StepClock(warmup)
    profiler = None
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        profiler = torch_profile(activities=[ProfilerActivity.CPU])
    with contextlib.redirect_stdout(io.StringIO()), profiler or contextlib.nullcontext():
        fit(cfg, model, loader, None, cfg.method, extra_callbacks=[clock.callback()], resume=(None, None))
    if profiler is not None:
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
    return clock.steps()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--views", type=int, nargs="+", default=[4, 2])
    parser.add_argument("--only", nargs="+", help="labels of the settings to run (default: all)")
    parser.add_argument("--profile", action="store_true", help="one round, operator table per setting")
    args = parser.parse_args()
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from mvssl_plugin.config.hardware import cpu_precision

    isa = torch.backends.cpu.get_cpu_capability()
    print(
        f"torch {torch.__version__}; ATen {isa}; DNNL_MAX_CPU_ISA={os.environ.get('DNNL_MAX_CPU_ISA', '-')}; "
        f"precision auto would pick: {cpu_precision()}"
    )
    settings = [s for s in SETTINGS if not args.only or s[0] in args.only]
    out = Path(tempfile.mkdtemp())
    for m in args.views:
        times: dict[str, list[float]] = {label: [] for label, _ in settings}
        for _ in range(1 if args.profile else args.rounds):
            for label, overrides in settings:
                if args.profile:
                    print(f"\n### m = {m}, {label}")
                times[label] += run_setting(overrides + [f"data.num_views={m}"], args.steps, out, args.profile)
        print(f"\n## mabt m = {m}, d = 256, batch 128, width-16 ResNet-18, {torch.get_num_threads()} threads")
        print("| setting | s / step (median) | views / s | x first setting |")
        print("|---|---|---|---|")
        base = None
        for label, _ in settings:
            step = statistics.median(times[label])
            views = 128 * m / step
            base = base or views
            print(f"| {label} | {step:.3f} | {views:.0f} | {views / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
