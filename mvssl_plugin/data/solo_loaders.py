"""solo-learn's torch DataLoaders: its loader settings for training and evaluation, the
pretraining loader of the torchvision path, and the labelled (train, val) loaders."""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from mvssl_plugin.data.dataset_files import Screen
from mvssl_plugin.data.labelled_sets import classification_datasets


def solo_loader(cfg: DictConfig, dataset, train: bool) -> DataLoader:
    """solo-learn's loader settings (training: shuffled, last batch dropped; evaluation:
    in order, every image), with pinned memory only where there is a GPU to pin for."""
    return DataLoader(
        dataset,
        batch_size=cfg.optimizer.batch_size,
        shuffle=train,
        num_workers=cfg.data.num_workers,
        pin_memory=torch.cuda.is_available(),
        drop_last=train,
    )


def prepare_pretrain_dataloader(cfg: DictConfig, dataset) -> DataLoader:
    return solo_loader(cfg, dataset, train=True)


def classification_loaders(
    cfg: DictConfig, data_fraction: float = -1.0, screen: Optional[Screen] = None
) -> Tuple[DataLoader, DataLoader]:
    """solo-learn's labelled train/val loaders (its per-dataset transforms and loader
    settings), ImageFolder aware."""
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when the loaders are built;
    # importing this module (data.loaders does, for every format) loads none of it
    from solo.data.classification_dataloader import prepare_transforms

    transforms = prepare_transforms(cfg.data.dataset)
    train_set, val_set = classification_datasets(cfg, *transforms, data_fraction, screen)
    return solo_loader(cfg, train_set, train=True), solo_loader(cfg, val_set, train=False)
