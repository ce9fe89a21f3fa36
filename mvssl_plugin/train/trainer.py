"""The Lightning Trainer as solo-learn's scripts wire it: checkpointing, resume, wandb,
the plugin's callbacks."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Sequence
from typing import List, Optional, Tuple

import torch
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers.wandb import WandbLogger
from lightning.pytorch.strategies.ddp import DDPStrategy
from omegaconf import DictConfig, OmegaConf
from solo.utils.misc import make_contiguous
from torch import nn

from mvssl_plugin.config import select, trainer_devices, views_of
from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.config.hardware import finite_check_every
from mvssl_plugin.eval.effective_rank import EffectiveRank
from mvssl_plugin.methods.finite_loss import FiniteLoss
from mvssl_plugin.progress import is_terminal
from mvssl_plugin.registry import beta_slot
from mvssl_plugin.train.checkpoints import AtomicCheckpointer
from mvssl_plugin.train.epoch_knn import EpochKNN
from mvssl_plugin.train.epoch_line import EpochSummary
from mvssl_plugin.train.lightning_progress import LogProgress
from mvssl_plugin.train.lr_ramp_callback import LrRamps
from mvssl_plugin.train.resume import resume_checkpoint
from mvssl_plugin.train.run_log import RunLog, TimeToAccuracy
from mvssl_plugin.train.signals import GracefulStop


def run_tags(cfg: DictConfig) -> List[str]:
    """wandb tags that make runs of one project comparable: method, views, projector
    dimension, orthogonality weight (beta), data fraction, optimizer; then the user's own
    (``wandb.tags``, a list: ``+wandb.tags=[leaderboard]``)."""
    method = cfg.method
    beta = beta_of(beta_slot(method), OmegaConf.select(cfg, "method_kwargs"))
    fraction = OmegaConf.select(cfg, "data.fraction", default=-1)
    tags = [
        f"method:{method}",
        f"views:{views_of(cfg).m}",
        f"pdim:{OmegaConf.select(cfg, 'method_kwargs.proj_output_dim')}",
        f"fraction:{1.0 if fraction in (None, -1) else fraction:g}",
    ]
    if beta is not None:
        tags.append(f"beta:{beta:.4g}")
    tags.append(f"optimizer:{OmegaConf.select(cfg, 'optimizer.name')}")
    return tags + [str(tag) for tag in OmegaConf.select(cfg, "wandb.tags", default=None) or []]


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
    return {"plugins": [SLURMEnvironment(auto_requeue=False)], "default_root_dir": logdir}


def build_trainer(
    cfg: DictConfig,
    model,
    run_kind: str,
    wandb_run_id: Optional[str],
    resume_path: Optional[str] = None,
    extra_callbacks: Sequence = (),
    epoch_knn: Optional[EpochKNN] = None,
):
    """Lightning Trainer with solo-learn's checkpoint layout (atomic writes, continuing in
    the resumed run's folder), wandb logger and learning-rate monitor, from the config's
    Trainer keys. ``epoch_knn`` (the kNN after every epoch) runs before the clock's epoch end,
    which it stops when its evaluation starts, and before ``metrics.csv``'s row, which holds it."""
    # the clocks come before the checkpointer, so each checkpoint holds its epoch's time
    run_log = RunLog()
    # the loss's read-back first: a diverged epoch stops before its kNN, summary and checkpoint
    callbacks, logger = [FiniteLoss(finite_check_every(cfg)), EpochSummary(), run_log], None
    if epoch_knn is not None:
        epoch_knn.clock = run_log
        callbacks.insert(2, epoch_knn)
    if select(cfg, "enable_progress_bar", True) and not is_terminal(sys.stdout):
        callbacks.append(LogProgress())  # a log file: lines, not tqdm's carriage-return redraws
    if select(cfg, "time_to_accuracy.enabled", False):
        callbacks.append(TimeToAccuracy(cfg.time_to_accuracy.metrics, cfg.time_to_accuracy.targets, clock=run_log))
    if select(cfg, "effective_rank.enabled", False):
        callbacks.append(EffectiveRank(cfg.effective_rank.num_samples))
    ramps = {
        key: select(cfg, f"scheduler.{key}", 0) or 0
        for key in ("warmup_minutes", "tail_epochs", "tail_minutes", "cycle_minutes")
    }
    if any(ramps.values()):
        budget = select(cfg, "epoch_knn.stop_after_minutes") if ramps["tail_minutes"] else None
        callbacks.append(LrRamps(**ramps, budget_minutes=budget, clock=run_log))
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
    the stem reading the 3 image channels is not affected. Kept while a torch that pyproject.toml
    allows has the bug: the canary in tests/config/test_hardware.py fails once the installed torch
    runs a width-4 narrow ResNet-18's channels-last backward held to AVX2; the guard can go once every torch of the
    range does."""
    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Conv2d)
        and module.in_channels != 3
        and module.in_channels < CPU_CHANNELS_LAST_MIN_CHANNELS
    ]


def memory_format_notice(cfg: DictConfig, model) -> Optional[str]:
    """Whether the model trains channels-last: solo-learn's default (``performance.disable_channel_last:
    false``), faster than contiguous on the CPU too (docs/hardware.md), except on the CPU for a
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
        "memory in torch's oneDNN on AVX2-only CPUs; a base width of 8 or more (backbone.kwargs.width, and "
        "first_stage_width where set) trains channels-last"
    )


def training_layout(cfg: DictConfig, model):
    """The model laid out as :func:`fit` trains it: contiguous parameters, then channels-last unless
    :func:`memory_format_notice` (or the config) turns it off. Returns ``(model, notice or None)``."""
    make_contiguous(model)
    notice = memory_format_notice(cfg, model)
    if not cfg.performance.disable_channel_last:
        model = model.to(memory_format=torch.channels_last)
    return model, notice


def fit(
    cfg: DictConfig,
    model,
    train_loader,
    val_loader,
    run_kind: str,
    extra_callbacks: Sequence = (),
    resume: Optional[Tuple[Optional[str], Optional[str]]] = None,
    epoch_knn: Optional[EpochKNN] = None,
):
    """What solo-learn's scripts end with: a contiguous (channels-last) model, resume,
    the Trainer, fit. ``run_kind`` names the folder under ``checkpoint.dir``; ``resume`` is
    :func:`~mvssl_plugin.train.resume.resume_checkpoint`'s answer when the caller asked it before building its loaders.

    Raises:
        Interrupted: after a SIGINT/SIGTERM (or SLURM's SIGUSR1) stopped the training (train/signals.py).
    """
    model, notice = training_layout(cfg, model)
    if notice:
        print(f"mvssl: {notice}")
    if resume is None:
        resume = resume_checkpoint(cfg, run_kind, notify=lambda text: print(f"mvssl: {text}"))
    ckpt_path, wandb_run_id = resume
    trainer = build_trainer(
        cfg, model, run_kind, wandb_run_id, resume_path=ckpt_path, extra_callbacks=extra_callbacks, epoch_knn=epoch_knn
    )
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
