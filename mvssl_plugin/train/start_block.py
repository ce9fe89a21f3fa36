"""The start block: what a pretraining run is about to do, printed once before training.

The block's facts go into the config as ``run_summary`` (so into args.json and wandb); the run
folder is added when it exists (the checkpointer makes it at setup).
"""

from __future__ import annotations

import math
import os
from typing import Dict, Optional

from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from mvssl_plugin.config import select
from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.config.hardware import world_size
from mvssl_plugin.config.views import views_of
from mvssl_plugin.data.formats import FORMATS
from mvssl_plugin.lr_ramps import ramp_phrases
from mvssl_plugin.registry import beta_slot, is_multiview
from mvssl_plugin.train.run_log import run_folder


def views_text(cfg: DictConfig) -> str:
    """``4 x 32 px`` or ``2 x 32 px + 6 x 16 px``: views per image by resolution; with
    ``hard_views``, ``4 x 32 px, the 2 hardest trained (chosen at 16 px)``."""
    views = views_of(cfg)
    text = " + ".join(f"{n} x {size} px" for size, n in views.per_resolution)
    if views.hard:
        side = select(cfg, "method_kwargs.hard_views_side")
        text += f", the {views.hard} hardest trained (chosen at {f'{side} px' if side else 'full size'})"
    return text


def beta_text(cfg: DictConfig) -> str:
    """``lamb = 0.01146 (auto: 3.3/256 x 0.8889)``; for a weight relative to another
    (VICReg), the ratio beta is named too."""
    slot = beta_slot(cfg.method)
    kwargs = select(cfg, "method_kwargs") or {}
    beta = beta_of(slot, kwargs)
    if slot is None or beta is None:
        return "-"
    text = f"{slot.key} = {kwargs[slot.key]:.4g}"
    if slot.relative_to is not None:
        text += f" = {kwargs[slot.relative_to]:g} x beta {beta:.4g}"
    return f"{text} ({kwargs.get('beta_rule') or 'set by hand'})"


def steps_per_process(cfg: DictConfig, loader) -> int:
    """Optimizer steps per epoch in each process. A torch DataLoader is sharded by Lightning's
    DistributedSampler only when fit starts, so its length before then counts every image;
    the in-memory and DALI loaders shard themselves (and view-parallel runs do not shard)."""
    processes = world_size(cfg)
    if processes == 1 or not isinstance(loader, DataLoader) or select(cfg, "method_kwargs.view_parallel", False):
        return len(loader)
    per_process = math.ceil(len(loader.dataset) / processes)  # DistributedSampler pads to this
    return per_process // loader.batch_size if loader.drop_last else math.ceil(per_process / loader.batch_size)


def start_facts(cfg: DictConfig, num_images: int, steps_per_epoch: int) -> Dict[str, str]:
    """The run's key facts as short strings, in print order."""
    kwargs = select(cfg, "method_kwargs") or {}
    # a method of the plugin without objectives (mmcr) says only its projector
    loss = [f"objective {kwargs['objective']}"] if "objective" in kwargs else []
    if not loss and not is_multiview(cfg.method):
        loss = ["objective solo-learn's two-view loss"]
    projector = kwargs.get("projector", "solo")
    data_format = cfg.data.format
    where = FORMATS[data_format].where(cfg) if data_format in FORMATS else ""
    fraction = select(cfg, "data.fraction", -1)
    processes = world_size(cfg)
    return {
        "method": f"{cfg.method} ({', '.join([*loss, f'projector {projector}'])})",
        "views": views_text(cfg),
        "projector d": str(select(cfg, "method_kwargs.proj_output_dim")),
        "orthogonality": beta_text(cfg),
        "data": (
            f"{data_format}{where}: {num_images} images of {cfg.data.train_path}"
            + (f" (fraction {fraction})" if fraction not in (None, -1) else "")
            + ("" if select(cfg, "data.val_path") else "; no validation set")
        ),
        "batch": (
            f"{cfg.optimizer.batch_size} per process x {processes}; {steps_per_epoch} steps per epoch; "
            f"{cfg.max_epochs} epochs"
        ),
        "optimizer": f"{cfg.optimizer.name}, lr {cfg.optimizer.lr:g} ({schedule_text(cfg)})"
        + (f", {path}" if (path := select(cfg, "performance.optimizer_path")) else ""),
        "hardware": f"{cfg.accelerator}, {processes} process(es), precision {cfg.precision}"
        + (f" ({reason})" if (reason := select(cfg, "performance.precision_reason")) else "")
        + cpu_text(cfg),
    }


def schedule_text(cfg: DictConfig) -> str:
    """``constant, linear to zero over the last 20 training minutes of every 20-minute cycle of the
    60-minute budget``: the lr's schedule, solo-learn's by name, or the constant lr's ramps
    (train/lr_ramp_callback.py), so a run's log says which lr it trained with."""
    name = select(cfg, "scheduler.name", "none")
    if name != "none":
        return name
    ramp = lambda key: select(cfg, f"scheduler.{key}", 0) or 0  # noqa: E731
    phrases = ramp_phrases(ramp("warmup_minutes"), ramp("tail_epochs"), ramp("tail_minutes"), ramp("cycle_minutes"))
    if ramp("tail_minutes"):  # the tail's clock: the budget it ends
        phrases[-1] += f" of the {select(cfg, 'epoch_knn.stop_after_minutes'):g}-minute budget"
    parts = ["constant", *phrases]
    return ", ".join(parts)


def cpu_text(cfg: DictConfig) -> str:
    """``; 2 torch threads (OpenMP wait PASSIVE), 2 loader workers`` on the CPU, else nothing."""
    if cfg.accelerator != "cpu":
        return ""
    wait = os.environ.get("OMP_WAIT_POLICY", "default")
    threads = select(cfg, "performance.cpu_threads")
    return f"; {threads} torch thread(s) (OpenMP wait {wait}), {cfg.data.num_workers} loader worker(s)"


def format_block(facts: Dict[str, str]) -> str:
    width = max(len(k) for k in facts)
    return "\n".join(["mvssl run:"] + [f"  {k:<{width}}  {v}" for k, v in facts.items()])


class StartBlock(Callback):
    """Prints the start block once (rank 0) when fitting starts, with the run folder."""

    def __init__(self, facts: Dict[str, str]) -> None:
        self.facts = dict(facts)

    def on_fit_start(self, trainer, pl_module) -> None:
        folder: Optional[object] = run_folder(trainer)
        facts = {**self.facts, "run folder": str(folder) if folder is not None else "(checkpoints off)"}
        if trainer.is_global_zero:
            print(format_block(facts), flush=True)


def record_facts(cfg: DictConfig, facts: Dict[str, str]) -> None:
    """Keeps the facts in the config (args.json, wandb) as ``run_summary``."""
    cfg.run_summary = OmegaConf.create(dict(facts))
