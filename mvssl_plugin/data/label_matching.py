"""What a built labelled set's labels decide: a validation set relabelled with the training
set's classes, matched by folder name; a stratified share of a set."""

from __future__ import annotations

import math
from typing import Tuple

from torch.utils.data import Subset

from mvssl_plugin.data.imagefolder import match_classes
from mvssl_plugin.errors import ConfigError


def label_by_name(train_set, val_set, keys: Tuple[str, str] = ("data.train_path", "data.val_path")) -> None:
    """Relabels an ImageFolder validation set with the training set's class indices, matched
    by folder name (:func:`~mvssl_plugin.data.imagefolder.match_classes`: raises ConfigError for
    names the training set lacks). torchvision numbers each tree's sorted folders on its own;
    a validation tree holding a subset of the classes keeps its images, labelled as the
    classifier's outputs are. Labels live in ``samples`` (what ImageFolder, the memory loaders
    and :func:`~mvssl_plugin.data.dataset_files.dataset_labels` read); ``targets`` and ``class_to_idx`` follow."""
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


def stratified_subset(dataset, fraction: float, key: str = "data.val_fraction"):
    """A stratified share of a labelled dataset (an ImageFolder or torchvision's CIFAR/STL),
    split as solo-learn's ``data_fraction`` splits a training set (sklearn, seed 42).

    Raises:
        ConfigError: ``key``'s share leaves a class without an image on either side of the
            split (sklearn's own error would be a traceback), naming the range that works.
    """
    from sklearn.model_selection import train_test_split  # local: sklearn loads for a stratified split only

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
