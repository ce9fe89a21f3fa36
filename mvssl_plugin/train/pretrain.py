"""Pretraining, as solo-learn's own script does it (its parser, datasets, transforms,
checkpointer, auto-resume, wandb, Trainer), with the plugin's methods registered, any
number of views, every data format, early config errors, and the CPU handled.
solo-learn's built-in methods run through it unchanged."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Tuple

from omegaconf import DictConfig

from mvssl_plugin.config import adapt_to_hardware, open_cfg, select, world_size
from mvssl_plugin.config.views import check_views_given_once, hydra_overrides
from mvssl_plugin.data.key_checks import apply_backbone_defaults
from mvssl_plugin.registry import PLUGIN_BACKBONES, PLUGIN_METHODS, register


def build_pretrain_model(cfg: DictConfig, notify=print) -> Tuple[DictConfig, object]:
    """Checks and completes a composed config as solo-learn's parser does, then builds the
    method it names. Returns ``(cfg, model)``; raises ConfigError on bad input."""
    # local: torch, Lightning and solo-learn (seconds) load when a run starts, not for --help, and
    # after cli.exits.with_openmp_wait has set OMP_WAIT_POLICY: this module imports no torch
    from lightning.pytorch import seed_everything
    from solo.args.pretrain import parse_cfg
    from solo.methods.base import BaseMethod

    from mvssl_plugin.data.solo_names import solo_data_format
    from mvssl_plugin.methods.compiled import compile_forwards
    from mvssl_plugin.methods.loss_precision import KEY as LOSS_KEY
    from mvssl_plugin.methods.loss_precision import compute_loss_in_float32, loss_fp32
    from mvssl_plugin.train.launch_checks import check_pretrain_cfg

    check_views_given_once(cfg, hydra_overrides())
    cfg = open_cfg(cfg)
    methods = register()
    notices = adapt_to_hardware(cfg)
    notices += check_pretrain_cfg(cfg, methods, BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    for notice in notices:
        notify(f"mvssl: {notice}")
    apply_backbone_defaults(cfg, tuple(PLUGIN_BACKBONES))
    # solo-learn's parser keeps its own DALI path to ImageNet folders; ours reads any tree
    data_format = cfg.data.format
    cfg.data.format = solo_data_format(data_format)
    # solo-learn's own parser, unwrapped: the views were checked above (the bridge's wrapper,
    # mvssl_plugin_autoregister, is for solo-learn's scripts)
    cfg = inspect.unwrap(parse_cfg)(cfg)
    cfg.data.format = data_format
    if select(cfg, "method_kwargs.view_parallel", False):
        # solo-learn scales lr by batch x processes / 256, but here every process holds
        # the same images: the global batch is one process's batch
        processes = world_size(cfg)
        cfg.optimizer.lr /= processes
        cfg.optimizer.classifier_lr /= processes
    seed_everything(cfg.seed)
    model = methods[cfg.method](cfg)
    if cfg.method not in PLUGIN_METHODS and loss_fp32(cfg, default=False):
        # solo-learn's own methods compute their loss inside autocast; the key puts it in float32
        names = compute_loss_in_float32(model)
        notify(f"mvssl: {cfg.method}'s loss in float32 ({', '.join(names)}; {LOSS_KEY}=true)")
    if cfg.method not in PLUGIN_METHODS and select(cfg, "performance.compile", False):
        # a framework lever, not a method's: solo-learn's built-ins get it as ours do (MultiViewMethod)
        names = compile_forwards(model)
        notify(f"mvssl: {cfg.method}'s {' and '.join(names)} compiled (performance.compile=true)")
    return cfg, model


def pretrain(cfg: DictConfig, extra_callbacks: Sequence = ()):
    """Pretrains the method a composed Hydra config names; returns the fitted Trainer.
    ``extra_callbacks``: Lightning callbacks to add (benchmarks' per-epoch evaluations); their
    epoch ends run before the epoch's checkpoint is written."""
    # local: torch, Lightning and solo-learn, as in build_pretrain_model
    from mvssl_plugin.data.inmemory.eval_loaders import epoch_knn_sets
    from mvssl_plugin.data.loaders import build_pretrain_loader, build_val_loader
    from mvssl_plugin.train.epoch_knn import EpochKNN
    from mvssl_plugin.train.launch_checks import file_screen
    from mvssl_plugin.train.resume import resume_checkpoint
    from mvssl_plugin.train.start_block import StartBlock, record_facts, start_facts, steps_per_process
    from mvssl_plugin.train.trainer import fit

    cfg, model = build_pretrain_model(cfg)
    # which run this launch continues, before the data is read: a run it may not touch stops it now
    resume = resume_checkpoint(cfg, cfg.method, notify=lambda text: print(f"mvssl: {text}"))
    # every image file's header, before the Trainer exists (all formats); the validation
    # files first, so both are checked before the in-memory format decodes the training set
    screen = file_screen(cfg)
    val_loader = build_val_loader(cfg, screen)
    train_loader, num_images = build_pretrain_loader(cfg, screen)
    epoch_knn = None
    if select(cfg, "epoch_knn.enabled", False):
        knn = cfg.epoch_knn
        epoch_knn = EpochKNN(
            *epoch_knn_sets(cfg, screen),
            k=knn.k,
            temperature=knn.temperature,
            targets=knn.targets,
            stop_after_minutes=knn.get("stop_after_minutes"),
        )
    facts = start_facts(cfg, num_images, steps_per_process(cfg, train_loader))
    record_facts(cfg, facts)
    return fit(
        cfg,
        model,
        train_loader,
        val_loader,
        cfg.method,
        extra_callbacks=[StartBlock(facts), *extra_callbacks],
        resume=resume,
        epoch_knn=epoch_knn,
    )
