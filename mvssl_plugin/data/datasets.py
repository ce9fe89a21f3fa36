"""Dataset construction for the entry points, on top of solo-learn's data module.

solo-learn reads CIFAR and STL-10 only through torchvision's downloader. Here the same
datasets may also be ImageFolder trees (one sub-folder per class), detected from the
path: each dataset keeps its own normalization and the recipes their crop sizes, so a
JPEG copy such as ../shared/data/cifar10 trains exactly like the torchvision copy.
"""

from __future__ import annotations

import math
import os
from typing import Callable, List, Optional, Tuple

import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader, Dataset, Subset

from mvssl_plugin.data.checks import SMALL_IMAGE_DATASETS, TORCHVISION_DATASETS
from mvssl_plugin.data.holdout import split_holdout
from mvssl_plugin.data.imagefolder import is_image_folder_tree, match_classes
from mvssl_plugin.data.pixels import load_rgb
from mvssl_plugin.data.scan import CheckedLoader
from mvssl_plugin.errors import ConfigError

#: ``screen(key, files)``: the usable files among a data path's files (see
#: :func:`mvssl_plugin.data.scan.screen_files`); raises DataError for bad ones
Screen = Callable[[str, List[str]], List[str]]


def solo_dataset_name(dataset: str, path: Optional[str | os.PathLike]) -> str:
    """The name to hand solo-learn's dataset builders: ``custom`` for ImageFolder trees
    of datasets it would otherwise download (its ``custom`` path is a plain ImageFolder)."""
    if dataset in TORCHVISION_DATASETS and is_image_folder_tree(path):
        return "custom"
    return dataset


def solo_data_format(data_format: str) -> str:
    """The format to hand solo-learn: DALI and the in-memory format read ImageFolder
    trees, so their files are listed as solo-learn lists an ``image_folder`` (solo-learn's
    own DALI path is ImageNet-only)."""
    return "image_folder" if data_format in ("dali", "memory") else data_format


def pretrain_transform(cfg: DictConfig) -> Callable:
    """m-view transform: each pipeline's ``num_crops`` independent draws (solo-learn's)."""
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when a dataset is built;
    # importing this module (the loaders of every format do) loads none of it
    from solo.data.pretrain_dataloader import FullTransformPipeline, NCropAugmentation, build_transform_pipeline

    return FullTransformPipeline(
        [NCropAugmentation(build_transform_pipeline(cfg.data.dataset, aug), aug.num_crops) for aug in cfg.augmentations]
    )


def eval_keeps_size(dataset: str) -> bool:
    """True when solo-learn's validation transform for ``dataset`` does not resize (CIFAR's:
    ToTensor + Normalize), so every validation image must have one size to be batched."""
    return dataset in SMALL_IMAGE_DATASETS


def dataset_files(dataset) -> Optional[List[str]]:
    """The image files a dataset reads (ImageFolder: ``samples``; solo-learn's unlabelled
    folder: ``images``); None for datasets read from archives (torchvision's CIFAR/STL)."""
    if hasattr(dataset, "samples"):
        return [path for path, _ in dataset.samples]
    if hasattr(dataset, "images") and hasattr(dataset, "root"):
        return [os.path.join(dataset.root, name) for name in dataset.images]
    return None


def dataset_labels(dataset) -> Optional[List[int]]:
    """Labels in :func:`dataset_files` order, read from ImageFolder's ``samples``: solo-learn's
    ``data_fraction`` subsets ``samples`` but leaves ``targets`` whole. None without samples."""
    if hasattr(dataset, "samples"):
        return [int(label) for _, label in dataset.samples]
    return None


def keep_files(dataset, files: List[str]) -> None:
    """Restricts a dataset of :func:`dataset_files` to ``files`` (kept in its order)."""
    keep = set(files)
    if hasattr(dataset, "samples"):
        dataset.samples = [s for s in dataset.samples if s[0] in keep]
        dataset.imgs = dataset.samples
        dataset.targets = [label for _, label in dataset.samples]
    else:
        dataset.images = [name for name in dataset.images if os.path.join(dataset.root, name) in keep]


class UnlabelledFolder(Dataset):
    """solo-learn's unlabelled pretraining folder (``dataset_with_index(CustomDatasetWithoutLabels)``:
    ``root``, ``images``, ``transform``; items ``(index, image, -1)``), reading through
    :data:`loader` where solo-learn's opens files itself with PIL's ``convert("RGB")``.
    :func:`screened` gives such a dataset this class."""

    loader = CheckedLoader(load_rgb)

    def __getitem__(self, index: int):
        x = self.loader(os.path.join(self.root, self.images[index]))
        return index, (self.transform(x) if self.transform is not None else x), -1

    def __len__(self) -> int:
        return len(self.images)


def _solo_unlabelled(dataset) -> bool:
    from solo.data.pretrain_dataloader import CustomDatasetWithoutLabels  # local: as in pretrain_transform

    return isinstance(dataset, CustomDatasetWithoutLabels) and type(dataset).__name__ == "DatasetWithIndex"


def screened(dataset, key: str, screen: Optional[Screen]):
    """``dataset`` with only the files ``screen`` keeps, read by the decode every format
    shares (:func:`mvssl_plugin.data.pixels.load_rgb`: 16-bit and float images scaled, not
    clipped), its reads naming the file they fail on."""
    if hasattr(dataset, "loader"):
        if not isinstance(dataset.loader, CheckedLoader):
            dataset.loader = CheckedLoader(load_rgb)
    elif _solo_unlabelled(dataset):
        dataset.__class__ = UnlabelledFolder
    files = dataset_files(dataset) if screen is not None else None
    if files is not None:
        kept = screen(key, files)
        if len(kept) != len(files):
            keep_files(dataset, kept)
    return dataset


def _solo_pretrain_set(cfg: DictConfig, transform: Optional[Callable], fraction: float):
    from solo.data.pretrain_dataloader import prepare_datasets  # local: as in pretrain_transform

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


def check_batch_fits(cfg: DictConfig, num_images: int) -> None:
    if num_images < cfg.optimizer.batch_size:
        raise ConfigError(
            f"data.train_path has {num_images} images (after data.fraction), fewer than "
            f"optimizer.batch_size={cfg.optimizer.batch_size}: lower the batch size"
        )


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


def label_by_name(train_set, val_set, keys: Tuple[str, str] = ("data.train_path", "data.val_path")) -> None:
    """Relabels an ImageFolder validation set with the training set's class indices, matched
    by folder name (:func:`~mvssl_plugin.data.imagefolder.match_classes`: raises ConfigError for
    names the training set lacks). torchvision numbers each tree's sorted folders on its own;
    a validation tree holding a subset of the classes keeps its images, labelled as the
    classifier's outputs are. Labels live in ``samples`` (what ImageFolder, the memory loaders
    and :func:`dataset_labels` read); ``targets`` and ``class_to_idx`` follow."""
    if not all(hasattr(d, "samples") and hasattr(d, "class_to_idx") for d in (train_set, val_set)):
        return  # torchvision's CIFAR/STL archives: one fixed class list
    train_classes = sorted(train_set.class_to_idx, key=train_set.class_to_idx.get)
    index, _ = match_classes(train_classes, sorted(val_set.class_to_idx, key=val_set.class_to_idx.get), *keys)
    new = {old: index[name] for name, old in val_set.class_to_idx.items()}
    if all(old == label for old, label in new.items()):
        return
    val_set.samples = [(path, new[label]) for path, label in val_set.samples]
    val_set.imgs = val_set.samples
    val_set.targets = [label for _, label in val_set.samples]
    val_set.class_to_idx = {name: index[name] for name in val_set.class_to_idx}


def classification_datasets(
    cfg: DictConfig, t_train: Callable, t_val: Callable, data_fraction: float = -1.0, screen: Optional[Screen] = None
):
    """solo-learn's labelled (train, val) datasets with the given transforms, ImageFolder
    aware, validation labels matched to the training classes by folder name
    (:func:`label_by_name`); ``screen`` drops or names bad files."""
    from solo.data.classification_dataloader import prepare_datasets  # local: as in pretrain_transform

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


def classification_loaders(
    cfg: DictConfig, data_fraction: float = -1.0, screen: Optional[Screen] = None
) -> Tuple[DataLoader, DataLoader]:
    """solo-learn's labelled train/val loaders (its per-dataset transforms and loader
    settings), ImageFolder aware."""
    from solo.data.classification_dataloader import prepare_transforms  # local: as in pretrain_transform

    transforms = prepare_transforms(cfg.data.dataset)
    train_set, val_set = classification_datasets(cfg, *transforms, data_fraction, screen)
    return solo_loader(cfg, train_set, train=True), solo_loader(cfg, val_set, train=False)


def stratified_subset(dataset, fraction: float, key: str = "data.val_fraction"):
    """A stratified share of a labelled dataset (an ImageFolder or torchvision's CIFAR/STL),
    split as solo-learn's ``data_fraction`` splits a training set (sklearn, seed 42).

    Raises:
        ConfigError: ``key``'s share leaves a class without an image on either side of the
            split (sklearn's own error would be a traceback), naming the range that works.
    """
    from sklearn.model_selection import train_test_split  # local: as in pretrain_dataset

    labels = getattr(dataset, "targets", None)
    labels = list(labels if labels is not None else dataset.labels)  # STL-10 names them labels
    total, classes = len(labels), len(set(labels))
    kept = math.floor(fraction * total)  # sklearn's count for a float train_size
    if min(kept, total - kept) < classes:
        low, high = math.ceil(classes / total * 1000) / 1000, math.floor((1 - classes / total) * 1000) / 1000
        fix = f"set {key} between {low:g} and {high:g}, or -1 for all of them" if low <= high else f"set {key}=-1"
        raise ConfigError(
            f"{key}={fraction} keeps {kept} of {total} images in {classes} classes: a stratified share needs "
            f"at least one image of each class kept and one left out: {fix}"
        )
    keep, _ = train_test_split(list(range(len(labels))), train_size=fraction, stratify=labels, random_state=42)
    return Subset(dataset, sorted(keep))


def pretrain_val_set(cfg: DictConfig, screen: Optional[Screen] = None):
    """The online classifier's validation set (solo-learn's val transform), or None when
    there is no val set; ``data.val_fraction`` (in (0, 1)) keeps a stratified share of the
    validation images, for runs where a full validation pass would cost more than the
    training epoch."""
    if cfg.data.val_path is None or (cfg.data.dataset == "custom" and cfg.data.no_labels):
        return None
    from solo.data.classification_dataloader import prepare_transforms  # local: as in pretrain_transform

    _, val_set = classification_datasets(cfg, *prepare_transforms(cfg.data.dataset))
    val_set = screened(val_set, "data.val_path", screen)
    fraction = cfg.data.get("val_fraction", -1)
    if fraction not in (None, -1):
        val_set = stratified_subset(val_set, fraction)
    return val_set
