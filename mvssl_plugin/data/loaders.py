"""The loaders of each data format (the rows of :mod:`mvssl_plugin.data.formats` name them), and the
two entries every caller uses: the pretraining loader and the online classifier's validation loader."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from omegaconf import DictConfig

from mvssl_plugin.data.dali import pretrain_dali_loader
from mvssl_plugin.data.dataset_files import Screen
from mvssl_plugin.data.formats import data_format
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


def torchvision_pretrain_loader(cfg: DictConfig, screen: Optional[Screen]) -> Tuple[Any, int]:
    """solo-learn's dataset and DataLoader, the m views cut by torchvision in its workers."""
    transform = pretrain_transform(cfg)
    if cfg.debug_augmentations:
        print("Transforms:", transform, sep="\n")
    dataset = pretrain_dataset(cfg, transform, screen)
    check_batch_fits(cfg, len(dataset))
    return prepare_pretrain_dataloader(cfg, dataset), len(dataset)


def dali_pretrain_loader(cfg: DictConfig, screen: Optional[Screen]) -> Tuple[Any, int]:
    files, targets = pretrain_samples(cfg, screen)
    check_batch_fits(cfg, len(files))
    loader = pretrain_dali_loader(cfg, files, targets)
    if cfg.debug_augmentations:
        print("DALI views:", *loader.recipes, sep="\n")
    return loader, len(files)


def memory_pretrain_loader(cfg: DictConfig, screen: Optional[Screen]) -> Tuple[Any, int]:
    files, targets = pretrain_samples(cfg, screen)
    check_batch_fits(cfg, len(files))
    return pretrain_memory_loader(cfg, files, targets), len(files)


def build_pretrain_loader(cfg: DictConfig, screen: Optional[Screen] = None) -> Tuple[Any, int]:
    """(loader, number of images) for pretraining; batches are solo-learn's
    ``[indexes, [view_1, ..., view_m], targets]`` whatever the format. ``screen`` sees the
    training files before any loader is built (bad files: named or dropped)."""
    return data_format(cfg).build_pretrain_loader(cfg, screen)


def build_val_loader(cfg: DictConfig, screen: Optional[Screen] = None) -> Optional[Any]:
    """The online classifier's validation batches ``(images, labels)``, or None without a
    val set: the format's own where it has one (``memory``: decoded once and normalized on the
    training device, CIFAR and STL-10 sizes), else solo-learn's torchvision loader (DALI's too)."""
    val_set = pretrain_val_set(cfg, screen)
    if val_set is None:
        return None
    loader = data_format(cfg).build_val_loader(cfg, val_set)
    return loader if loader is not None else solo_loader(cfg, val_set, train=False)
