"""The Lightning Trainer as solo-learn's scripts wire it: checkpointing, resume, wandb,
the plugin's callbacks."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.config import count_views, select, trainer_devices
from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.registry import beta_slot
from mvssl_plugin.runs import ARGS, is_complete_checkpoint, read_json

Notify = Callable[[str], None]


def resume_checkpoint(cfg: DictConfig, run_kind: str, notify: Notify = print) -> Tuple[Optional[str], Optional[str]]:
    """solo-learn's explicit or automatic resume: (checkpoint path, wandb run id).

    Automatic resume takes the newest complete checkpoint of a run whose whole training
    config matches (see :func:`mvssl_plugin.train.checkpoints.find_resumable`), not
    solo-learn's first-listed file of a run matching a few keys; an unreadable checkpoint
    it skips is reported by name. A run trained by another process, or trained with other
    settings (unless ``auto_resume.accept_changes``), stops the launch here, before anything
    of that run is rewritten."""
    from mvssl_plugin.runs import describe_holder, lock_holder
    from mvssl_plugin.train.checkpoints import check_run_readable, find_resumable, refuse_changes, training_differences

    accept = bool(select(cfg, "auto_resume.accept_changes", False))
    if cfg.resume_from_checkpoint is not None:
        path = str(cfg.resume_from_checkpoint)
        if not os.path.isfile(path):
            raise ConfigError(f"resume_from_checkpoint={path!r} is not a file")
        if not is_complete_checkpoint(path):
            raise ConfigError(
                f"resume_from_checkpoint={path!r} is not a complete checkpoint (truncated or not a torch "
                "checkpoint): point it at another .ckpt, or drop it to resume from the newest complete one"
            )
        run_dir = Path(path).parent
        holder = lock_holder(run_dir)
        if holder is not None:
            raise ConfigError(describe_holder(run_dir, holder) + ": wait for it to end")
        check_run_readable(run_dir)
        saved = read_json(run_dir / ARGS)
        differences = training_differences(saved, cfg) if saved is not None else []
        if differences and not accept:
            raise refuse_changes(run_dir, differences)
        _say_accepted(differences, run_dir, notify)
        del cfg.resume_from_checkpoint
        return path, None
    if cfg.auto_resume.enabled:
        found = find_resumable(cfg, os.path.join(cfg.checkpoint.dir, run_kind), accept_changes=accept)
        for bad in found.skipped:
            notify(f"skipped unreadable checkpoint {bad} (truncated or not a checkpoint); it is left in place")
        if found.checkpoint is not None:
            _say_accepted(found.differences, found.checkpoint.parent, notify)
            notify(f"resuming from the newest complete checkpoint that matches this config: {found.checkpoint}")
            return str(found.checkpoint), found.wandb_run_id
        for ckpt, why in found.passed_over:
            notify(f"passed over {ckpt}: {why}")
        if found.skipped or found.passed_over:
            notify("no complete checkpoint of a matching run: starting a new run")
    return None, None


def _say_accepted(differences, run_dir, notify: Notify) -> None:
    if differences:
        notify(f"auto_resume.accept_changes=true: {run_dir} goes on with {'; '.join(differences)}")


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


def under_slurm(environ=os.environ) -> bool:
    """Tasks started by ``srun`` in a SLURM job: what Lightning's ``SLURMEnvironment.detect()``
    tests (job names ``bash`` and ``interactive`` mark an interactive allocation, left to the
    other environments), without its warning when ``srun`` exists but is not used."""
    return "SLURM_NTASKS" in environ and environ.get("SLURM_JOB_NAME") not in ("bash", "interactive")


def slurm_options(logdir: str, environ=os.environ) -> dict:
    """The Trainer options of a SLURM job: Lightning's SLURM environment without its
    auto-requeue, since the plugin's handler stops on the warning signal and requeues the job
    (train/signals.py; two handlers would write two checkpoints and requeue twice); and
    ``default_root_dir`` under ``checkpoint.dir``, because Lightning resumes any
    ``hpc_ckpt_*.ckpt`` it finds there (the working folder by default) when no checkpoint is
    given, whatever run wrote it. Empty outside SLURM."""
    if not under_slurm(environ):
        return {}
    from lightning.fabric.plugins.environments import SLURMEnvironment

    return {"plugins": [SLURMEnvironment(auto_requeue=False)], "default_root_dir": logdir}


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

    from mvssl_plugin.eval.effective_rank import EffectiveRank
    from mvssl_plugin.progress import is_terminal
    from mvssl_plugin.train.checkpoints import AtomicCheckpointer
    from mvssl_plugin.train.run_log import RunLog, TimeToAccuracy
    from mvssl_plugin.train.signals import GracefulStop
    from mvssl_plugin.train.summary import EpochSummary, LogProgress

    # the clocks come before the checkpointer, so each checkpoint holds its epoch's time
    run_log = RunLog()
    callbacks, logger = [EpochSummary(), run_log], None
    if select(cfg, "enable_progress_bar", True) and not is_terminal(sys.stdout):
        callbacks.append(LogProgress())  # a log file: lines, not tqdm's carriage-return redraws
    if select(cfg, "time_to_accuracy.enabled", False):
        callbacks.append(TimeToAccuracy(cfg.time_to_accuracy.metrics, cfg.time_to_accuracy.targets, clock=run_log))
    if select(cfg, "effective_rank.enabled", False):
        callbacks.append(EffectiveRank(cfg.effective_rank.num_samples))
    # the caller's epoch work (a benchmark's evaluation row) ends before the epoch's checkpoint
    # too: a crash in it then costs the epoch again on resume, not its row forever
    callbacks += list(extra_callbacks)
    checkpointer = None
    if cfg.checkpoint.enabled:
        checkpointer = AtomicCheckpointer(
            cfg,
            logdir=os.path.join(cfg.checkpoint.dir, run_kind),
            frequency=cfg.checkpoint.frequency,
            keep_prev=cfg.checkpoint.keep_prev,
            resume_from=resume_path,
        )
        callbacks.append(checkpointer)
    callbacks.append(GracefulStop(checkpointer, run_log))
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
    kwargs = {**slurm_options(os.path.join(cfg.checkpoint.dir, run_kind))}
    kwargs.update({name: options[name] for name in valid if name in options})
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


#: convolutions reading fewer channels than this (the image's 3 aside) are kept out of
#: channels-last on the CPU, see :func:`narrow_convolutions`
CPU_CHANNELS_LAST_MIN_CHANNELS = 8


def narrow_convolutions(model) -> List[str]:
    """Names of the convolutions that torch 2.12's oneDNN cannot run channels-last on every CPU.

    On AVX2-only CPUs (``DNNL_MAX_CPU_ISA=AVX2`` reproduces it on any x86 CPU) the weight
    gradient of a channels-last convolution reading 2 to 7 channels corrupts memory or spins
    forever (``jit_avx2_1x1_convolution_bwd_weights``): a ResNet-18 of base width 2 to 7
    aborts with "double free or corruption" on its first backward; widths 8 to 64 run, and
    the stem reading the 3 image channels is not affected."""
    from torch import nn

    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Conv2d)
        and module.in_channels != 3
        and module.in_channels < CPU_CHANNELS_LAST_MIN_CHANNELS
    ]


def memory_format_notice(cfg: DictConfig, model) -> Optional[str]:
    """Whether the model trains channels-last: solo-learn's default (``performance.disable_channel_last:
    false``), which on the CPU too takes 0.55x to 0.82x the contiguous time of a ResNet-18 step at
    base widths 8, 16 and 64 (benchmarks/bench_loss.py --memory-format), except on the CPU for a
    model with :func:`narrow_convolutions`, which trains contiguous, inputs included. Sets
    ``performance.disable_channel_last`` accordingly; returns the notice to print, if any."""
    if cfg.performance.disable_channel_last or cfg.accelerator != "cpu":
        return None
    narrow = narrow_convolutions(model)
    if not narrow:
        return None
    cfg.performance.disable_channel_last = True
    model.no_channel_last = True  # solo-learn's methods read it at construction and convert their inputs
    return (
        f"channels-last is off on the CPU for this backbone: {len(narrow)} convolution(s) read fewer than "
        f"{CPU_CHANNELS_LAST_MIN_CHANNELS} channels (e.g. {narrow[0]}), whose channels-last backward corrupts "
        "memory in torch's oneDNN on AVX2-only CPUs; a base width of 8 or more (backbone.kwargs.width) trains "
        "channels-last"
    )


def fit(
    cfg: DictConfig,
    model,
    train_loader,
    val_loader,
    run_kind: str,
    extra_callbacks: Sequence = (),
    resume: Optional[Tuple[Optional[str], Optional[str]]] = None,
):
    """What solo-learn's scripts end with: a contiguous (channels-last) model, resume,
    the Trainer, fit. ``run_kind`` names the folder under ``checkpoint.dir``; ``resume`` is
    :func:`resume_checkpoint`'s answer when the caller asked it before building its loaders.

    Raises:
        Interrupted: after a SIGINT/SIGTERM (or SLURM's SIGUSR1) stopped the training (train/signals.py).
    """
    import torch
    from solo.utils.misc import make_contiguous

    from mvssl_plugin.train.signals import GracefulStop

    make_contiguous(model)
    notice = memory_format_notice(cfg, model)
    if notice:
        print(f"mvssl: {notice}")
    if not cfg.performance.disable_channel_last:
        model = model.to(memory_format=torch.channels_last)
    if resume is None:
        resume = resume_checkpoint(cfg, run_kind, notify=lambda text: print(f"mvssl: {text}"))
    ckpt_path, wandb_run_id = resume
    trainer = build_trainer(cfg, model, run_kind, wandb_run_id, resume_path=ckpt_path, extra_callbacks=extra_callbacks)
    stop = next(c for c in trainer.callbacks if isinstance(c, GracefulStop))
    try:
        trainer.fit(model, train_loader, val_loader, ckpt_path=ckpt_path)
    finally:
        stop.hold_off()
        if stop.checkpointer is not None:
            stop.checkpointer.release()
    interrupted = stop.outcome()  # requeues a SLURM job after its warning signal, the lock released
    if interrupted is not None:
        raise interrupted
    return trainer
