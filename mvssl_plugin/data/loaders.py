"""The pretraining loaders a config's ``data.format`` asks for, one entry for all formats."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from omegaconf import DictConfig

from mvssl_plugin.data.dali import pretrain_dali_loader
from mvssl_plugin.data.dataset_files import Screen
from mvssl_plugin.data.inmemory.eval_loaders import val_memory_loader
from mvssl_plugin.data.inmemory.pretrain import pretrain_memory_loader
from mvssl_plugin.data.labelled_sets import pretrain_val_set
from mvssl_plugin.data.pretrain_set import pretrain_dataset, pretrain_samples
from mvssl_plugin.data.solo_loaders import prepare_pretrain_dataloader, solo_loader
from mvssl_plugin.data.transforms import pretrain_transform
from mvssl_plugin.errors import ConfigError


def check_batch_fits(cfg: DictConfig, num_images: int) -> None:
    if num_images < cfg.optimizer.batch_size:
        raise ConfigError(
            f"data.train_path has {num_images} images (after data.fraction), fewer than "
            f"optimizer.batch_size={cfg.optimizer.batch_size}: lower the batch size"
        )


def build_pretrain_loader(cfg: DictConfig, screen: Optional[Screen] = None) -> Tuple[Any, int]:
    """(loader, number of images) for pretraining; batches are solo-learn's
    ``[indexes, [view_1, ..., view_m], targets]`` whatever the format. ``screen`` sees the
    training files before any loader is built (bad files: named or dropped)."""
    data_format = cfg.data.format
    if data_format in ("dali", "memory"):
        files, targets = pretrain_samples(cfg, screen)
        check_batch_fits(cfg, len(files))
        if data_format == "dali":
            loader = pretrain_dali_loader(cfg, files, targets)
            if cfg.debug_augmentations:
                print("DALI views:", *loader.recipes, sep="\n")
        else:
            loader = pretrain_memory_loader(cfg, files, targets)
        return loader, len(files)
    transform = pretrain_transform(cfg)
    if cfg.debug_augmentations:
        print("Transforms:", transform, sep="\n")
    dataset = pretrain_dataset(cfg, transform, screen)
    check_batch_fits(cfg, len(dataset))
    return prepare_pretrain_dataloader(cfg, dataset), len(dataset)


def build_val_loader(cfg: DictConfig, screen: Optional[Screen] = None) -> Optional[Any]:
    """The online classifier's validation batches ``(images, labels)``, or None without a
    val set: with ``data.format: memory`` (CIFAR and STL-10 sizes) decoded once and
    normalized on the training device, else solo-learn's torchvision loader (DALI
    included: its validation pass is solo-learn's)."""
    val_set = pretrain_val_set(cfg, screen)
    if val_set is None:
        return None
    if cfg.data.format == "memory":
        loader = val_memory_loader(cfg, val_set)
        if loader is not None:
            return loader
    return solo_loader(cfg, val_set, train=False)
