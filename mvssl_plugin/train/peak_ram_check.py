"""The peak-RAM check before pretraining: the run's shape from its config, the estimate
(:mod:`mvssl_plugin.peak_ram_estimate`) against the memory the device has free, and what fits."""

from __future__ import annotations

import os
from typing import List, Optional

from omegaconf import DictConfig

from mvssl_plugin.config import select
from mvssl_plugin.config.hardware import world_size
from mvssl_plugin.config.views import views_of
from mvssl_plugin.data.key_checks import SMALL_IMAGE_DATASETS
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.peak_ram_estimate import (
    LOW_END,
    RunShape,
    available_bytes,
    estimate_peak,
    gib,
    known_backbone,
    largest_batch,
    largest_views,
)
from mvssl_plugin.registry import method_class


def loss_matrices(cfg: DictConfig, num_views: int) -> int:
    """D x D matrices the method's loss keeps alive: the plugin's methods say so themselves
    (``loss_matrices``); solo-learn's two-view methods, two."""
    cls = method_class(cfg.method)
    return cls.loss_matrices(select(cfg, "method_kwargs") or {}, num_views) if cls is not None else 2


def run_shape(cfg: DictConfig) -> Optional[RunShape]:
    """The shape of one training process of a checked pretraining config; None for a
    backbone the estimate does not know (the check is then skipped)."""
    backbone = str(select(cfg, "backbone.name"))
    small = select(cfg, "backbone.kwargs.small_input")
    small = bool(small) if small is not None else cfg.data.dataset in SMALL_IMAGE_DATASETS
    views = dict(views_of(cfg).per_resolution)
    if select(cfg, "method_kwargs.view_parallel", False):  # each process forwards m / processes views
        processes = max(1, world_size(cfg))
        views = {size: max(1, n // processes) for size, n in views.items()}
    num_views = sum(views.values())
    d = int(select(cfg, "method_kwargs.proj_output_dim", 2048) or 2048)
    shape = RunShape(
        backbone=backbone,
        views=tuple(views.items()),
        batch_size=int(cfg.optimizer.batch_size),
        proj_hidden_dim=int(select(cfg, "method_kwargs.proj_hidden_dim", d) or d),
        proj_output_dim=d,
        # a wider first stage counts as the base width everywhere: an upper bound, not a fit
        width=max(
            int(select(cfg, "backbone.kwargs.width", 64) or 64),
            int(select(cfg, "backbone.kwargs.first_stage_width", 0) or 0),
        ),
        small_input=small,
        projector_layers=2 if select(cfg, "method_kwargs.projector") == "paper" else 3,
        precision=str(select(cfg, "precision", "32")),
        optimizer=str(select(cfg, "optimizer.name", "adam")),
        loss_matrices=loss_matrices(cfg, num_views),
        num_workers=int(select(cfg, "data.num_workers", 0) or 0),
        device="cuda" if cfg.accelerator == "gpu" else "cpu",
    )
    return shape if known_backbone(shape) else None


def check_peak_ram(cfg: DictConfig, available: Optional[float] = None) -> List[str]:
    """Refuses a pretraining config whose estimated peak memory cannot fit, naming
    ``optimizer.batch_size`` / ``data.num_views`` and what would fit. ``available``
    (bytes per process) defaults to the device's free memory; CPU processes of one
    machine share its RAM. Returns notices (none so far)."""
    shape = run_shape(cfg)
    if shape is None:
        return []
    processes = 1
    if available is None:
        if shape.device == "cuda":  # this process's GPU only: asking others would open a context on each
            local_rank = int(os.environ.get("LOCAL_RANK", 0))
            available = available_bytes("cuda", int(cfg.devices[min(local_rank, len(cfg.devices) - 1)]))
        else:
            processes = max(1, len(cfg.devices))
            available = available_bytes("cpu") / processes
    estimate = estimate_peak(shape)
    if LOW_END * estimate.total <= available:
        return []
    where = "GPU memory free" if shape.device == "cuda" else "RAM available"
    per = f" per process ({processes} processes)" if processes > 1 else ""
    batch = largest_batch(shape, available)
    views = largest_views(shape, available)
    large = shape.views[0][1]
    fixes = []
    if batch >= 2:
        fixes.append(f"optimizer.batch_size={batch} with data.num_views={large}")
    if 2 <= views < large:
        fixes.append(f"data.num_views={views} with optimizer.batch_size={shape.batch_size}")
    fix = " or ".join(fixes) or "neither: choose a smaller backbone, crop size or projector"
    views_text = " + ".join(f"{n} x {size} px" for size, n in shape.views)
    raise ConfigError(
        f"optimizer.batch_size={shape.batch_size} with data.num_views={shape.num_views} ({views_text}) on "
        f"{shape.backbone}, d={shape.proj_output_dim}, precision {shape.precision} needs about "
        f"{gib(estimate.total)}{per} ({estimate.describe()}), more than the {gib(available)} of {where}: "
        f"the largest that fits is {fix}"
    )
