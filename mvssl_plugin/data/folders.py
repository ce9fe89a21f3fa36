"""Dataset construction for the entry points, on top of solo-learn's data module.

solo-learn reads CIFAR and STL-10 only through torchvision's downloader. Here the same
datasets may also be ImageFolder trees (one sub-folder per class), detected from the
path: each dataset keeps its own normalization and the recipes their crop sizes, so a
JPEG copy such as ../shared/data/cifar10 trains exactly like the torchvision copy.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Tuple

from omegaconf import DictConfig
from torch.utils.data import DataLoader

from mvssl_plugin.errors import ConfigError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
TORCHVISION_DATASETS = ("cifar10", "cifar100", "stl10")


def is_image_folder_tree(path: Optional[str | os.PathLike]) -> bool:
    """True when ``path`` has at least one sub-folder holding an image file."""
    if path is None or not os.path.isdir(path):
        return False
    for entry in os.scandir(path):
        if entry.is_dir():
            for child in os.scandir(entry.path):
                if child.is_file() and child.name.lower().endswith(IMAGE_EXTENSIONS):
                    return True
    return False


def solo_dataset_name(dataset: str, path: Optional[str | os.PathLike]) -> str:
    """The name to hand solo-learn's dataset builders: ``custom`` for ImageFolder trees
    of datasets it would otherwise download (its ``custom`` path is a plain ImageFolder)."""
    if dataset in TORCHVISION_DATASETS and is_image_folder_tree(path):
        return "custom"
    return dataset


def pretrain_transform(cfg: DictConfig) -> Callable:
    """m-view transform: each pipeline's ``num_crops`` independent draws (solo-learn's)."""
    from solo.data.pretrain_dataloader import FullTransformPipeline, NCropAugmentation, build_transform_pipeline

    return FullTransformPipeline(
        [NCropAugmentation(build_transform_pipeline(cfg.data.dataset, aug), aug.num_crops) for aug in cfg.augmentations]
    )


def pretrain_loader(cfg: DictConfig, transform: Callable) -> DataLoader:
    """solo-learn's pretraining dataset and loader, ImageFolder trees included.

    Batches are ``[indexes, [view_1, ..., view_m], targets]``; ``data.fraction`` takes
    solo-learn's stratified subset (sklearn, seed 42).
    """
    from solo.data.pretrain_dataloader import prepare_dataloader, prepare_datasets

    dataset = prepare_datasets(
        solo_dataset_name(cfg.data.dataset, cfg.data.train_path),
        transform,
        train_data_path=cfg.data.train_path,
        data_format=cfg.data.format,
        no_labels=cfg.data.no_labels,
        download=bool(cfg.data.get("download", False)),
        data_fraction=cfg.data.fraction,
    )
    if len(dataset) < cfg.optimizer.batch_size:
        raise ConfigError(
            f"data.train_path has {len(dataset)} images (after data.fraction), fewer than "
            f"optimizer.batch_size={cfg.optimizer.batch_size}: lower the batch size"
        )
    return prepare_dataloader(dataset, batch_size=cfg.optimizer.batch_size, num_workers=cfg.data.num_workers)


def classification_loaders(cfg: DictConfig, data_fraction: float = -1.0) -> Tuple[DataLoader, DataLoader]:
    """solo-learn's labelled train/val loaders (its per-dataset transforms), ImageFolder aware."""
    from solo.data.classification_dataloader import prepare_dataloaders, prepare_datasets, prepare_transforms

    t_train, t_val = prepare_transforms(cfg.data.dataset)
    train_set, val_set = prepare_datasets(
        solo_dataset_name(cfg.data.dataset, cfg.data.train_path),
        t_train,
        t_val,
        train_data_path=cfg.data.train_path,
        val_data_path=cfg.data.val_path,
        data_format=cfg.data.format,
        download=bool(cfg.data.get("download", False)),
        data_fraction=data_fraction,
    )
    return prepare_dataloaders(
        train_set, val_set, batch_size=cfg.optimizer.batch_size, num_workers=cfg.data.num_workers
    )


def pretrain_val_loader(cfg: DictConfig) -> Optional[DataLoader]:
    """The online classifier's validation loader, or None when there is no val set."""
    if cfg.data.val_path is None or (cfg.data.dataset == "custom" and cfg.data.no_labels):
        return None
    return classification_loaders(cfg)[1]
