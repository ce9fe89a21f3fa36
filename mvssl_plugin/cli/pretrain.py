"""``main_pretrain.py`` / ``mvssl-pretrain``: solo-learn's pretraining flow with the plugin.

The same flow as solo-learn's own script (its config parsing, datasets, transforms,
Checkpointer, auto-resume, wandb, Trainer), with the plugin registered, any number of
views for the multi-view methods, ImageFolder copies of CIFAR/STL-10, early config
errors, and the CPU handled. solo-learn's built-in methods run through it unchanged.
"""

from __future__ import annotations

from omegaconf import DictConfig

from mvssl_plugin.cli.common import fit, prepare_cfg, run_hydra


def build_pretrain_model(cfg: DictConfig):
    """Checks and completes a composed config as solo-learn's parser does, then builds the
    method it names. Returns ``(cfg, model)``; raises :class:`ConfigError` on bad input."""
    from lightning.pytorch import seed_everything
    from solo.args.pretrain import parse_cfg
    from solo.methods.base import BaseMethod

    from mvssl_plugin.config import adapt_to_hardware, apply_backbone_defaults, check_pretrain_cfg, select, world_size
    from mvssl_plugin.data.folders import solo_data_format
    from mvssl_plugin.registry import BACKBONE_NAMES, METHOD_NAMES, register

    cfg = prepare_cfg(cfg)
    methods = register()
    for notice in adapt_to_hardware(cfg):
        print(f"mvssl: {notice}")
    check_pretrain_cfg(cfg, methods, METHOD_NAMES, BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    apply_backbone_defaults(cfg, BACKBONE_NAMES)
    # solo-learn's parser keeps its own DALI path to ImageNet folders; ours reads any tree
    data_format = cfg.data.format
    cfg.data.format = solo_data_format(data_format)
    cfg = parse_cfg(cfg)
    cfg.data.format = data_format
    if select(cfg, "method_kwargs.view_parallel", False):
        # solo-learn scales lr by batch x processes / 256, but here every process holds
        # the same images: the global batch is one process's batch
        processes = world_size(cfg)
        cfg.optimizer.lr /= processes
        cfg.optimizer.classifier_lr /= processes
    seed_everything(cfg.seed)
    return cfg, methods[cfg.method](cfg)


def pretrain(cfg: DictConfig):
    """Pretrains the method a composed Hydra config names; returns the fitted Trainer."""
    from mvssl_plugin.data.folders import (
        check_batch_fits,
        pretrain_loader,
        pretrain_samples,
        pretrain_transform,
        pretrain_val_loader,
    )

    cfg, model = build_pretrain_model(cfg)
    if cfg.data.format == "dali":
        from mvssl_plugin.data.dali import pretrain_dali_loader

        files, targets = pretrain_samples(cfg)
        check_batch_fits(cfg, len(files))
        train_loader = pretrain_dali_loader(cfg, files, targets)
        if cfg.debug_augmentations:
            print("DALI views:", *train_loader.recipes, sep="\n")
    else:
        transform = pretrain_transform(cfg)
        if cfg.debug_augmentations:
            print("Transforms:", transform, sep="\n")
        train_loader = pretrain_loader(cfg, transform)
    return fit(cfg, model, train_loader, pretrain_val_loader(cfg), cfg.method)


def main() -> None:
    run_hydra(pretrain, "pretrain")


if __name__ == "__main__":
    main()
