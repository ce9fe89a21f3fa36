"""ImageFolder trees on disk (one sub-folder of images per class), standard library only.

The config checks and every data format ask the same questions of a data path; the
answers live here, below both, so that neither imports the other.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from mvssl_plugin.errors import ConfigError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def is_image_file(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def images_under(folder: str | os.PathLike) -> List[str]:
    """Image files in ``folder`` and its sub-folders (torchvision's ImageFolder reads
    nested folders too), sorted."""
    found = []
    for parent, _, names in os.walk(folder, followlinks=True):
        found += [os.path.join(parent, n) for n in names if is_image_file(n)]
    return sorted(found)


def class_folders(path: str | os.PathLike) -> List[os.DirEntry]:
    """Every sub-folder, hidden ones included: torchvision's ImageFolder makes each a class."""
    return sorted((e for e in os.scandir(path) if e.is_dir()), key=lambda e: e.name)


def _has_image(folder: str) -> bool:
    for _, _, names in os.walk(folder, followlinks=True):
        if any(is_image_file(n) for n in names):
            return True
    return False


def is_image_folder_tree(path: Optional[str | os.PathLike]) -> bool:
    """True when ``path`` has at least one class sub-folder holding an image (at any depth)."""
    if path is None or not os.path.isdir(path):
        return False
    return any(_has_image(entry.path) for entry in class_folders(path))


def empty_class_folders(path: str | os.PathLike) -> List[str]:
    """Class sub-folders without a single image file, at any depth (torchvision's rule)."""
    return [entry.name for entry in class_folders(path) if not _has_image(entry.path)]


def _is_loop(link: str | os.PathLike, parent: str | os.PathLike) -> bool:
    """True when the folder ``link`` (inside ``parent``) resolves to ``parent`` or one of its
    ancestors: walking it with ``followlinks`` reads the same files again, level after level."""
    target, inside = os.path.realpath(link), os.path.realpath(parent)
    return inside == target or inside.startswith(target.rstrip(os.sep) + os.sep)


def nested_class_folders(path: str | os.PathLike) -> List[str]:
    """Class folders whose images sit (partly) in sub-folders: read, but worth a notice.
    A link back to the class folder or above (a symlink loop) is no sub-folder of images:
    its files are the class's own, read once (see :func:`first_of_each_file`)."""
    nested = []
    for entry in class_folders(path):
        children = (c for c in os.scandir(entry.path) if c.is_dir() and not _is_loop(c.path, entry.path))
        if any(_has_image(child.path) for child in children):
            nested.append(entry.name)
    return nested


def class_names(path: str | os.PathLike) -> List[str]:
    """The class names torchvision's ImageFolder finds in ``path`` (its sorted sub-folders)."""
    return [entry.name for entry in class_folders(path)]


def _shown(names: Sequence[str], limit: int = 10) -> str:
    names = list(names)
    return str(names) if len(names) <= limit else f"{names[:limit]} and {len(names) - limit} more"


def match_classes(
    train_classes: Sequence[str],
    val_classes: Sequence[str],
    train_key: str = "data.train_path",
    val_key: str = "data.val_path",
) -> Tuple[Dict[str, int], Optional[str]]:
    """Validation class names -> the training set's class indices, matched by folder name.

    torchvision's ImageFolder numbers each tree's sorted folders on its own, so a validation
    tree with other names, or a subset of the training classes, would be paired by position:
    its labels would be wrong with no word. Returns ``({val name: train index}, notice)``,
    the notice (None when the names are the same) saying that only some classes are evaluated.

    Raises:
        ConfigError: naming the validation classes the training set lacks.
    """
    index = {name: i for i, name in enumerate(train_classes)}
    unknown = [name for name in val_classes if name not in index]
    if unknown:
        known = f" (its classes: {_shown(train_classes)})" if len(train_classes) <= 10 else ""
        raise ConfigError(
            f"{val_key}: class folder(s) {_shown(unknown)} are not classes of {train_key}{known}: "
            "validation labels are matched to the training classes by folder name; rename those folders "
            "to their training names or remove them"
        )
    notice = None
    if len(val_classes) < len(train_classes):
        missing = [name for name in train_classes if name not in set(val_classes)]
        notice = (
            f"{val_key} has {len(val_classes)} of the {len(train_classes)} classes of {train_key} "
            f"(none of {_shown(missing)}): evaluating on those {len(val_classes)}, labelled by folder name"
        )
    return {name: index[name] for name in val_classes}, notice


def first_of_each_file(files: Sequence[str]) -> Tuple[List[str], List[str]]:
    """``(kept, dropped)``: ``files`` with each real file (``os.path.realpath``) kept at its
    first path only, in order, and the later paths that reach a file again (a symlink loop
    such as ``ln -s . loop`` inside a class folder, which torchvision's walk follows about
    40 levels deep; a file linked into a second folder)."""
    seen = set()
    kept, dropped = [], []
    for path in files:
        real = os.path.realpath(path)
        if real in seen:
            dropped.append(path)
        else:
            seen.add(real)
            kept.append(path)
    return kept, dropped


def duplicate_notice(key: str, dropped: Sequence[str], total: int) -> str:
    """One line: how many of ``key``'s ``total`` paths reached a file again, and where."""
    folders = sorted({os.path.dirname(path) for path in dropped}, key=len)
    tops: List[str] = []
    for folder in folders:  # a loop's levels a/loop, a/loop/loop, ...: only the first is named
        if not any(folder == top or folder.startswith(top + os.sep) for top in tops):
            tops.append(folder)
    where = [f"{top} (a symlink loop)" if _is_loop(top, os.path.dirname(top)) else top for top in tops]
    shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
    return (
        f"{key}: {len(dropped)} of {total} image paths reach a file already listed (real paths compared), "
        f"each file is read once: left out under {shown}"
    )
