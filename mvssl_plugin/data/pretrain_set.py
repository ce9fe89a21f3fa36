"""The pretraining images: solo-learn's pretraining dataset (``data.fraction`` applied,
ImageFolder trees included, bad files screened), and the validation split ``data.holdout``
takes out of the training images first (:mod:`~mvssl_plugin.data.holdout`)."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from omegaconf import DictConfig

from mvssl_plugin.data.dataset_files import Screen, dataset_files, dataset_labels, screened
from mvssl_plugin.data.holdout import split_holdout
from mvssl_plugin.data.solo_names import solo_data_format, solo_dataset_name
from mvssl_plugin.errors import ConfigError


def _solo_pretrain_set(cfg: DictConfig, transform: Optional[Callable], fraction: float):
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when a dataset is built;
    # importing this module (the loaders of every format do) loads none of it
    from solo.data.pretrain_dataloader import prepare_datasets

    return prepare_datasets(
        solo_dataset_name(cfg.data.dataset, cfg.data.train_path),
        transform,
        train_data_path=cfg.data.train_path,
        data_format=solo_data_format(cfg.data.format),
        no_labels=bool(cfg.data.get("no_labels", False)),
        download=bool(cfg.data.get("download", False)),
        data_fraction=fraction,
    )


def holdout_count(cfg: DictConfig) -> int:
    """``data.holdout``: how many training images the validation split holds out (0: none)."""
    return int(cfg.data.get("holdout", 0) or 0)


def _split_samples(dataset, count: int) -> Tuple[list, list]:
    """(kept, held-out) ``samples`` of an ImageFolder training set (:mod:`~mvssl_plugin.data.holdout`)."""
    if not hasattr(dataset, "samples"):
        raise ConfigError(
            f"data.holdout={count}: the validation split needs a labelled ImageFolder tree in data.train_path "
            "(one folder per class); set data.holdout=0"
        )
    try:
        return split_holdout(dataset.samples, [label for _, label in dataset.samples], count)
    except ValueError as err:
        raise ConfigError(f"data.holdout={count}: {err}: lower it") from None


def pretrain_dataset(cfg: DictConfig, transform: Optional[Callable], screen: Optional[Screen] = None):
    """solo-learn's pretraining dataset (``data.fraction`` applied: its stratified subset,
    sklearn, seed 42), ImageFolder trees included; ``screen`` drops or names bad files.
    With ``data.holdout`` the validation split is taken out of all the images first and
    ``data.fraction`` splits the rest, as solo-learn would."""
    count = holdout_count(cfg)
    if not count:
        return screened(_solo_pretrain_set(cfg, transform, cfg.data.fraction), "data.train_path", screen)
    from sklearn.model_selection import train_test_split  # local: sklearn loads for a stratified split only

    dataset = _solo_pretrain_set(cfg, transform, -1)
    samples, _ = _split_samples(dataset, count)
    if cfg.data.fraction not in (None, -1):
        labels = [label for _, label in samples]
        samples, _ = train_test_split(samples, train_size=cfg.data.fraction, stratify=labels, random_state=42)
    dataset.samples = [tuple(s) for s in samples]
    return screened(dataset, "data.train_path", screen)


def holdout_samples(cfg: DictConfig, screen: Optional[Screen] = None) -> Tuple[List[str], List[int]]:
    """(image paths, class indexes) of the validation split ``data.holdout`` takes out of the
    training images: the same images for every run of a data path, whatever its seed,
    method or ``data.fraction``."""
    _, held = _split_samples(_solo_pretrain_set(cfg, None, -1), holdout_count(cfg))
    files = [path for path, _ in held]
    kept = set(screen("data.train_path", files)) if screen is not None else set(files)
    held = [(path, label) for path, label in held if path in kept]
    return [path for path, _ in held], [int(label) for _, label in held]


def pretrain_samples(cfg: DictConfig, screen: Optional[Screen] = None) -> Tuple[list[str], list[int]]:
    """(image paths, class indexes) of the pretraining set, the very files and order the
    torchvision path's dataset holds; class -1 for unlabelled folders."""
    dataset = pretrain_dataset(cfg, None, screen)
    files, labels = dataset_files(dataset), dataset_labels(dataset)
    return files, labels if labels is not None else [-1] * len(files)
