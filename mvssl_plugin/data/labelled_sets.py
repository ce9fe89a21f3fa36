"""solo-learn's labelled (train, val) sets, ImageFolder aware: for the linear probe and kNN,
and the online classifier's validation set of a pretraining run."""

from __future__ import annotations

from typing import Callable, Optional

from omegaconf import DictConfig

from mvssl_plugin.data.dataset_files import Screen, screened
from mvssl_plugin.data.label_matching import label_by_name, stratified_subset
from mvssl_plugin.data.solo_names import solo_data_format, solo_dataset_name


def classification_datasets(
    cfg: DictConfig, t_train: Callable, t_val: Callable, data_fraction: float = -1.0, screen: Optional[Screen] = None
):
    """solo-learn's labelled (train, val) datasets with the given transforms, ImageFolder
    aware, validation labels matched to the training classes by folder name
    (:func:`~mvssl_plugin.data.label_matching.label_by_name`); ``screen`` drops or names bad files."""
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when a dataset is built;
    # importing this module (the fast probe's and kNN's do) loads none of it
    from solo.data.classification_dataloader import prepare_datasets

    train_set, val_set = prepare_datasets(
        solo_dataset_name(cfg.data.dataset, cfg.data.train_path),
        t_train,
        t_val,
        train_data_path=cfg.data.train_path,
        val_data_path=cfg.data.val_path,
        data_format=solo_data_format(cfg.data.format),
        download=bool(cfg.data.get("download", False)),
        data_fraction=data_fraction,
    )
    label_by_name(train_set, val_set)
    return screened(train_set, "data.train_path", screen), screened(val_set, "data.val_path", screen)


def pretrain_val_set(cfg: DictConfig, screen: Optional[Screen] = None):
    """The online classifier's validation set (solo-learn's val transform), or None when
    there is no val set; ``data.val_fraction`` (in (0, 1)) keeps a stratified share of the
    validation images, for runs where a full validation pass would cost more than the
    training epoch."""
    if cfg.data.val_path is None or (cfg.data.dataset == "custom" and cfg.data.no_labels):
        return None
    from solo.data.classification_dataloader import prepare_transforms  # local: as in classification_datasets

    _, val_set = classification_datasets(cfg, *prepare_transforms(cfg.data.dataset))
    val_set = screened(val_set, "data.val_path", screen)
    fraction = cfg.data.get("val_fraction", -1)
    if fraction not in (None, -1):
        val_set = stratified_subset(val_set, fraction)
    return val_set
