"""The Lightning Trainer as solo-learn's scripts wire it: checkpointing, resume, wandb,
the plugin's callbacks."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Callable, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.config import count_views, select, trainer_devices
from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.registry import beta_slot
from mvssl_plugin.runs import is_complete_checkpoint

Notify = Callable[[str], None]


def resume_checkpoint(cfg: DictConfig, run_kind: str, notify: Notify = print) -> Tuple[Optional[str], Optional[str]]:
    """solo-learn's explicit or automatic resume: (checkpoint path, wandb run id).

    Automatic resume takes the newest complete checkpoint of a matching run (see
    :mod:`mvssl_plugin.train.checkpoints`), not solo-learn's first-listed file; an
    unreadable checkpoint it skips is reported by name."""
    from mvssl_plugin.train.checkpoints import find_resumable

    if cfg.resume_from_checkpoint is not None:
        path = str(cfg.resume_from_checkpoint)
        if not os.path.isfile(path):
            raise ConfigError(f"resume_from_checkpoint={path!r} is not a file")
        if not is_complete_checkpoint(path):
            raise ConfigError(
                f"resume_from_checkpoint={path!r} is not a complete checkpoint (truncated or not a torch "
                "checkpoint): point it at another .ckpt, or drop it to resume from the newest complete one"
            )
        del cfg.resume_from_checkpoint
        return path, None
    if cfg.auto_resume.enabled:
        path, wandb_run_id, skipped = find_resumable(cfg, os.path.join(cfg.checkpoint.dir, run_kind))
        for bad in skipped:
            notify(f"skipped unreadable checkpoint {bad} (truncated or not a checkpoint); it is left in place")
        if path is not None:
            notify(f"resuming from the newest complete checkpoint that matches this config: {path}")
            return str(path), wandb_run_id
        if skipped:
            notify("no complete checkpoint of a matching run: starting a new run")
    return None, None


def run_tags(cfg: DictConfig) -> List[str]:
    """wandb tags that make runs of one project comparable: method, views, projector
    dimension, orthogonality weight (beta), data fraction."""
    method = cfg.method
    beta = beta_of(beta_slot(method), OmegaConf.select(cfg, "method_kwargs"))
    fraction = OmegaConf.select(cfg, "data.fraction", default=-1)
    tags = [
        f"method:{method}",
        f"views:{count_views(cfg)}",
        f"pdim:{OmegaConf.select(cfg, 'method_kwargs.proj_output_dim')}",
        f"fraction:{1.0 if fraction in (None, -1) else fraction:g}",
    ]
    if beta is not None:
        tags.append(f"beta:{beta:.4g}")
    return tags


def build_trainer(
    cfg: DictConfig,
    model,
    run_kind: str,
    wandb_run_id: Optional[str],
    resume_path: Optional[str] = None,
    extra_callbacks: Sequence = (),
):
    """Lightning Trainer with solo-learn's checkpoint layout (atomic writes, continuing in
    the resumed run's folder), wandb logger and learning-rate monitor, from the config's
    Trainer keys."""
    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers.wandb import WandbLogger
    from lightning.pytorch.strategies.ddp import DDPStrategy

    from mvssl_plugin.eval.callbacks import EffectiveRank, EpochSummary, RunLog, TimeToAccuracy
    from mvssl_plugin.train.checkpoints import AtomicCheckpointer

    # the clocks come before the checkpointer, so each checkpoint holds its epoch's time
    run_log = RunLog()
    callbacks, logger = [EpochSummary(), run_log], None
    if select(cfg, "time_to_accuracy.enabled", False):
        callbacks.append(TimeToAccuracy(cfg.time_to_accuracy.metrics, cfg.time_to_accuracy.targets, clock=run_log))
    if select(cfg, "effective_rank.enabled", False):
        callbacks.append(EffectiveRank(cfg.effective_rank.num_samples))
    if cfg.checkpoint.enabled:
        callbacks.append(
            AtomicCheckpointer(
                cfg,
                logdir=os.path.join(cfg.checkpoint.dir, run_kind),
                frequency=cfg.checkpoint.frequency,
                keep_prev=cfg.checkpoint.keep_prev,
                resume_from=resume_path,
            )
        )
    callbacks += list(extra_callbacks)
    if cfg.wandb.enabled:
        logger = WandbLogger(
            name=cfg.name,
            project=cfg.wandb.project,
            entity=cfg.wandb.entity,
            offline=cfg.wandb.offline,
            resume="allow" if wandb_run_id else None,
            id=wandb_run_id,
            tags=run_tags(cfg) if run_kind != "linear" else [run_kind],
        )
        logger.watch(model, log="gradients", log_freq=100)
        logger.log_hyperparams(OmegaConf.to_container(cfg))
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    options = OmegaConf.to_container(cfg)
    valid = inspect.signature(Trainer.__init__).parameters
    kwargs = {name: options[name] for name in valid if name in options}
    kwargs.update(
        logger=logger if logger is not None else False,
        callbacks=callbacks,
        enable_checkpointing=False,
        devices=trainer_devices(cfg),
        # view-parallel runs give every process the same images and split the views instead
        use_distributed_sampler=not select(cfg, "method_kwargs.view_parallel", False),
        strategy=DDPStrategy(find_unused_parameters=False) if cfg.strategy == "ddp" else cfg.strategy,
    )
    return Trainer(**kwargs)


def fit(cfg: DictConfig, model, train_loader, val_loader, run_kind: str, extra_callbacks: Sequence = ()):
    """What solo-learn's scripts end with: a contiguous (channels-last) model, resume,
    the Trainer, fit. ``run_kind`` names the folder under ``checkpoint.dir``."""
    import torch
    from solo.utils.misc import make_contiguous

    make_contiguous(model)
    if not cfg.performance.disable_channel_last:
        model = model.to(memory_format=torch.channels_last)
    ckpt_path, wandb_run_id = resume_checkpoint(cfg, run_kind, notify=lambda text: print(f"mvssl: {text}"))
    trainer = build_trainer(cfg, model, run_kind, wandb_run_id, resume_path=ckpt_path, extra_callbacks=extra_callbacks)
    trainer.fit(model, train_loader, val_loader, ckpt_path=ckpt_path)
    return trainer
