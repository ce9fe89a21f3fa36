"""The step clock every paired step timing uses: one training step of a real run, timed.

``run_setting`` builds the model, the loader and Lightning's Trainer exactly as
``main_pretrain.py`` does for a recipe and overrides (real CIFAR-10 JPEGs, ``fraction`` of
them) and times training steps after a warm-up, from one batch's start to the next: a step
holds the views' augmentation, forward, loss, backward and the optimizer. Its callers compare
settings side by side on one machine: ``bench_cpu_step.py`` (precision x memory format on a
CPU) and ``bench_pairs.py`` (the GPU pairs).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, TypeVar

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def cifar_root(splits: tuple[str, ...] = ("train", "test")) -> Path:
    """The CIFAR-10 ImageFolder root: ``CIFAR10_DIR``, else ../shared/data/cifar10; it must hold
    ``splits`` (timing steps needs only train/)."""
    root = Path(os.environ.get("CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))
    if not all((root / split).is_dir() for split in splits):
        folders = ", ".join(f"{split}/" for split in splits)
        raise SystemExit(f"no CIFAR-10 ImageFolder tree ({folders}) at {root}: set CIFAR10_DIR")
    return root


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


def quiet() -> None:
    """The libraries' warnings and log lines off, so that a timing prints its table alone (and a
    spawned timing child is as quiet as its parent)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def in_fresh_process(function: Callable[..., T], *args: Any, env: Optional[Dict[str, str]] = None) -> T:
    """``function(*args)`` in a fresh (spawned) process, quiet: nothing an earlier setting compiled,
    cached or allocated is there. ``function`` must be importable by name. ``env`` is added to the
    child's environment only, before it starts: what the OpenMP and oneDNN runtimes and the dynamic
    loader read once (``OMP_PROC_BIND``, ``DNNL_MAX_CPU_ISA``, ``LD_PRELOAD``)."""
    import multiprocessing

    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        with multiprocessing.get_context("spawn").Pool(1, initializer=quiet) as pool:
            return pool.apply(function, args)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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
    from mvssl_plugin.train.launch_checks import file_screen
    from mvssl_plugin.train.pretrain import build_pretrain_model
    from mvssl_plugin.train.trainer import fit

    warmup = 3
    train = cifar_root(("train",)) / "train"
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
        "epoch_knn.enabled=false",
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
